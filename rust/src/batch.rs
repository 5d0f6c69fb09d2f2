//! Taking bounded batches from a driver's Python iterator without one Python-level
//! call per record: `next()` is called from Rust, sizes are checked in Rust, and the
//! engine layouts' version encodings are decoded here.
use pyo3::exceptions::{PyIndexError, PyValueError};
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

/// How far a batch goes (DESIGN.md: batches bounded by count and bytes): it ends with
/// the record that brings it to `records` records or `bytes` payload bytes.
#[derive(Clone, Copy, Debug)]
pub struct Limits {
    pub records: usize,
    pub bytes: usize,
}

impl Limits {
    /// The limits Python asked for, at least one record and one byte.
    pub fn new(records: usize, bytes: usize) -> Self {
        Limits {
            records: records.max(1),
            bytes: bytes.max(1),
        }
    }

    /// Whether a batch of `count` records holding `bytes` payload bytes is full.
    pub fn reached(&self, count: usize, bytes: usize) -> bool {
        count >= self.records || bytes >= self.bytes
    }
}

/// Which batch of a table to read: the records strictly after `after` (from the first
/// when None), as many as `limits` let one batch hold.
#[derive(Clone, Copy, Debug)]
pub struct Window<'a> {
    pub after: Option<&'a [u8]>,
    pub limits: Limits,
}

impl<'a> Window<'a> {
    /// The batch Python asked for: after `after`, within `max_records` and `max_bytes`
    /// (see [`Limits::new`]).
    pub fn new(after: Option<&'a [u8]>, max_records: usize, max_bytes: usize) -> Self {
        Window {
            after,
            limits: Limits::new(max_records, max_bytes),
        }
    }

    /// The keys the batch is taken from, in order: all those after `after`.
    pub fn range(&self) -> (std::ops::Bound<&'a [u8]>, std::ops::Bound<&'a [u8]>) {
        use std::ops::Bound::{Excluded, Unbounded};
        (self.after.map_or(Unbounded, Excluded), Unbounded)
    }
}

/// A record as Python gave it: its key and value (borrowed from Python, no copy) and
/// its version (`None` in a plain table).
pub type PyRecord<'py> = (Bound<'py, PyBytes>, Bound<'py, PyBytes>, Option<u64>);

/// The records of a batch as Python gave them: `(key, value)` tuples of bytes, or
/// `(key, value, version)` when `versioned`; `kind` names the table's kind in errors.
pub fn records_from_py<'py>(
    records: &Bound<'py, PyList>,
    versioned: bool,
    kind: &str,
) -> PyResult<Vec<PyRecord<'py>>> {
    let want = if versioned { 3 } else { 2 };
    let mut owned = Vec::with_capacity(records.len());
    for item in records.iter() {
        let t = item
            .cast_into::<PyTuple>()
            .map_err(|_| PyValueError::new_err("a record must be a tuple"))?;
        if t.len() != want {
            return Err(PyValueError::new_err(format!(
                "a {kind} record has {want} fields, got {}",
                t.len()
            )));
        }
        let k = t
            .get_item(0)?
            .cast_into::<PyBytes>()
            .map_err(|_| PyValueError::new_err("a key must be bytes"))?;
        let v = t
            .get_item(1)?
            .cast_into::<PyBytes>()
            .map_err(|_| PyValueError::new_err("a value must be bytes"))?;
        let ver = if versioned {
            Some(t.get_item(2)?.extract::<u64>()?)
        } else {
            None
        };
        owned.push((k, v, ver));
    }
    Ok(owned)
}

/// One record as Python sees it: `(key, value)`, or `(key, value, version)` when `versioned`.
pub fn record_to_py<'py>(
    py: Python<'py>,
    (k, v, ver): (&[u8], &[u8], u64),
    versioned: bool,
) -> PyResult<Bound<'py, PyTuple>> {
    let (k, v) = (PyBytes::new(py, k), PyBytes::new(py, v));
    if versioned {
        PyTuple::new(
            py,
            [
                k.into_any(),
                v.into_any(),
                ver.into_pyobject(py)?.into_any(),
            ],
        )
    } else {
        PyTuple::new(py, [k, v])
    }
}

/// A batch held in Rust memory: what a native reader read, for a native writer of the
/// same binding to write, with no Python object made per record. Python measures it
/// (`len`), looks at single records (`batch[-1][0]`, which iteration falls back to),
/// and digests it (`digest`, as `batch_digest` digests a list).
#[pyclass(module = "statemigrate._native", frozen)]
pub struct HeldBatch {
    recs: Vec<(Vec<u8>, Vec<u8>, u64)>,
    /// The records carry a version (they show as `(key, value, version)`).
    pub versioned: bool,
}

impl HeldBatch {
    /// Hold `recs`.
    pub fn new(recs: Vec<(Vec<u8>, Vec<u8>, u64)>, versioned: bool) -> Self {
        HeldBatch { recs, versioned }
    }

    /// The records as borrowed slices, the shape the writers take.
    pub fn borrowed(&self) -> Vec<(&[u8], &[u8], u64)> {
        self.recs
            .iter()
            .map(|(k, v, ver)| (k.as_slice(), v.as_slice(), *ver))
            .collect()
    }
}

#[pymethods]
impl HeldBatch {
    fn __len__(&self) -> usize {
        self.recs.len()
    }

    /// Record `i` (negative counts from the end) as a tuple; IndexError past either end.
    fn __getitem__<'py>(&self, py: Python<'py>, i: isize) -> PyResult<Bound<'py, PyTuple>> {
        let n = self.recs.len() as isize;
        let at = if i < 0 { i + n } else { i };
        if at < 0 || at >= n {
            return Err(PyIndexError::new_err("batch index out of range"));
        }
        let (k, v, ver) = &self.recs[at as usize];
        record_to_py(py, (k, v, *ver), self.versioned)
    }

    /// `(count, sum mod 2^128, index of the first record out of key order or -1, payload
    /// bytes)`, as `batch_digest` gives them for the same records as a list.
    fn digest(&self, py: Python<'_>, versioned: bool) -> (u64, u128, i64, u64) {
        let (sum, unsorted, nbytes) = py.detach(|| digest_held(&self.recs, versioned));
        (self.recs.len() as u64, sum, unsorted, nbytes)
    }
}

/// `digest_items` over held records, each with its version when `versioned`.
fn digest_held(recs: &[(Vec<u8>, Vec<u8>, u64)], versioned: bool) -> (u128, i64, u64) {
    let items: Vec<(&[u8], &[u8], Option<u64>)> = recs
        .iter()
        .map(|(k, v, ver)| (k.as_slice(), v.as_slice(), versioned.then_some(*ver)))
        .collect();
    crate::digest::digest_items(&items)
}
