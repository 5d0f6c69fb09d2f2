//! `statemigrate._native`: the project's private Rust extension.
//!
//! The Python package imports it only from its engine modules and from
//! `statemigrate.digest`; every function moves whole batches and releases the GIL
//! around the work that does not touch Python objects.
use pyo3::prelude::*;

mod batch;
mod digest;
mod fileio;
mod fjall_engine;
mod lmdb_check;
mod lmdb_digest;
mod lmdb_pages;
mod py_sort;
mod redb_engine;
mod rocksdb_check;
mod sort;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(digest::batch_digest, m)?)?;
    m.add_function(wrap_pyfunction!(batch::take_batch, m)?)?;
    m.add_function(wrap_pyfunction!(lmdb_check::lmdb_check, m)?)?;
    m.add_function(wrap_pyfunction!(lmdb_digest::lmdb_digests, m)?)?;
    m.add_function(wrap_pyfunction!(rocksdb_check::rocksdb_manifest_check, m)?)?;
    m.add_class::<py_sort::ExternalSort>()?;
    redb_engine::register(m)?;
    fjall_engine::register(m)?;
    Ok(())
}
