// One fixture file per redb version; `main.rs` includes this with `r` naming the
// redb crate and `Key`/`Value` its traits (RedbKey/RedbValue in redb 1.x).
use r::{MultimapTableDefinition, ReadableMultimapTable, ReadableTable, TableDefinition, TypeName};
use std::cmp::Ordering;
use std::fmt::Write as _;

/// A fixed-width custom key: 8 bytes, ordered by the big-endian u64 *descending*
/// (its byte order differs from redb's order).
#[derive(Debug)]
pub struct RevId;

impl Value for RevId {
    type SelfType<'a>
        = [u8; 8]
    where
        Self: 'a;
    type AsBytes<'a>
        = [u8; 8]
    where
        Self: 'a;
    fn fixed_width() -> Option<usize> {
        Some(8)
    }
    fn from_bytes<'a>(data: &'a [u8]) -> [u8; 8]
    where
        Self: 'a,
    {
        data.try_into().unwrap()
    }
    fn as_bytes<'a, 'b: 'a>(value: &'a [u8; 8]) -> [u8; 8]
    where
        Self: 'b,
    {
        *value
    }
    fn type_name() -> TypeName {
        TypeName::new("fixture::RevId")
    }
}

impl Key for RevId {
    fn compare(a: &[u8], b: &[u8]) -> Ordering {
        b.cmp(a)
    }
}

/// A variable-width custom key ordered by length first, then bytes.
#[derive(Debug)]
pub struct ShortLex;

impl Value for ShortLex {
    type SelfType<'a>
        = &'a [u8]
    where
        Self: 'a;
    type AsBytes<'a>
        = &'a [u8]
    where
        Self: 'a;
    fn fixed_width() -> Option<usize> {
        None
    }
    fn from_bytes<'a>(data: &'a [u8]) -> &'a [u8]
    where
        Self: 'a,
    {
        data
    }
    fn as_bytes<'a, 'b: 'a>(value: &'a &'b [u8]) -> &'a [u8]
    where
        Self: 'b,
    {
        value
    }
    fn type_name() -> TypeName {
        TypeName::new("fixture::ShortLex")
    }
}

