//! Writes the fjall fixtures with the real fjall crates, as an app would: one store per
//! major (`app.fjall2/` by fjall 2.x, `app.fjall3/` by fjall 3.x) in the documented
//! layout (one partition / keyspace per table, raw keys, versioned values =
//! `u64be(version) ‖ value`, metadata in `__statemigrate__` with `kind:<table>`),
//! records inserted one at a time in a shuffled order, half of them flushed to tables
//! and half left in the journal; plus `<store>.expected.json`: every record as written
//! (hex, in key byte order), computed here, never read back through statemigrate.
//!
//! fjall 2 partition names: a table whose name is outside `[A-Za-z0-9_.#$-]` is stored
//! under its escaped name (README: "fjall 2 partition names"), written out here by hand.
//!
//! Run: `cargo run --release --manifest-path rust/fjall-fixture-maker/Cargo.toml -- fixtures/fjall`
use std::collections::BTreeMap;
use std::fmt::Write as _;
use std::path::Path;

type Records = BTreeMap<Vec<u8>, (Vec<u8>, Option<u64>)>;

struct Table {
    name: &'static str,
    /// The fjall 2 partition name (escaped where the name needs it).
    fjall2_name: &'static str,
    versioned: bool,
    records: Records,
}

/// A small deterministic generator (the fixtures must not change between runs).
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
        b"\x00".to_vec(),
        b"\x00\x00".to_vec(),
        b"\xff".to_vec(),
        b"\xff\xff\xff".to_vec(),
        b"a".to_vec(),
        b"ab".to_vec(),
        b"abc".to_vec(),
        b"a\x00".to_vec(),
        "ключ".as_bytes().to_vec(),
        b"'; DROP TABLE x; --".to_vec(),
        vec![b'k'; 65_535], // fjall's longest key
    ];
    let values: Vec<Vec<u8>> = vec![
        b"".to_vec(),
        b"\x00".to_vec(),
        vec![0; 40],
        b"\xff\xfe".to_vec(),
        b"text".to_vec(),
    ];
    for (i, k) in odd.into_iter().enumerate() {
        plain.insert(k, (values[i % values.len()].clone(), None));
    }
    while plain.len() < 150 {
        let mut k = g.bytes(24);
        if k.is_empty() {
            k.push(1);
        }
        let v = g.bytes(300);
        plain.insert(k, (v, None));
    }
    let mut versioned = Records::new();
    let fixed = [
        0,
        1,
        (1 << 31) - 1,
        1 << 32,
        (1 << 53) + 1,
        (1 << 63) - 1,
        1 << 63,
        u64::MAX - 1,
        u64::MAX,
    ];
    for (i, ver) in fixed.iter().enumerate() {
        versioned.insert(format!("fixed-{i}").into_bytes(), (g.bytes(50), Some(*ver)));
    }
    while versioned.len() < 60 {
        let k = format!("user:{:016x}", g.next()).into_bytes();
        let v = g.bytes(100);
        versioned.insert(k, (v, Some(g.next() << 11 | g.next() & 0x7ff)));
    }
    let mut quoted = Records::new();
    for i in 0..20u8 {
        quoted.insert(vec![b'q', i], (vec![i; i as usize], None));
    }
    vec![
        Table {
            name: "plain",
            fjall2_name: "plain",
            versioned: false,
            records: plain,
        },
        Table {
            name: "versioned",
            fjall2_name: "versioned",
            versioned: true,
            records: versioned,
        },
        Table {
            name: "a \"quoted\" name",
            fjall2_name: "a$20$22quoted$22$20name",
            versioned: false,
            records: quoted,
        },
        Table {
            name: "empty",
            fjall2_name: "empty",
            versioned: true,
            records: Records::new(),
        },
    ]
}

fn metadata(tables: &[Table]) -> Vec<(String, Vec<u8>)> {
    let mut m = vec![
        ("schema".to_string(), b"fjall-app".to_vec()),
        ("revision".to_string(), b"[\"0001_fjall\"]".to_vec()),
    ];
    for t in tables.iter().filter(|t| t.versioned) {
        m.push((format!("kind:{}", t.name), b"versioned".to_vec()));
    }
    m
}

fn stored(value: &[u8], version: Option<u64>) -> Vec<u8> {
    match version {
        Some(v) => [v.to_be_bytes().as_slice(), value].concat(),
        None => value.to_vec(),
    }
}

/// The records of every table in one shuffled order, as an app would insert them.
fn shuffled(tables: &[Table]) -> Vec<(usize, Vec<u8>, Vec<u8>)> {
    let mut all: Vec<(usize, Vec<u8>, Vec<u8>)> = Vec::new();
    for (i, t) in tables.iter().enumerate() {
        for (k, (v, ver)) in &t.records {
            all.push((i, k.clone(), stored(v, *ver)));
        }
    }
    let mut g = Lcg(7);
    for i in (1..all.len()).rev() {
        all.swap(i, (g.next() % (i as u64 + 1)) as usize);
    }
    all
}

