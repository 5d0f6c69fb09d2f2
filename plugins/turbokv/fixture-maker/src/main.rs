//! Writes the TurboKV fixture with the real turbokv 0.6 crate, as an app would:
//! `app.turbokv/` in the documented layout (one flat key space, stored key =
//! `table ‖ 0x00 ‖ key`, versioned values = `u64be(version) ‖ value`, metadata under the
//! table `__statemigrate__` with `kind:<table>`), records inserted one at a time in a
//! shuffled order, the first half flushed to SSTables and the rest left in the WAL
//! (`durable` preset, the store dropped without `close`, as a killed app leaves it);
//! plus `app.turbokv.expected.json`: every record as written (hex, in key byte order),
//! computed here, never read back through statemigrate; and `foreign.turbokv/`, an
//! app's store outside the layout (keys `user:N`), closed cleanly.
//!
//! The store is written in a temporary directory and then moved into place, so its
//! MANIFEST names the SSTables by absolute paths that no longer exist: a moved store,
//! which statemigrate's reader must still read (README: TurboKV).
//!
//! Run: `cd plugins/turbokv/fixture-maker && cargo run --release -- ../tests/fixtures`
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

use turbokv::{Db, DbOptions};

type Records = BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>;

struct Table {
    name: &'static str,
    versioned: bool,
    records: Records,
}

/// A small deterministic generator (the fixture must not change between runs).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        self.0 >> 11
    }
    fn bytes(&mut self, max: u64) -> Vec<u8> {
        let n = self.next() % (max + 1);
        (0..n).map(|_| self.next() as u8).collect()
    }
}

fn content() -> Vec<Table> {
    let mut g = Lcg(20261130);
    let mut plain = Records::new();
    let odd: Vec<Vec<u8>> = vec![
        b"".to_vec(), // the empty key: stored as `plain ‖ 0x00`
        b"\x00".to_vec(),
        b"\x00\x00".to_vec(),
        b"\xff".to_vec(),
        b"\xff\xff\xff".to_vec(),
        b"a".to_vec(),
        b"ab".to_vec(),
        b"a\x00".to_vec(),
        "ключ".as_bytes().to_vec(),
        vec![b'k'; 100_000],
    ];
    for (i, k) in odd.into_iter().enumerate() {
        let v = match i % 3 {
            0 => Vec::new(),
            1 => vec![0; 40],
            _ => b"text".to_vec(),
        };
        plain.insert(k, (v, None));
    }
    while plain.len() < 150 {
        let k = g.bytes(24);
        let v = g.bytes(300);
        plain.insert(k, (v, None));
    }
    let mut versioned = Records::new();
    for (i, ver) in [0, 1, u64::MAX, 1 << 63].into_iter().enumerate() {
        versioned.insert(format!("fixed{i}").into_bytes(), (g.bytes(50), Some(ver)));
    }
    while versioned.len() < 60 {
        let k = g.bytes(16);
        let v = g.bytes(200);
        versioned.insert(k, (v, Some(g.next())));
    }
    let mut prefixed = Records::new();
    prefixed.insert(b"only".to_vec(), (b"one record".to_vec(), None));
    vec![
        Table {
            name: "plain",
            versioned: false,
            records: plain,
        },
        Table {
            name: "settings",
            versioned: true,
            records: versioned,
        },
        // A name that is a prefix of another: its keys end at its 0x00.
        Table {
            name: "plai",
            versioned: false,
            records: prefixed,
        },
        Table {
            name: "é \"odd\" name",
            versioned: false,
            records: Records::new(),
        },
    ]
}

fn stored_key(table: &str, key: &[u8]) -> Vec<u8> {
    let mut k = table.as_bytes().to_vec();
    k.push(0);
    k.extend_from_slice(key);
    k
}

fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

