//! The fjall engines' native side: fjall 3.x (`fjall`, on-disk format 3) and fjall 2.x
//! (`fjall2`, format 2), chosen by the caller from the store's `version` file.
//!
//! One keyspace (fjall 2: partition) per table, raw keys, a versioned table's values
//! as `u64be(version) ‖ value`, metadata in the keyspace `__statemigrate__`. Readers
//! open a private image of the store (the Python side makes it: fjall changes the
//! directory it opens) at one snapshot; batches are read and built with the GIL
//! released. Writers ingest the batches of a table they created (keys come
//! ascending into an empty keyspace) and write batches otherwise.
//!
//! The files by job: `store.rs` (what both majors offer), `v3.rs` and `v2.rs` (one
//! binding per major), `errors.rs` (error kinds, panics), this file (what Python sees),
//! `bench.rs` (the benchmarks' ceiling, built only with the cargo feature `bench`).
use std::collections::HashSet;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, PoisonError};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::pybacked::PyBackedBytes;
use pyo3::types::{PyBytes, PyList, PyTuple};

/// The end of every `Store::write`, for fjall 2's and fjall 3's write batches (the same
/// methods, no trait in common): the metadata updates `meta` put into `$batch` (through
/// the metadata keyspace of `$store`), and the batch committed if it holds anything.
macro_rules! commit_with_meta {
    ($store:expr, $batch:ident, $meta:expr) => {{
        let meta: Vec<MetaUpdate> = $meta;
        if !meta.is_empty() {
            let m = $store.handle(META, true)?;
            for (k, v) in meta {
                match v {
                    Some(v) => $batch.insert(&m, k, v),
                    None => $batch.remove(&m, k),
                }
            }
        }
        if !$batch.is_empty() {
            $batch.commit()?;
        }
        Ok(())
    }};
}

#[cfg(feature = "bench")]
mod bench;
mod errors;
mod store;
mod v2;
mod v3;

use crate::batch::Window;
use errors::{detach, FjallBusyError, FjallCorruptError, FjallError, FjallRefusedError, NErr};
use store::{Bytes, MetaUpdate, Pair, Records, Store, MAX_KEY, META};

fn open(path: &Path, major: u8, pin: bool) -> Result<Box<dyn Store>, NErr> {
    // fjall creates a database wherever it is pointed: a writer creating one is the
    // only caller that may open a directory without a `version` file.
    Ok(match major {
        3 => Box::new(v3::Store3::open(path, pin)?),
        2 => Box::new(v2::Store2::open(path, pin)?),
        v => {
            return Err(NErr::other(format!(
                "fjall format {v} is not supported (2 and 3 are)"
            )))
        }
    })
}

/// An open store behind a lock, run with the GIL released.
struct Handle(Mutex<Option<Box<dyn Store>>>);

impl Handle {
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut dyn Store) -> Result<T, NErr> + Send,
    ) -> PyResult<T> {
        Ok(detach(py, || {
            let mut st = self.0.lock().unwrap_or_else(PoisonError::into_inner);
            let s = st
                .as_mut()
                .ok_or_else(|| NErr::other("the store is closed"))?;
            f(s.as_mut())
        })?)
    }

    fn close(&self, py: Python<'_>) {
        let _ = detach(py, || {
            self.0.lock().unwrap_or_else(PoisonError::into_inner).take();
            Ok::<_, NErr>(())
        });
    }
}

fn metadata(py: Python<'_>, h: &Handle) -> PyResult<Vec<(String, Py<PyBytes>)>> {
    let pairs = h.run(py, |s| {
        if !s.exists(META) {
            return Ok(Vec::new());
        }
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let b = s.scan(META, Window::new(after.as_deref(), 10_000, 8 << 20))?;
            let Some(last) = b.last() else { break };
            after = Some(last.0.to_vec());
            out.extend(b);
        }
        Ok(out)
    })?;
    pairs
        .into_iter()
        .map(|(k, v)| {
            let k = String::from_utf8(k.to_vec())
                .map_err(|_| FjallCorruptError::new_err("a metadata key is not UTF-8"))?;
            Ok((k, PyBytes::new(py, &v).unbind()))
        })
        .collect()
}

/// One batch of keyspace `name` strictly after `after`, as Python tuples (see
/// `FjallReader::read_batch`); read with the GIL released.
fn read_batch<'py>(
    py: Python<'py>,
    h: &Handle,
    name: &str,
    after: Option<Vec<u8>>,
    max_records: usize,
    max_bytes: usize,
    versioned: bool,
) -> PyResult<Bound<'py, PyList>> {
    let w = Window::new(after.as_deref(), max_records, max_bytes);
    let recs = h.run(py, |s| s.scan(name, w))?;
    let out = PyList::empty(py);
    for (k, v) in recs {
        let key = PyBytes::new(py, &k).into_any();
        if versioned {
            if v.len() < 8 {
                return Err(FjallCorruptError::new_err(format!(
                    "a record of versioned table {name:?} is shorter than its 8-byte version"
                )));
            }
            let ver = u64::from_be_bytes(v[..8].try_into().expect("8 bytes"));
            let val = PyBytes::new(py, &v[8..]).into_any();
            out.append(PyTuple::new(
                py,
                [key, val, ver.into_pyobject(py)?.into_any()],
            )?)?;
        } else {
            out.append(PyTuple::new(py, [key, PyBytes::new(py, &v).into_any()])?)?;
        }
    }
    Ok(out)
}

