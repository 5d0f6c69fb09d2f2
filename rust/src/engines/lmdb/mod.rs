//! LMDB: what the tool reads from `data.mdb` itself, with plain file reads (the driver
//! maps the file and trusts it): the structural check before LMDB opens a store
//! (`check.rs`) and the digest walk (`digest.rs`), over one page reader (`pages.rs`).
use pyo3::prelude::*;

mod check;
mod digest;
mod pages;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(check::lmdb_check, m)?)?;
    m.add_function(wrap_pyfunction!(digest::lmdb_digests, m)?)?;
    Ok(())
}
