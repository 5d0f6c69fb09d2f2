/// Adds a persistent savepoint to the file (what an app that keeps one leaves).
pub fn add_savepoint(path: &std::path::Path) -> String {
    let db = r::Database::open(path).unwrap();
    let txn = db.begin_write().unwrap();
    let id = txn.persistent_savepoint().unwrap();
    txn.commit().unwrap();
    id.to_string()
}

/// How many persistent savepoints the file holds.
pub fn count_savepoints(path: &std::path::Path) -> String {
    let db = r::Database::open(path).unwrap();
    let txn = db.begin_write().unwrap();
    let n = txn.list_persistent_savepoints().unwrap().count();
    txn.abort().unwrap();
    n.to_string()
}
