// Test helpers compiled once per redb version (`include!`d by `binding!` under
// `cfg(test)`, see `mod.rs`): a type name made by `make_type_name` written to a real
// file, and what redb reads back from it.

/// A redb file with one table `t`, created with the type names this version's
/// `make_type_name` makes for `key` and `value` (classification, name).
pub fn file_with(key: (&str, &str), value: (&str, &str)) -> (tempfile::TempDir, redb::Database) {
    let width = |name: &str| TypeExpr::parse(name, false).and_then(|t| t.fixed_width());
    let dir = tempfile::tempdir().unwrap();
    let db = create_db(&dir.path().join("pin.redb")).unwrap();
    set_spec(RawSpec {
        key: make_type_name(key.0, key.1).unwrap(),
        key_width: width(key.1),
        value: make_type_name(value.0, value.1).unwrap(),
        value_width: width(value.1),
        key_order: None,
        value_order: None,
    });
    let txn = db.begin_write().unwrap();
    txn.open_table(TableDefinition::<RawKey, RawValue>::new("t"))
        .unwrap();
    txn.commit().unwrap();
    (dir, db)
}

/// The (classification, name) of table `t`'s key and value types as redb reads them
/// back from the file.
pub fn stored(db: &redb::Database) -> ((String, String), (String, String)) {
    let txn = db.begin_read().unwrap();
    let (k, _, v, _) = probe_table(&txn, "t", false).unwrap();
    (type_parts(&k), type_parts(&v))
}

/// Whether redb opens table `t` with the definition `K -> V` (its own check of the
/// stored type names and widths).
pub fn opens_as<K: Key + 'static, V: Value + 'static>(db: &redb::Database) -> bool {
    let txn = db.begin_read().unwrap();
    let opened = txn.open_table(TableDefinition::<K, V>::new("t")).is_ok();
    opened
}
