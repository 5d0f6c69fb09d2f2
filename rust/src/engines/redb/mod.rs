//! The redb engine's native side: one binding per redb file format, chosen by
//! the caller from the file header (format 3: redb 4.x; 2: redb 2.6; 1: redb 1.5).
//!
//! Tables are classified as `plain` (`&[u8] -> &[u8]`), `versioned`
//! (`&[u8] -> (u64, &[u8])`), `typed` (any other built-in key type: keys are
//! mapped to an order-preserving encoding, see `types.rs`) or `custom` (a
//! user-defined key type, or a multimap's user-defined value type: raw bytes
//! yielded in byte order through an external sort).
//!
//! The files by job: `plan.rs` (a table's kind and key encodings), `read.rs` (a batch
//! from a snapshot), `write.rs` (a batch to stored pairs), `problems.rs` (refusals
//! before writing); `py_reader.rs`, `py_writer.rs`, `py_functions.rs` and `pyconv.rs`
//! (what Python sees); `errors.rs` (error kinds, panics); `versions/` (one binding
//! per redb version, written once by a macro); `bench.rs` (the benchmarks'
//! ceilings, built only with the cargo feature `bench`).
use pyo3::prelude::*;

/// `$body` with `$x` bound to the value in whichever variant of `$enum` (one variant a
/// redb version) `$e` holds.
macro_rules! each_version {
    ($enum:ident { $($v:ident),* }, $e:expr, $x:ident => $body:expr) => {
        match $e {
            $($enum::$v($x) => $body,)*
        }
    };
}

#[cfg(feature = "bench")]
mod bench;
mod desc;
mod errors;
mod overlay;
mod plan;
mod problems;
mod py_functions;
mod py_reader;
mod py_writer;
mod pyconv;
mod read;
mod typename;
pub mod types;
mod versions;
mod write;

use errors::{RedbBusyError, RedbCorruptError, RedbError, RedbRefusedError, RedbUnsupportedError};
use py_functions::{redb_encode_key, redb_settle_copy, redb_table_kind, redb_table_problems};
use py_reader::RedbReader;
use py_writer::RedbWriter;

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<RedbReader>()?;
    m.add_class::<RedbWriter>()?;
    #[cfg(feature = "bench")]
    {
        m.add_function(wrap_pyfunction!(bench::redb_bulk_load, m)?)?;
        m.add_function(wrap_pyfunction!(bench::redb_full_scan, m)?)?;
    }
    m.add_function(wrap_pyfunction!(redb_encode_key, m)?)?;
    m.add_function(wrap_pyfunction!(redb_table_kind, m)?)?;
    m.add_function(wrap_pyfunction!(redb_table_problems, m)?)?;
    m.add_function(wrap_pyfunction!(redb_settle_copy, m)?)?;
    m.add("RedbBusyError", py.get_type::<RedbBusyError>())?;
    m.add("RedbCorruptError", py.get_type::<RedbCorruptError>())?;
    m.add(
        "RedbUnsupportedError",
        py.get_type::<RedbUnsupportedError>(),
    )?;
    m.add("RedbRefusedError", py.get_type::<RedbRefusedError>())?;
    m.add("RedbError", py.get_type::<RedbError>())?;
    Ok(())
}