impl Key for ShortLex {
    fn compare(a: &[u8], b: &[u8]) -> Ordering {
        a.len().cmp(&b.len()).then_with(|| a.cmp(b))
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().fold(String::new(), |mut s, x| {
        let _ = write!(s, "{x:02x}");
        s
    })
}

pub const ODD_KEYS: &[&[u8]] = &[
    b"",
    b"\x00",
    b"\x00\x00",
    b"\xff",
    b"a",
    b"a\x00",
    b"ab",
    b"b",
];

/// Write the fixture and return its expected content as JSON: per table the
/// stored (key, value) pairs in redb's own iteration order, as hex.
pub fn write(path: &std::path::Path) -> String {
    let _ = std::fs::remove_file(path);
    write_db(path, r::Database::create(path).unwrap())
}

/// Write the fixture tables into `db` (created at `path`), then dump them.
pub fn write_db(path: &std::path::Path, mut db: r::Database) -> String {
    let long_key = vec![b'k'; 1000];
    let txn = db.begin_write().unwrap();
    {
        let mut t = txn
            .open_table(TableDefinition::<&[u8], &[u8]>::new("plain"))
            .unwrap();
        for (i, k) in ODD_KEYS.iter().enumerate() {
            t.insert(*k, format!("value {i}").as_bytes()).unwrap();
        }
        t.insert(long_key.as_slice(), b"".as_slice()).unwrap();
        txn.open_table(TableDefinition::<&[u8], &[u8]>::new("empty"))
            .unwrap();
        let mut t = txn
            .open_table(TableDefinition::<&[u8], (u64, &[u8])>::new("versioned"))
            .unwrap();
        for (i, k) in ODD_KEYS.iter().enumerate() {
            let ver = match i {
                0 => 0,
                1 => u64::MAX,
                n => n as u64 * 1000,
            };
            t.insert(*k, (ver, format!("v{i}").as_bytes())).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<u64, &str>::new("u64_keys"))
            .unwrap();
        for k in [0u64, 1, 255, 256, 65_536, u64::MAX - 1, u64::MAX] {
            t.insert(k, format!("n{k}").as_str()).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<i32, ()>::new("i32_keys"))
            .unwrap();
        for k in [i32::MIN, -256, -1, 0, 1, 255, i32::MAX] {
            t.insert(k, ()).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<&str, u32>::new("str_keys"))
            .unwrap();
        for (i, k) in ["", "a", "a\u{0}", "ab", "é", "z"].iter().enumerate() {
            t.insert(*k, i as u32).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<(u32, i16), &[u8; 4]>::new("tuple_fixed"))
            .unwrap();
        for (a, b) in [(0u32, -5i16), (0, 5), (1, i16::MIN), (u32::MAX, 0)] {
            t.insert((a, b), &[1u8, 2, 3, 4]).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<(u64, &str, Option<u8>), Vec<u32>>::new(
                "tuple_var",
            ))
            .unwrap();
        for (a, s, o) in [
            (1u64, "", None),
            (1, "", Some(0u8)),
            (1, "a", None),
            (1, "a\u{0}", Some(7)),
            (2, "", None),
        ] {
            t.insert((a, s, o), vec![a as u32, 7]).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<&[u8; 16], bool>::new("array_keys"))
            .unwrap();
        for i in [0u8, 1, 200] {
            t.insert(&[i; 16], i % 2 == 0).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<Option<u64>, char>::new("option_keys"))
            .unwrap();
        for k in [None, Some(0u64), Some(9)] {
            t.insert(k, 'é').unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<char, u128>::new("char_keys"))
            .unwrap();
        for k in ['\u{0}', 'a', 'é', '\u{10FFFF}'] {
            t.insert(k, k as u128).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<((u8, &str), bool), i64>::new(
                "nested_keys",
            ))
            .unwrap();
        for (a, s, b) in [
            (0u8, "x", false),
            (0, "x", true),
            (0, "xy", false),
            (3, "", true),
        ] {
            t.insert(((a, s), b), -(a as i64)).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<RevId, &[u8]>::new("custom_fixed"))
            .unwrap();
        for i in [1u64, 2, 300] {
            t.insert(i.to_be_bytes(), b"c".as_slice()).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<ShortLex, u64>::new("custom_var"))
            .unwrap();
        for k in [b"bb".as_slice(), b"a", b"ccc", b"", b"b", b"ab"] {
            t.insert(k, k.len() as u64).unwrap();
        }
        let mut t = txn
            .open_multimap_table(MultimapTableDefinition::<&str, u64>::new("multimap"))
            .unwrap();
        for (k, v) in [
            ("a", 2u64),
            ("a", 1),
            ("a", u64::MAX),
            ("", 0),
            ("b\u{0}", 5),
        ] {
            t.insert(k, v).unwrap();
        }
        txn.open_multimap_table(MultimapTableDefinition::<u32, u32>::new("empty_multimap"))
            .unwrap();
    }
    txn.commit().unwrap();
    // Keep the committed files small.
    while db.compact().unwrap() {}

    drop(db);
    dump(path)
}

/// The stored pairs of every fixture table, as redb itself reads them with the real
/// types (`TableDefinition`s as an app declares them), as JSON.
pub fn dump(path: &std::path::Path) -> String {
    let db = r::Database::open(path).unwrap();
    let rtxn = db.begin_read().unwrap();
    let mut json = String::from("{");
    macro_rules! dump {
        ($name:expr, $k:ty, $v:ty) => {{
            let t = rtxn
                .open_table(TableDefinition::<$k, $v>::new($name))
                .unwrap();
            let mut rows = Vec::new();
            for item in t.iter().unwrap() {
                let (k, v) = item.unwrap();
                let (kv, vv) = (k.value(), v.value());
                let kb = AsRef::<[u8]>::as_ref(&<$k as Value>::as_bytes(&kv)).to_vec();
                let vb = AsRef::<[u8]>::as_ref(&<$v as Value>::as_bytes(&vv)).to_vec();
                rows.push(format!("[\"{}\", \"{}\"]", hex(&kb), hex(&vb)));
            }
            let _ = write!(json, "\"{}\": [{}], ", $name, rows.join(", "));
        }};
    }
    dump!("plain", &[u8], &[u8]);
    dump!("empty", &[u8], &[u8]);
    dump!("versioned", &[u8], (u64, &[u8]));
    dump!("u64_keys", u64, &str);
    dump!("i32_keys", i32, ());
    dump!("str_keys", &str, u32);
    dump!("tuple_fixed", (u32, i16), &[u8; 4]);
    dump!("tuple_var", (u64, &str, Option<u8>), Vec<u32>);
    dump!("array_keys", &[u8; 16], bool);
    dump!("option_keys", Option<u64>, char);
    dump!("char_keys", char, u128);
    dump!("nested_keys", ((u8, &str), bool), i64);
    dump!("custom_fixed", RevId, &[u8]);
    dump!("custom_var", ShortLex, u64);
    let t = rtxn
        .open_multimap_table(MultimapTableDefinition::<&str, u64>::new("multimap"))
        .unwrap();
    let mut rows = Vec::new();
    for item in t.iter().unwrap() {
        let (k, vals) = item.unwrap();
        for v in vals {
            let v = v.unwrap();
            rows.push(format!(
                "[\"{}\", \"{}\"]",
                hex(k.value().as_bytes()),
                hex(&v.value().to_le_bytes())
            ));
        }
    }
    let _ = write!(
        json,
        "\"multimap\": [{}], \"empty_multimap\": []",
        rows.join(", ")
    );
    json.push('}');
    json
}