/// A fjall source at one snapshot (opened on a private image of the store).
#[pyclass(module = "statemigrate._native")]
pub struct FjallReader {
    h: Handle,
}

#[pymethods]
impl FjallReader {
    /// Open the fjall `major` (2 or 3) database at `path` at one snapshot.
    #[new]
    fn new(py: Python<'_>, path: PathBuf, major: u8) -> PyResult<Self> {
        if !path.join("version").is_file() {
            return Err(FjallCorruptError::new_err(format!(
                "{}: no fjall version file",
                path.display()
            )));
        }
        let s = detach(py, || open(&path, major, true))?;
        Ok(FjallReader {
            h: Handle(Mutex::new(Some(s))),
        })
    }

    /// Every keyspace (partition) name, the metadata's included.
    fn names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.h.run(py, |s| Ok(s.names()))
    }

    /// The `__statemigrate__` keyspace's entries (empty when it does not exist).
    fn metadata(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyBytes>)>> {
        metadata(py, &self.h)
    }

    /// One batch of keyspace `name` strictly after `after`: `(key, value)` tuples, or
    /// `(key, value, version)` for a versioned table.
    #[pyo3(signature = (name, after=None, max_records=10000, max_bytes=8388608, versioned=false))]
    fn read_batch<'py>(
        &self,
        py: Python<'py>,
        name: String,
        after: Option<Vec<u8>>,
        max_records: usize,
        max_bytes: usize,
        versioned: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        read_batch(py, &self.h, &name, after, max_records, max_bytes, versioned)
    }

    /// fjall's approximate record count of keyspace `name`.
    fn approximate_len(&self, py: Python<'_>, name: String) -> PyResult<u64> {
        self.h.run(py, |s| s.approximate_len(&name))
    }

    /// Bytes on disk of keyspace `name`, or of the whole database.
    #[pyo3(signature = (name=None))]
    fn disk_space(&self, py: Python<'_>, name: Option<String>) -> PyResult<u64> {
        self.h.run(py, |s| s.disk_space(name.as_deref()))
    }

    /// Release the snapshot and the database.
    fn close(&self, py: Python<'_>) {
        self.h.close(py);
    }
}

/// The key problem of `key` in table `name`, or None.
fn key_problem(name: &str, key: &[u8]) -> Option<String> {
    if key.is_empty() || key.len() > MAX_KEY {
        let shown: String = key.iter().take(64).map(|b| format!("{b:02x}")).collect();
        return Some(format!(
            "fjall cannot store key {} of table {name:?}: length {} is outside 1..{MAX_KEY} bytes",
            if shown.is_empty() {
                "(empty)".into()
            } else {
                shown
            },
            key.len()
        ));
    }
    None
}

fn records(name: &str, batch: &Bound<'_, PyList>, versioned: bool) -> PyResult<Vec<Pair>> {
    let mut out: Vec<Pair> = Vec::with_capacity(batch.len());
    for row in batch.iter() {
        let t = row
            .cast::<PyTuple>()
            .map_err(|_| PyValueError::new_err("a record must be a tuple"))?;
        // The batch's own bytes objects, held (not copied) while the GIL is released.
        let key: PyBackedBytes = t.get_item(0)?.cast_into::<PyBytes>()?.into();
        let value: PyBackedBytes = t.get_item(1)?.cast_into::<PyBytes>()?.into();
        if let Some(p) = key_problem(name, &key) {
            return Err(FjallRefusedError::new_err(p));
        }
        if out.last().is_some_and(|(prev, _)| **prev >= *key) {
            return Err(FjallRefusedError::new_err(format!(
                "table {name:?}: keys out of order in a batch"
            )));
        }
        let stored = if versioned {
            let ver: u64 = t.get_item(2)?.extract()?;
            let mut s = Vec::with_capacity(8 + value.len());
            s.extend_from_slice(&ver.to_be_bytes());
            s.extend_from_slice(&value);
            Bytes::Owned(s)
        } else {
            Bytes::Python(value)
        };
        out.push((Bytes::Python(key), stored));
    }
    Ok(out)
}

