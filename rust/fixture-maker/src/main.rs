//! Writes the redb fixtures with the real redb crates: one file per redb major that
//! writes a distinct file format (1.5: format 1; 2.6: format 2, and format 3 on request;
//! 3.x and 4.x: format 3), each
//! with plain, versioned, typed (fixed- and variable-width tuples, Option, arrays,
//! char, signed ints), custom fixed- and variable-width key types, multimap and empty
//! tables and odd keys, plus `<file>.json`: the stored pairs in redb's own order.
//!
//! Also, for redb 2.6 (formats 2 and 3), 3.x and 4.x, `*-custom.redb`: composites
//! holding user-defined types (`custom.rs`).
//!
//! Run: `cargo run --release --manifest-path rust/fixture-maker/Cargo.toml -- fixtures/redb`
//! (every fixture) or `... -- custom fixtures/redb` (only the composite ones);
//! `... -- dump FORMAT FILE` (`dump-custom FORMAT FILE`) prints what that redb reads from
//! FILE with the fixtures' (the composite fixtures') types: FORMAT `1`, `2` (redb 2.6),
//! `3.x`, anything else redb 4.x; `... -- savepoint FORMAT FILE` adds a persistent
//! savepoint to FILE and `... -- savepoints FORMAT FILE` prints how many it holds.
use std::path::PathBuf;

mod v1 {
    use r::{RedbKey as Key, RedbValue as Value};
    use redb1 as r;
    include!("body.rs");
}

mod v2 {
    use r::{Key, Value};
    use redb2 as r;
    include!("body.rs");
    include!("custom.rs");
    include!("savepoints.rs");
}

mod v3 {
    use r::{Key, ReadableDatabase, Value};
    use redb3 as r;
    include!("body.rs");
    include!("custom.rs");
    include!("savepoints.rs");
}

mod v4 {
    use r::{Key, ReadableDatabase, Value};
    use redb as r;
    include!("body.rs");
    include!("custom.rs");
    include!("savepoints.rs");
}

/// redb 2.6 writing file format 3 (its opt-in), with its own type encodings.
fn write_v2_format3(path: &std::path::Path) -> String {
    let _ = std::fs::remove_file(path);
    let db = redb2::Builder::new()
        .create_with_file_format_v3(true)
        .create(path)
        .unwrap();
    v2::write_db(path, db)
}

/// The composite fixture (`custom.rs`) written by redb 2.6 in file format 3.
fn write_custom_v2_format3(path: &std::path::Path) -> String {
    let _ = std::fs::remove_file(path);
    let db = redb2::Builder::new()
        .create_with_file_format_v3(true)
        .create(path)
        .unwrap();
    v2::write_custom_db(path, db)
}

/// Writes (or reads) a fixture file and returns its JSON.
type JsonOf = fn(&std::path::Path) -> String;

/// Which redb reads a file in `dump` modes: "1", "2" (2.6), "3.x", anything else 4.x.
fn dumper(fmt: &str, custom: bool) -> JsonOf {
    match (fmt, custom) {
        ("1", false) => v1::dump,
        ("2", false) => v2::dump,
        ("3.x", false) => v3::dump,
        (_, false) => v4::dump,
        ("2", true) => v2::dump_custom,
        ("3.x", true) => v3::dump_custom,
        (_, true) => v4::dump_custom,
    }
}

fn main() {
    // `dump FORMAT FILE` (`dump-custom FORMAT FILE`): print what redb of that format's
    // version reads from FILE with the fixtures' (the composite fixtures') types.
    let mode = std::env::args().nth(1);
    if let Some(custom) = match mode.as_deref() {
        Some("dump") => Some(false),
        Some("dump-custom") => Some(true),
        _ => None,
    } {
        let fmt = std::env::args().nth(2).expect("dump FORMAT FILE");
        let file = PathBuf::from(std::env::args().nth(3).expect("dump FORMAT FILE"));
        println!("{}", dumper(&fmt, custom)(&file));
        return;
    }
    // `savepoint FORMAT FILE` adds a persistent savepoint to FILE, `savepoints FORMAT
    // FILE` prints how many it holds, with that format's redb ("2", "3.x", else 4.x).
    if let Some(add) = match mode.as_deref() {
        Some("savepoint") => Some(true),
        Some("savepoints") => Some(false),
        _ => None,
    } {
        let fmt = std::env::args().nth(2).expect("savepoint FORMAT FILE");
        let file = PathBuf::from(std::env::args().nth(3).expect("savepoint FORMAT FILE"));
        let run: JsonOf = match (fmt.as_str(), add) {
            ("2", true) => v2::add_savepoint,
            ("2", false) => v2::count_savepoints,
            ("3.x", true) => v3::add_savepoint,
            ("3.x", false) => v3::count_savepoints,
            (_, true) => v4::add_savepoint,
            (_, false) => v4::count_savepoints,
        };
        println!("{}", run(&file));
        return;
    }
    // `custom DIR`: only the composite fixtures (the others stay as they are).
    let only_custom = mode.as_deref() == Some("custom");
    let dir_arg = if only_custom {
        std::env::args().nth(2)
    } else {
        mode
    };
    let dir = PathBuf::from(dir_arg.unwrap_or_else(|| "fixtures/redb".into()));
    std::fs::create_dir_all(&dir).unwrap();
    let plain: [(&str, JsonOf); 5] = [
        ("redb1-format1.redb", v1::write),
        ("redb2-format2.redb", v2::write),
        ("redb4-format3.redb", v4::write),
        ("redb2-format3.redb", write_v2_format3),
        ("redb3-format3.redb", v3::write),
    ];
    let custom: [(&str, JsonOf); 4] = [
        ("redb2-format2-custom.redb", v2::write_custom),
        ("redb2-format3-custom.redb", write_custom_v2_format3),
        ("redb3-format3-custom.redb", v3::write_custom),
        ("redb4-format3-custom.redb", v4::write_custom),
    ];
    let chosen: Vec<_> = if only_custom {
        custom.to_vec()
    } else {
        plain.iter().chain(custom.iter()).copied().collect()
    };
    for (name, write) in chosen {
        let path = dir.join(name);
        let json = write(&path);
        std::fs::write(dir.join(format!("{name}.json")), json + "\n").unwrap();
        println!(
            "{} ({} bytes)",
            path.display(),
            std::fs::metadata(&path).unwrap().len()
        );
    }
}
