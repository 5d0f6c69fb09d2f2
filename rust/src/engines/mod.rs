//! One module per engine, as the Python package has one folder per engine: each holds
//! its native readers, writers and file checks and registers what Python sees of them,
//! over the core modules beside it (`batch`, `digest`, `sort`, `fileio`, `errors`).
use pyo3::prelude::*;

mod fjall;
mod lmdb;
mod redb;
mod rocksdb;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    fjall::register(m)?;
    lmdb::register(m)?;
    redb::register(m)?;
    rocksdb::register(m)?;
    Ok(())
}