fn expected(tables: &[Table], meta: &[(&str, &[u8])]) -> String {
    let mut s = String::from("{\n  \"written_by\": \"turbokv 0.6\",\n  \"metadata\": {");
    let m: Vec<String> = meta
        .iter()
        .filter(|(k, _)| !k.starts_with("kind:"))
        .map(|(k, v)| format!("\"{k}\": \"{}\"", hex(v)))
        .collect();
    s += &m.join(", ");
    s += "},\n  \"tables\": {\n";
    let mut ts = Vec::new();
    for t in tables {
        let recs: Vec<String> = t
            .records
            .iter()
            .map(|(k, (v, ver))| match ver {
                Some(n) => format!("[\"{}\", \"{}\", {n}]", hex(k), hex(v)),
                None => format!("[\"{}\", \"{}\"]", hex(k), hex(v)),
            })
            .collect();
        let name = t.name.replace('"', "\\\"");
        ts.push(format!(
            "    \"{name}\": {{\"kind\": \"{}\", \"records\": [\n      {}\n    ]}}",
            if t.versioned { "versioned" } else { "plain" },
            recs.join(",\n      ")
        ));
    }
    s += &ts.join(",\n");
    s += "\n  }\n}\n";
    s
}

#[tokio::main]
async fn main() -> Result<(), Box<dyn std::error::Error>> {
    let out = std::env::args().nth(1).expect("the output directory");
    let out = Path::new(&out);
    std::fs::create_dir_all(out)?;
    let tables = content();
    let meta: Vec<(&str, &[u8])> = vec![
        ("schema", b"turbokv-app"),
        ("revision", b"[\"0001_turbokv\"]"),
        ("kind:settings", b"versioned"),
        ("kind:\u{e9} \"odd\" name", b"plain"),
    ];

    let mut all: Vec<(Vec<u8>, Vec<u8>)> = Vec::new();
    for t in &tables {
        for (k, (v, ver)) in &t.records {
            let mut value = Vec::new();
            if let Some(n) = ver {
                value.extend_from_slice(&n.to_be_bytes());
            }
            value.extend_from_slice(v);
            all.push((stored_key(t.name, k), value));
        }
    }
    for (k, v) in &meta {
        all.push((stored_key("__statemigrate__", k.as_bytes()), v.to_vec()));
    }
    // Shuffle (Fisher-Yates with the fixed generator).
    let mut g = Lcg(7);
    for i in (1..all.len()).rev() {
        let j = (g.next() % (i as u64 + 1)) as usize;
        all.swap(i, j);
    }

    let tmp = std::env::temp_dir().join("statemigrate-turbokv-fixture");
    let _ = std::fs::remove_dir_all(&tmp);
    let store = tmp.join("app.turbokv");
    let db = Db::open_with_options(&store, DbOptions::durable()).await?;
    let half = all.len() / 2;
    for (k, v) in &all[..half] {
        db.insert(k, v).await?;
    }
    db.flush().await?;
    for (k, v) in &all[half..] {
        db.insert(k, v).await?;
    }
    // No close: the second half stays in the WAL, as a killed app leaves it.
    drop(db);

    let dst = out.join("app.turbokv");
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::rename(&store, &dst).or_else(|_| copy_tree(&store, &dst))?;
    std::fs::write(
        out.join("app.turbokv.expected.json"),
        expected(&tables, &meta),
    )?;

    // An app's store outside the layout (keys without a table name and 0x00), closed
    // cleanly: statemigrate refuses it as not its layout.
    let foreign = tmp.join("foreign.turbokv");
    let db = Db::open_with_options(&foreign, DbOptions::durable()).await?;
    for i in 0..20 {
        db.insert(format!("user:{i}"), format!("name {i}")).await?;
    }
    db.close().await?;
    let dst = out.join("foreign.turbokv");
    let _ = std::fs::remove_dir_all(&dst);
    std::fs::rename(&foreign, &dst).or_else(|_| copy_tree(&foreign, &dst))?;
    let _ = std::fs::remove_dir_all(&tmp);
    println!(
        "wrote {} ({} records) and {}",
        out.join("app.turbokv").display(),
        all.len(),
        dst.display()
    );
    Ok(())
}

fn copy_tree(src: &Path, dst: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dst)?;
    for e in std::fs::read_dir(src)? {
        let e = e?;
        let to = dst.join(e.file_name());
        if e.file_type()?.is_dir() {
            copy_tree(&e.path(), &to)?;
        } else {
            std::fs::copy(e.path(), &to)?;
        }
    }
    Ok(())
}
