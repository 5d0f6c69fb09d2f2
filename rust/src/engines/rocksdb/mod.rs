//! RocksDB: the driver (rocksdict) does the reading and writing; the native side only
//! checks a MANIFEST's framing before RocksDB reads it (`manifest.rs`).
use pyo3::prelude::*;

mod manifest;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(manifest::rocksdb_manifest_check, m)?)?;
    Ok(())
}
