// Fixtures of composite types holding user-defined types (redb 2.6, 3.x, 4.x), included
// by `main.rs` after `body.rs` (whose imports and `hex` it uses). Both user-defined types
// are ordered by their bytes, so that `--bytewise-key` is true of them and a table
// written back must be in the app's own order.

/// A fixed-width (5 bytes) user-defined type ordered by its bytes (a transaction number).
#[derive(Debug)]
pub struct TxNo;

impl Value for TxNo {
    type SelfType<'a>
        = [u8; 5]
    where
        Self: 'a;
    type AsBytes<'a>
        = [u8; 5]
    where
        Self: 'a;
    fn fixed_width() -> Option<usize> {
        Some(5)
    }
    fn from_bytes<'a>(data: &'a [u8]) -> [u8; 5]
    where
        Self: 'a,
    {
        data.try_into().unwrap()
    }
    fn as_bytes<'a, 'b: 'a>(value: &'a [u8; 5]) -> [u8; 5]
    where
        Self: 'b,
    {
        *value
    }
    fn type_name() -> TypeName {
        TypeName::new("fixture::TxNo")
    }
}

impl Key for TxNo {
    fn compare(a: &[u8], b: &[u8]) -> Ordering {
        a.cmp(b)
    }
}

/// A variable-width user-defined type ordered by its bytes.
#[derive(Debug)]
pub struct Name;

impl Value for Name {
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
        TypeName::new("fixture::Name")
    }
}

impl Key for Name {
    fn compare(a: &[u8], b: &[u8]) -> Ordering {
        a.cmp(b)
    }
}

const TX: [[u8; 5]; 3] = [[0, 0, 0, 0, 1], [0, 0, 0, 1, 0], [9, 0, 0, 0, 0]];

/// Write the composite fixture tables into `db` (created at `path`), then dump them.
pub fn write_custom_db(path: &std::path::Path, mut db: r::Database) -> String {
    let txn = db.begin_write().unwrap();
    {
        // u32s whose little-endian bytes are not in their order: 1 < 256 < 65536.
        let mut t = txn
            .open_table(TableDefinition::<(TxNo, u32), &[u8]>::new("tx_keys"))
            .unwrap();
        for (tx, n) in [(0, 256u32), (0, 1), (0, 0), (1, 65_536), (1, 2), (2, 1)] {
            t.insert((TX[tx], n), format!("v{n}").as_bytes()).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<Option<TxNo>, u64>::new("option_keys"))
            .unwrap();
        for (i, k) in [Some(TX[1]), None, Some(TX[0])].into_iter().enumerate() {
            t.insert(k, i as u64).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<[TxNo; 2], ()>::new("array_keys"))
            .unwrap();
        for (a, b) in [(1, 0), (0, 2), (0, 1)] {
            t.insert([TX[a], TX[b]], ()).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<(u64, Name), u32>::new("name_last"))
            .unwrap();
        for (n, s) in [
            (256u64, b"x".as_slice()),
            (1, b"b"),
            (1, b"a\x00"),
            (1, b""),
            (2, b"a"),
        ] {
            t.insert((n, s), s.len() as u32).unwrap();
        }
        let mut t = txn
            .open_table(TableDefinition::<u32, (TxNo, &str)>::new("tx_values"))
            .unwrap();
        for (k, tx, s) in [(1u32, 0, "one"), (256, 2, ""), (2, 1, "two")] {
            t.insert(k, (TX[tx], s)).unwrap();
        }
        let mut t = txn
            .open_multimap_table(MultimapTableDefinition::<&str, (TxNo, u32)>::new(
                "multimap_custom",
            ))
            .unwrap();
        for (k, tx, n) in [("a", 0, 256u32), ("a", 0, 1), ("a", 1, 0), ("", 2, 7)] {
            t.insert(k, (TX[tx], n)).unwrap();
        }
    }
    txn.commit().unwrap();
    while db.compact().unwrap() {}
    drop(db);
    dump_custom(path)
}

/// Write the composite fixture at `path` with this redb's defaults, return its JSON.
pub fn write_custom(path: &std::path::Path) -> String {
    let _ = std::fs::remove_file(path);
    write_custom_db(path, r::Database::create(path).unwrap())
}

/// The stored pairs of every composite fixture table as this redb reads them with
/// the apps' types, in its order, as JSON (a table the file lacks is left out); every
/// key is also looked up and every key's values checked to be in the app's order, so
/// that a table out of the app's order fails here.
pub fn dump_custom(path: &std::path::Path) -> String {
    let db = r::Database::open(path).unwrap();
    let rtxn = db.begin_read().unwrap();
    let mut json = String::from("{");
    macro_rules! dump {
        ($name:expr, $k:ty, $v:ty) => {{
            let t = match rtxn.open_table(TableDefinition::<$k, $v>::new($name)) {
                Err(r::TableError::TableDoesNotExist(_)) => None,
                t => Some(t.unwrap()),
            };
            if let Some(t) = t {
                let mut rows = Vec::new();
                for item in t.iter().unwrap() {
                    let (k, v) = item.unwrap();
                    let (kv, vv) = (k.value(), v.value());
                    let kb = AsRef::<[u8]>::as_ref(&<$k as Value>::as_bytes(&kv)).to_vec();
                    let vb = AsRef::<[u8]>::as_ref(&<$v as Value>::as_bytes(&vv)).to_vec();
                    let found = t
                        .get(kv)
                        .unwrap()
                        .expect("a stored key is not found: the table is out of order");
                    assert_eq!(
                        AsRef::<[u8]>::as_ref(&<$v as Value>::as_bytes(&found.value())),
                        vb.as_slice()
                    );
                    rows.push(format!("[\"{}\", \"{}\"]", hex(&kb), hex(&vb)));
                }
                let _ = write!(json, "\"{}\": [{}], ", $name, rows.join(", "));
            }
        }};
    }
    dump!("tx_keys", (TxNo, u32), &[u8]);
    dump!("option_keys", Option<TxNo>, u64);
    dump!("array_keys", [TxNo; 2], ());
    dump!("name_last", (u64, Name), u32);
    dump!("tx_values", u32, (TxNo, &str));
    let t = match rtxn.open_multimap_table(MultimapTableDefinition::<&str, (TxNo, u32)>::new(
        "multimap_custom",
    )) {
        Err(r::TableError::TableDoesNotExist(_)) => {
            return json.trim_end_matches(", ").to_string() + "}";
        }
        t => t.unwrap(),
    };
    let mut rows = Vec::new();
    for item in t.iter().unwrap() {
        let (k, vals) = item.unwrap();
        let mut last: Option<Vec<u8>> = None;
        for v in vals {
            let vv = v.unwrap().value();
            let vb = AsRef::<[u8]>::as_ref(&<(TxNo, u32) as Value>::as_bytes(&vv)).to_vec();
            if let Some(prev) = &last {
                let order = <(TxNo, u32) as Key>::compare(prev, &vb);
                assert_eq!(
                    order,
                    Ordering::Less,
                    "a key's values are out of the app's order"
                );
            }
            rows.push(format!(
                "[\"{}\", \"{}\"]",
                hex(k.value().as_bytes()),
                hex(&vb)
            ));
            last = Some(vb);
        }
    }
    let _ = write!(json, "\"multimap_custom\": [{}]", rows.join(", "));
    json.push('}');
    json
}
