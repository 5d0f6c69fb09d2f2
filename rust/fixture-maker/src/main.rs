//! Writes the redb fixtures with the real redb crates: one file per redb major that
//! writes a distinct file format (1.5: format 1; 2.6: format 2, and format 3 on request;
//! 3.x and 4.x: format 3), each
//! with plain, versioned, typed (fixed- and variable-width tuples, Option, arrays,
//! char, signed ints), custom fixed- and variable-width key types, multimap and empty
//! tables and odd keys, plus `<file>.json`: the stored pairs in redb's own order.
//!
//! Run: `cargo run --release --manifest-path rust/fixture-maker/Cargo.toml -- fixtures/redb`;
//! `... -- dump FORMAT FILE` prints what that redb reads from FILE with the fixtures' types.
use std::path::PathBuf;

mod v1 {
    use redb1 as r;
    use r::{RedbKey as Key, RedbValue as Value};
    include!("body.rs");
}

mod v2 {
    use redb2 as r;
    use r::{Key, Value};
    include!("body.rs");
}

mod v3 {
    use redb3 as r;
    use r::{Key, ReadableDatabase, Value};
    include!("body.rs");
}

mod v4 {
    use redb as r;
    use r::{Key, ReadableDatabase, Value};
    include!("body.rs");
}

/// redb 2.6 writing file format 3 (its opt-in), with its own type encodings.
fn write_v2_format3(path: &std::path::Path) -> String {
    let _ = std::fs::remove_file(path);
    let db = redb2::Builder::new().create_with_file_format_v3(true).create(path).unwrap();
    v2::write_db(path, db)
}

fn main() {
    // `dump FORMAT FILE`: print what redb of that format's version reads from FILE.
    if std::env::args().nth(1).as_deref() == Some("dump") {
        let fmt = std::env::args().nth(2).expect("dump FORMAT FILE");
        let file = PathBuf::from(std::env::args().nth(3).expect("dump FORMAT FILE"));
        let json = match fmt.as_str() {
            "1" => v1::dump(&file),
            "2" => v2::dump(&file),
            "3.x" => v3::dump(&file),
            _ => v4::dump(&file),
        };
        println!("{json}");
        return;
    }
    let dir = PathBuf::from(std::env::args().nth(1).unwrap_or_else(|| "fixtures/redb".into()));
    std::fs::create_dir_all(&dir).unwrap();
    for (name, write) in [
        ("redb1-format1.redb", v1::write as fn(&std::path::Path) -> String),
        ("redb2-format2.redb", v2::write),
        ("redb4-format3.redb", v4::write),
        ("redb2-format3.redb", write_v2_format3),
        ("redb3-format3.redb", v3::write),
    ] {
        let path = dir.join(name);
        let json = write(&path);
        std::fs::write(dir.join(format!("{name}.json")), json + "\n").unwrap();
        println!("{} ({} bytes)", path.display(), std::fs::metadata(&path).unwrap().len());
    }
}
