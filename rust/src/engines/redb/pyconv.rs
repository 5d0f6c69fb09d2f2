//! Table descriptions and records between Python objects and the binding's types.
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

use super::desc::{OwnedRec, TableDesc, TypeDesc};
use super::plan::{is_composite, legacy_tuples, plan, Kind};
use crate::batch::{record_to_py, HeldBatch};

pub fn desc_to_py<'py>(py: Python<'py>, d: &TableDesc, format: u8) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("name", &d.name)?;
    out.set_item("multimap", d.multimap)?;
    out.set_item("kind", plan(format, d).kind.as_str())?;
    for (field, t) in [("key", &d.key), ("value", &d.value)] {
        let td = PyDict::new(py);
        td.set_item("name", &t.name)?;
        td.set_item("class", &t.class)?;
        td.set_item("width", t.width)?;
        // Only built-in composites have a tuple layout to speak of.
        let composite = t.class != "UserDefined" && is_composite(&t.name);
        td.set_item("legacy", composite && legacy_tuples(format, t))?;
        out.set_item(field, td)?;
    }
    Ok(out)
}

/// Table descriptions as the dicts Python sees (see `desc_to_py`).
pub fn tables_to_py<'py>(
    py: Python<'py>,
    descs: &[TableDesc],
    format: u8,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    descs.iter().map(|d| desc_to_py(py, d, format)).collect()
}

/// The metadata table's entries as Python sees them.
pub fn metadata_to_py(py: Python<'_>, meta: Vec<(String, Vec<u8>)>) -> Vec<(String, Py<PyBytes>)> {
    meta.into_iter()
        .map(|(k, v)| (k, PyBytes::new(py, &v).unbind()))
        .collect()
}

pub fn desc_from_py(d: &Bound<'_, PyDict>) -> PyResult<TableDesc> {
    let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
        d.get_item(k)?
            .ok_or_else(|| PyValueError::new_err(format!("table description lacks {k:?}")))
    };
    let ty = |k: &str| -> PyResult<TypeDesc> {
        let t = get(k)?;
        let t = t
            .cast::<PyDict>()
            .map_err(|_| PyValueError::new_err("a type description must be a dict"))?;
        let item = |f: &str| {
            t.get_item(f)
                .ok()
                .flatten()
                .ok_or_else(|| PyValueError::new_err(format!("type lacks {f:?}")))
        };
        Ok(TypeDesc {
            name: item("name")?.extract()?,
            class: item("class")?.extract()?,
            width: item("width")?.extract()?,
            legacy: t
                .get_item("legacy")
                .ok()
                .flatten()
                .map(|x| x.extract::<bool>())
                .transpose()?,
        })
    };
    Ok(TableDesc {
        name: get("name")?.extract()?,
        multimap: get("multimap")
            .map(|m| m.extract::<bool>().unwrap_or(false))
            .unwrap_or(false),
        key: ty("key")?,
        value: ty("value")?,
        exact: d
            .get_item("exact")?
            .map(|x| x.extract::<bool>())
            .transpose()?
            .unwrap_or(false),
        bytewise: d
            .get_item("bytewise")?
            .map(|x| x.extract::<Vec<String>>())
            .transpose()?
            .unwrap_or_default(),
    })
}

/// A batch of table `d` (see `read_table`) as `read_batch` returns it: `(key, value)`
/// tuples, or `(key, value, version)` for a table of the versioned kind.
pub fn recs_to_py<'py>(
    py: Python<'py>,
    recs: Vec<OwnedRec>,
    format: u8,
    d: &TableDesc,
) -> PyResult<Bound<'py, PyList>> {
    let versioned = versioned_kind(format, d);
    let items: Vec<Bound<'py, PyTuple>> = recs
        .iter()
        .map(|(k, v, ver)| record_to_py(py, (k, v, *ver), versioned))
        .collect::<PyResult<_>>()?;
    PyList::new(py, items)
}

/// The same batch held in Rust (`HeldBatch`), for a writer of this binding.
pub fn recs_to_held(recs: Vec<OwnedRec>, format: u8, d: &TableDesc) -> HeldBatch {
    HeldBatch::new(recs, versioned_kind(format, d))
}

/// Whether table `d`'s records carry a version (the versioned kind).
fn versioned_kind(format: u8, d: &TableDesc) -> bool {
    plan(format, d).kind == Kind::Versioned
}