/// A fjall store being written (live reads, no snapshot).
#[pyclass(module = "statemigrate._native")]
pub struct FjallWriter {
    h: Handle,
    /// Tables this writer created: their batches come ascending into an empty keyspace.
    fresh: Mutex<HashSet<String>>,
}

#[pymethods]
impl FjallWriter {
    /// Open (`create`: create) the fjall `major` (2 or 3) database at `path` for writing.
    #[new]
    fn new(py: Python<'_>, path: PathBuf, major: u8, create: bool) -> PyResult<Self> {
        if create == path.exists() {
            let why = if create {
                "already exists"
            } else {
                "does not exist"
            };
            return Err(FjallRefusedError::new_err(format!(
                "{}: {why}",
                path.display()
            )));
        }
        if !create && !path.join("version").is_file() {
            return Err(FjallCorruptError::new_err(format!(
                "{}: no fjall version file",
                path.display()
            )));
        }
        let s = detach(py, || {
            let mut s = open(&path, major, false)?;
            if !s.exists(META) {
                s.create(META)?;
            }
            Ok(s)
        })?;
        Ok(FjallWriter {
            h: Handle(Mutex::new(Some(s))),
            fresh: Mutex::new(HashSet::new()),
        })
    }

    /// Every keyspace (partition) name, the metadata's included.
    fn names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.h.run(py, |s| Ok(s.names()))
    }

    /// The `__statemigrate__` keyspace's entries.
    fn metadata(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyBytes>)>> {
        metadata(py, &self.h)
    }

    /// Create the empty keyspace `name` together with the metadata updates `meta`.
    fn create_table(&self, py: Python<'_>, name: String, meta: Vec<MetaUpdate>) -> PyResult<()> {
        self.h.run(py, |s| {
            s.write(None, meta)?;
            s.create(&name)
        })?;
        self.fresh
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .insert(name);
        Ok(())
    }

    /// Store a batch of `(key, value[, version])` records (keys ascending, after every
    /// key the table holds) and the metadata updates `meta`.
    fn write_batch(
        &self,
        py: Python<'_>,
        name: String,
        batch: &Bound<'_, PyList>,
        versioned: bool,
        meta: Vec<MetaUpdate>,
    ) -> PyResult<()> {
        let pairs = records(&name, batch, versioned)?;
        let ingest = self
            .fresh
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .contains(&name);
        self.h.run(py, |s| {
            if !s.exists(&name) {
                return Err(NErr::other(format!("no table {name:?}")));
            }
            let records = Records {
                name: &name,
                pairs,
                ingest,
            };
            s.write(Some(records), meta)
        })
    }

    /// One batch of keyspace `name` as this writer sees it (in-place upgrades; see
    /// `FjallReader.read_batch`).
    #[pyo3(signature = (name, after=None, max_records=10000, max_bytes=8388608, versioned=false))]
    fn read_batch<'py>(
        &self,
        py: Python<'py>,
        name: String,
        after: Option<Vec<u8>>,
        max_records: usize,
        max_bytes: usize,
        versioned: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        read_batch(py, &self.h, &name, after, max_records, max_bytes, versioned)
    }

    /// Commit the metadata updates `meta`, then delete keyspace `name` and its records
    /// (nothing when it does not exist): a kill between the two leaves a table without
    /// its kind, which the upgrade's journal drops again.
    fn drop_table(&self, py: Python<'_>, name: String, meta: Vec<MetaUpdate>) -> PyResult<()> {
        self.fresh
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .remove(&name);
        self.h.run(py, |s| {
            s.write(None, meta)?;
            s.delete(&name)
        })
    }

    /// Commit metadata updates alone (None deletes).
    fn put_metadata(&self, py: Python<'_>, meta: Vec<MetaUpdate>) -> PyResult<()> {
        self.h.run(py, |s| s.write(None, meta))
    }

    /// Make every write durable (fsync).
    fn persist(&self, py: Python<'_>) -> PyResult<()> {
        self.h.run(py, |s| s.persist())
    }

    /// Release the database.
    fn close(&self, py: Python<'_>) {
        self.h.close(py);
    }
}

/// Whether `name` is a fjall 2 partition name as it is (else the Python side escapes it).
#[pyfunction]
fn fjall2_valid_name(name: &str) -> bool {
    v2::valid_name(name)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<FjallReader>()?;
    m.add_class::<FjallWriter>()?;
    m.add_function(wrap_pyfunction!(fjall2_valid_name, m)?)?;
    #[cfg(feature = "bench")]
    m.add_function(wrap_pyfunction!(bench::fjall_create_tables, m)?)?;
    m.add("FjallBusyError", py.get_type::<FjallBusyError>())?;
    m.add("FjallCorruptError", py.get_type::<FjallCorruptError>())?;
    m.add("FjallRefusedError", py.get_type::<FjallRefusedError>())?;
    m.add("FjallError", py.get_type::<FjallError>())?;
    Ok(())
}
