//! Taking bounded batches from a driver's Python iterator without one Python-level
//! call per record: `next()` is called from Rust, sizes are checked in Rust, and the
//! engine layouts' version encodings are decoded here.
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyIterator, PyList, PyTuple};

/// How the driver's rows carry a version.
#[derive(Clone, Copy)]
enum Decode {
    /// Rows are already `(key, value)` or `(key, value, version)`.
    AsIs,
    /// `(key, u64be(version) ‖ value)` (the RocksDB, LMDB and fjall layouts).
    BeVersionPrefix,
    /// `(key, value, i64)`: SQLite's signed INTEGER, read back modulo 2^64.
    SignedVersion,
}

fn parse_decode(name: &str) -> PyResult<Decode> {
    match name {
        "as_is" => Ok(Decode::AsIs),
        "be_version_prefix" => Ok(Decode::BeVersionPrefix),
        "signed_version" => Ok(Decode::SignedVersion),
        other => Err(PyValueError::new_err(format!(
            "unknown decode mode {other:?}"
        ))),
    }
}

fn bytes_len(item: &Bound<'_, PyAny>, what: &str) -> PyResult<usize> {
    item.cast::<PyBytes>()
        .map(|b| b.as_bytes().len())
        .map_err(|_| {
            PyValueError::new_err(format!(
                "a {what} must be bytes, got {}",
                item.get_type()
                    .name()
                    .map(|n| n.to_string())
                    .unwrap_or_default()
            ))
        })
}

/// Take up to `max_records` rows from `rows` (an iterator of tuples), stopping after
/// the row that brings the payload (key + value bytes) to `max_bytes` or more.
///
/// Returns `(batch, nbytes)`; an empty batch means the iterator is exhausted.
#[pyfunction]
#[pyo3(signature = (rows, max_records, max_bytes, decode="as_is"))]
pub fn take_batch<'py>(
    py: Python<'py>,
    rows: &Bound<'py, PyAny>,
    max_records: usize,
    max_bytes: usize,
    decode: &str,
) -> PyResult<(Bound<'py, PyList>, usize)> {
    let mode = parse_decode(decode)?;
    let it = PyIterator::from_object(rows)?;
    let out = PyList::empty(py);
    let mut nbytes = 0usize;
    for row in it {
        let row = row?;
        let t = row
            .cast::<PyTuple>()
            .map_err(|_| PyValueError::new_err("a row must be a tuple"))?;
        if t.len() < 2 {
            return Err(PyValueError::new_err("a row must hold a key and a value"));
        }
        let key = t.get_item(0)?;
        let value = t.get_item(1)?;
        let klen = bytes_len(&key, "key")?;
        let vlen = bytes_len(&value, "value")?;
        match mode {
            Decode::AsIs => {
                nbytes += klen + vlen;
                out.append(t)?;
            }
            Decode::BeVersionPrefix => {
                let raw = value.cast::<PyBytes>()?.as_bytes();
                if raw.len() < 8 {
                    return Err(PyValueError::new_err(
                        "a versioned record is shorter than its 8-byte version",
                    ));
                }
                let ver = u64::from_be_bytes(raw[..8].try_into().unwrap());
                let v = PyBytes::new(py, &raw[8..]);
                nbytes += klen + vlen - 8;
                out.append(PyTuple::new(
                    py,
                    [key, v.into_any(), ver.into_pyobject(py)?.into_any()],
                )?)?;
            }
            Decode::SignedVersion => {
                if t.len() != 3 {
                    return Err(PyValueError::new_err("a versioned row must hold a version"));
                }
                let ver = t.get_item(2)?.extract::<i64>()? as u64;
                nbytes += klen + vlen;
                out.append(PyTuple::new(
                    py,
                    [key, value, ver.into_pyobject(py)?.into_any()],
                )?)?;
            }
        }
        if out.len() >= max_records || nbytes >= max_bytes {
            break;
        }
    }
    Ok((out, nbytes))
}