fn write3(dir: &Path, tables: &[Table]) {
    let _ = std::fs::remove_dir_all(dir);
    {
        let db = fjall::Database::builder(dir).open().unwrap();
        let ks: Vec<_> = tables
            .iter()
            .map(|t| {
                db.keyspace(t.name, fjall::KeyspaceCreateOptions::default)
                    .unwrap()
            })
            .collect();
        let meta = db
            .keyspace("__statemigrate__", fjall::KeyspaceCreateOptions::default)
            .unwrap();
        for (k, v) in metadata(tables) {
            meta.insert(k, v).unwrap();
        }
        let all = shuffled(tables);
        let half = all.len() / 2;
        for (n, (i, k, v)) in all.into_iter().enumerate() {
            ks[i].insert(k, v).unwrap();
            if n + 1 == half {
                for k in &ks {
                    k.rotate_memtable_and_wait().unwrap();
                }
            }
        }
        db.persist(fjall::PersistMode::SyncAll).unwrap();
    }
    // Opened once more and closed, as an app restarting would: fjall truncates the
    // journal from its preallocated size to what it holds.
    drop(fjall::Database::builder(dir).open().unwrap());
}

fn write2(dir: &Path, tables: &[Table]) {
    let _ = std::fs::remove_dir_all(dir);
    {
        let ks = fjall2::Config::new(dir).open().unwrap();
        let parts: Vec<_> = tables
            .iter()
            .map(|t| {
                ks.open_partition(t.fjall2_name, fjall2::PartitionCreateOptions::default())
                    .unwrap()
            })
            .collect();
        let meta = ks
            .open_partition(
                "__statemigrate__",
                fjall2::PartitionCreateOptions::default(),
            )
            .unwrap();
        for (k, v) in metadata(tables) {
            meta.insert(k, v).unwrap();
        }
        let all = shuffled(tables);
        let half = all.len() / 2;
        for (n, (i, k, v)) in all.into_iter().enumerate() {
            parts[i].insert(k, v).unwrap();
            if n + 1 == half {
                for p in &parts {
                    p.rotate_memtable_and_wait().unwrap();
                }
            }
        }
        ks.persist(fjall2::PersistMode::SyncAll).unwrap();
    }
    drop(fjall2::Config::new(dir).open().unwrap());
}

fn hex(b: &[u8]) -> String {
    b.iter()
        .fold(String::with_capacity(b.len() * 2), |mut s, x| {
            let _ = write!(s, "{x:02x}");
            s
        })
}

fn json_str(s: &str) -> String {
    let mut out = String::from("\"");
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            c => out.push(c),
        }
    }
    out.push('"');
    out
}

fn expected(tables: &[Table], major: u8) -> String {
    let mut s = format!("{{\n  \"written_by\": \"fjall {major}.x\",\n  \"metadata\": {{");
    let meta: Vec<String> = metadata(tables)
        .iter()
        .filter(|(k, _)| !k.starts_with("kind:"))
        .map(|(k, v)| format!("{}: {}", json_str(k), json_str(&hex(v))))
        .collect();
    s += &meta.join(", ");
    s += "},\n  \"tables\": {\n";
    let rows: Vec<String> = tables
        .iter()
        .map(|t| {
            let recs: Vec<String> = t
                .records
                .iter()
                .map(|(k, (v, ver))| match ver {
                    Some(ver) => format!("[\"{}\", \"{}\", {ver}]", hex(k), hex(v)),
                    None => format!("[\"{}\", \"{}\"]", hex(k), hex(v)),
                })
                .collect();
            format!(
                "    {}: {{\"partition\": {}, \"kind\": \"{}\", \"records\": [\n      {}\n    ]}}",
                json_str(t.name),
                json_str(if major == 2 { t.fjall2_name } else { t.name }),
                if t.versioned { "versioned" } else { "plain" },
                recs.join(",\n      ")
            )
        })
        .collect();
    s += &rows.join(",\n");
    s += "\n  }\n}\n";
    s
}

fn main() {
    let out = std::env::args()
        .nth(1)
        .expect("usage: fjall-fixture-maker OUT_DIR");
    let out = Path::new(&out);
    std::fs::create_dir_all(out).unwrap();
    let tables = content();
    write3(&out.join("app.fjall3"), &tables);
    std::fs::write(out.join("app.fjall3.expected.json"), expected(&tables, 3)).unwrap();
    write2(&out.join("app.fjall2"), &tables);
    std::fs::write(out.join("app.fjall2.expected.json"), expected(&tables, 2)).unwrap();
}
