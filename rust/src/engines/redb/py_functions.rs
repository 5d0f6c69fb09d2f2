//! The module-level functions: a table's kind and problems without a file, a key's
//! encoding, and the benchmarks' ceilings (in `bench.rs`).
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyDict;

use std::path::PathBuf;

use super::errors::{detach, NErr};
use super::plan::plan;
use super::problems::problems;
use super::pyconv::desc_from_py;
use super::types::TypeExpr;
use super::versions::{v2, v4};
use super::write::target_desc;

/// The kind (`plain`, `versioned`, `typed`, `custom`) a table description gets from
/// the writer of `format` (through redb 2.6 when `redb2`), without a file.
#[pyfunction]
#[pyo3(signature = (table, format, redb2=false))]
pub fn redb_table_kind(
    table: &Bound<'_, PyDict>,
    format: u8,
    redb2: bool,
) -> PyResult<&'static str> {
    Ok(plan(
        format,
        &target_desc(format, redb2 || format < 3, &desc_from_py(table)?).0,
    )
    .kind
    .as_str())
}

/// Why the writer of `format` (through redb 2.6 when `redb2`) cannot write a table
/// as described, without a file (to refuse before anything is created): one
/// `(part, type name, reason)` per problem, the reason naming what would allow it.
#[pyfunction]
#[pyo3(signature = (table, format, redb2=false))]
pub fn redb_table_problems(
    table: &Bound<'_, PyDict>,
    format: u8,
    redb2: bool,
) -> PyResult<Vec<(String, String, String)>> {
    Ok(problems(format, redb2 || format < 3, &desc_from_py(table)?))
}

/// The order-preserving encoding of a stored key of redb type `type_name` (for tests and tools).
#[pyfunction]
#[pyo3(signature = (type_name, stored, legacy_tuples=false))]
pub fn redb_encode_key(type_name: &str, stored: &[u8], legacy_tuples: bool) -> PyResult<Vec<u8>> {
    let t = TypeExpr::parse(type_name, legacy_tuples)
        .ok_or_else(|| PyValueError::new_err(format!("not a built-in key type: {type_name}")))?;
    t.encode(stored).map_err(PyValueError::new_err)
}

/// Make the byte copy at `path` of a redb file of `format` a clean file of the redb
/// version that writes it (redb 2.6 for format 2, and for format 3 as redb 2.6
/// writes it when `redb2`; else redb 4.x): see `settle_copy`. With `upgrade`, a
/// format-2 copy is then upgraded to format 3 by redb 2.6's own `Database::upgrade`.
#[pyfunction]
#[pyo3(signature = (path, format, redb2=false, upgrade=false))]
pub fn redb_settle_copy(
    py: Python<'_>,
    path: PathBuf,
    format: u8,
    redb2: bool,
    upgrade: bool,
) -> PyResult<()> {
    Ok(detach(py, || match (format, redb2) {
        (2, _) | (3, true) => {
            let mut db = v2::settle_copy(&path)?;
            if upgrade && format == 2 {
                db.upgrade().map_err(v2::err)?;
            }
            Ok(())
        }
        (3, false) if !upgrade => v4::settle_copy(&path).map(drop),
        (v, _) => Err(NErr::unsupported(v)),
    })?)
}
