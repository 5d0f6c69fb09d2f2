//! `statemigrate._native`: the project's private Rust extension.
//!
//! The Python package imports it only from its engine modules and from
//! `statemigrate.digest`; every function moves whole batches and releases the GIL
//! around the work that does not touch Python objects.
//!
//! It mirrors the package's shape: a small core (`batch`: a batch bounded by count and
//! bytes; `digest`: the contract's record hash; `sort` and `py_sort`: the external sort;
//! `fileio`: positional reads and a shared lock; `errors`: the engines' one error type
//! and the panic-guarded `detach`) under `engines/`, one folder per engine.
use pyo3::prelude::*;

mod batch;
mod digest;
mod engines;
mod errors;
mod fileio;
mod py_sort;
mod sort;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(digest::batch_digest, m)?)?;
    m.add_function(wrap_pyfunction!(batch::take_batch, m)?)?;
    m.add_class::<batch::HeldBatch>()?;
    m.add_class::<py_sort::ExternalSort>()?;
    engines::register(m)
}
