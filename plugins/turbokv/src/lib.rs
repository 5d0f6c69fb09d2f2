//! TurboKV 0.6 for statemigrate (`statemigrate_turbokv._native`): the real crate, bound
//! as statemigrate binds redb and fjall, built as its own extension because TurboKV's
//! Bloom filter hashes with gxhash, which needs the AES instructions.
//!
//! Layout: one flat key space; a table's record is stored under `table ‖ 0x00 ‖ key`
//! (table names hold no NUL, so the order and the parsing are exact), a versioned
//! table's value as `u64be(version) ‖ value`, metadata under the table name
//! `__statemigrate__` with the `kind:<table>` entries.
//!
//! TurboKV is async on tokio: one runtime, never dropped, outlives every database,
//! and every database is closed explicitly (`block_on(engine.shutdown())`, what
//! `Db::close` does; dropping one is not a clean shutdown). The binding opens the
//! crate's `Engine` with the configuration `Db::open_with_options` builds for a preset,
//! but WAL segments of 32 MiB (see [`store::WAL_SEGMENT`]). All work runs with the GIL
//! released; a panic becomes an error. Batches are built here, one `write_batch`
//! (atomic) per call.
//!
//! TurboKV's MANIFEST records every SSTable by absolute path, so a store that is moved
//! or copied does not open; [`relative_manifest`] rewrites the paths under a root to
//! relative ones (the crate's own `Manifest` load/save), which the crate accepts. The
//! writer does it whenever it closes a store, so the store it builds survives the
//! rename into place; the reader's private image gets it before it is opened.
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use turbokv::WriteBatch;

mod errors;
mod store;

use errors::{
    detach, NErr, TurbokvBusyError, TurbokvCorruptError, TurbokvError, TurbokvRefusedError,
};
use store::{
    close_db, config, open_db, prefix, relativize, runtime, stored_key, upper, wait_flushed, Open,
    Pair, META,
};

/// Rewrite the SSTable paths of the MANIFEST in `dir` that lie under `root` (the store
/// `dir` was copied from), under `dir`, or elsewhere with their `sstables/...` tail in
/// `dir` (a moved store), to paths relative to the store; the number rewritten. Only
/// for a directory no database has open.
#[pyfunction]
fn relative_manifest(py: Python<'_>, dir: PathBuf, root: PathBuf) -> PyResult<usize> {
    detach(py, || relativize(&dir, &root))
}

fn meta_pairs(py: Python<'_>, pairs: Vec<Pair>) -> PyResult<Vec<(String, Py<PyBytes>)>> {
    pairs
        .into_iter()
        .map(|(k, v)| {
            let k = String::from_utf8(k)
                .map_err(|_| TurbokvCorruptError::new_err("a metadata key is not UTF-8"))?;
            Ok((k, PyBytes::new(py, &v).unbind()))
        })
        .collect()
}

/// A TurboKV store being read (a private image: opening changes the directory).
#[pyclass(module = "statemigrate_turbokv._native")]
pub struct TurbokvReader {
    h: Mutex<Option<Open>>,
}

impl TurbokvReader {
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Open) -> Result<T, NErr> + Send,
    ) -> PyResult<T> {
        detach(py, || {
            let mut g = self.h.lock().unwrap_or_else(PoisonError::into_inner);
            let o = g
                .as_mut()
                .ok_or_else(|| NErr::Other("the store is closed".into()))?;
            f(o)
        })
    }
}

#[pymethods]
impl TurbokvReader {
    /// Open the TurboKV store at `path` (a private image nobody else writes, so every
    /// read sees the same state).
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let db = detach(py, || open_db(config(&path, "durable", "lz4", true)?))?;
        Ok(TurbokvReader {
            h: Mutex::new(Some(Open { db, cursor: None })),
        })
    }

    /// Every table name with a record, the metadata's included.
    fn names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.run(py, |o| o.names())
    }

    /// The metadata's entries.
    fn metadata(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyBytes>)>> {
        let pairs = self.run(py, |o| o.metadata())?;
        meta_pairs(py, pairs)
    }

    /// One batch of table `name` strictly after `after`: `(key, value)` tuples, or
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
        let (n, b) = (max_records.max(1), max_bytes.max(1));
        let recs = self.run(py, |o| o.scan(&name, after.as_deref(), n, b))?;
        to_list(py, &name, recs, versioned)
    }

    /// Close the database (flushes what it recovered into the private image).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        detach(py, || {
            let taken = self.h.lock().unwrap_or_else(PoisonError::into_inner).take();
            match taken {
                Some(o) => {
                    drop(o.cursor);
                    close_db(o.db)
                }
                None => Ok(()),
            }
        })
    }
}

fn to_list<'py>(
    py: Python<'py>,
    name: &str,
    recs: Vec<Pair>,
    versioned: bool,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for (k, v) in recs {
        let key = PyBytes::new(py, &k).into_any();
        if versioned {
            if v.len() < 8 {
                return Err(TurbokvCorruptError::new_err(format!(
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

/// A metadata update: key, and the new value (None deletes).
type MetaUpdate = (String, Option<Vec<u8>>);

fn put_meta(batch: &mut WriteBatch, meta: Vec<MetaUpdate>) {
    for (k, v) in meta {
        let key = stored_key(META, k.as_bytes());
        match v {
            Some(v) => batch.put(key, v),
            None => batch.delete(key),
        }
    }
}

/// Build the write batch of `records` of table `name` (keys ascending), GIL held only
/// to read the Python objects.
fn records(name: &str, batch: &Bound<'_, PyList>, versioned: bool) -> PyResult<WriteBatch> {
    let mut out = WriteBatch::with_capacity(batch.len());
    let mut prev: Option<Vec<u8>> = None;
    for row in batch.iter() {
        let t = row
            .cast::<PyTuple>()
            .map_err(|_| PyValueError::new_err("a record must be a tuple"))?;
        let key_item = t.get_item(0)?;
        let key = key_item.cast::<PyBytes>()?.as_bytes();
        let item = t.get_item(1)?;
        let value = item.cast::<PyBytes>()?.as_bytes();
        if prev.as_deref().is_some_and(|p| p >= key) {
            return Err(TurbokvRefusedError::new_err(format!(
                "table {name:?}: keys out of order in a batch"
            )));
        }
        prev = Some(key.to_vec());
        let stored = stored_key(name, key);
        if versioned {
            let ver: u64 = t.get_item(2)?.extract()?;
            let mut s = Vec::with_capacity(8 + value.len());
            s.extend_from_slice(&ver.to_be_bytes());
            s.extend_from_slice(value);
            out.put(stored, s);
        } else {
            out.put(stored, value);
        }
    }
    Ok(out)
}

fn check_name(name: &str) -> Result<(), NErr> {
    if name.as_bytes().contains(&0) {
        return Err(NErr::Refused(format!(
            "table name {name:?} holds a NUL byte, which TurboKV's layout cannot hold"
        )));
    }
    Ok(())
}

/// A TurboKV store being written (live reads).
#[pyclass(module = "statemigrate_turbokv._native")]
pub struct TurbokvWriter {
    h: Mutex<Option<Open>>,
    path: PathBuf,
    preset: String,
    compression: String,
    /// statemigrate's bounds (memory, WAL segments); false: the crate's own configuration.
    tuned: bool,
}

impl TurbokvWriter {
    /// Run `f` on the open database, reopening it when `finish` closed it.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Open) -> Result<T, NErr> + Send,
    ) -> PyResult<T> {
        detach(py, || {
            let mut g = self.h.lock().unwrap_or_else(PoisonError::into_inner);
            if g.is_none() {
                let db = open_db(config(
                    &self.path,
                    &self.preset,
                    &self.compression,
                    self.tuned,
                )?)?;
                *g = Some(Open { db, cursor: None });
            }
            let o = g.as_mut().expect("opened above");
            o.cursor = None; // a writer's scans see its latest writes
            f(o)
        })
    }

    /// Close the database and make its MANIFEST's paths relative.
    fn shut(&self) -> Result<(), NErr> {
        let taken = self.h.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(o) = taken {
            drop(o.cursor);
            close_db(o.db)?;
            relativize(&self.path, &self.path)?;
        }
        Ok(())
    }
}

#[pymethods]
impl TurbokvWriter {
    /// Open (`create`: create) the TurboKV store at `path` (absolute) for writing with
    /// durability `preset` (`durable`, `paranoid`, `fast`), SSTable `compression` and
    /// statemigrate's bounds on memory and WAL segments (`tuned`; false: exactly the
    /// configuration `Db::open_with_options` builds, for benchmarks).
    #[new]
    #[pyo3(signature = (path, create, preset="durable", compression="lz4", tuned=true))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        create: bool,
        preset: &str,
        compression: &str,
        tuned: bool,
    ) -> PyResult<Self> {
        if !path.is_absolute() {
            return Err(PyValueError::new_err("the store's path must be absolute"));
        }
        if create == path.exists() {
            let why = if create {
                "already exists"
            } else {
                "does not exist"
            };
            return Err(TurbokvRefusedError::new_err(format!(
                "{}: {why}",
                path.display()
            )));
        }
        let w = TurbokvWriter {
            h: Mutex::new(None),
            path,
            preset: preset.to_string(),
            compression: compression.to_string(),
            tuned,
        };
        w.run(py, |_| Ok(()))?;
        Ok(w)
    }

    /// Every table name with a record, the metadata's included.
    fn names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.run(py, |o| o.names())
    }

    /// The metadata's entries.
    fn metadata(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyBytes>)>> {
        let pairs = self.run(py, |o| o.metadata())?;
        meta_pairs(py, pairs)
    }

    /// One batch of table `name` as written so far (see `TurbokvReader.read_batch`).
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
        let (n, b) = (max_records.max(1), max_bytes.max(1));
        let recs = self.run(py, |o| o.scan(&name, after.as_deref(), n, b))?;
        to_list(py, &name, recs, versioned)
    }

    /// Store a batch of `(key, value[, version])` records of table `name` (keys
    /// ascending) and the metadata updates `meta`: one atomic `write_batch`.
    fn write_batch(
        &self,
        py: Python<'_>,
        name: String,
        batch: &Bound<'_, PyList>,
        versioned: bool,
        meta: Vec<MetaUpdate>,
    ) -> PyResult<()> {
        check_name(&name)?;
        let mut wb = records(&name, batch, versioned)?;
        put_meta(&mut wb, meta);
        self.run(py, |o| {
            runtime().block_on(o.db.write_batch(&wb))?;
            if self.tuned {
                wait_flushed(&o.db);
            }
            Ok(())
        })
    }

    /// Commit metadata updates alone (None deletes), atomically.
    fn put_metadata(&self, py: Python<'_>, meta: Vec<MetaUpdate>) -> PyResult<()> {
        let mut wb = WriteBatch::new();
        put_meta(&mut wb, meta);
        if wb.is_empty() {
            return Ok(());
        }
        self.run(py, |o| Ok(runtime().block_on(o.db.write_batch(&wb))?))
    }

    /// Delete every record of table `name` and apply `meta`, in batches of 10,000
    /// (the last one atomic with `meta`).
    fn clear_table(&self, py: Python<'_>, name: String, meta: Vec<MetaUpdate>) -> PyResult<()> {
        check_name(&name)?;
        self.run(py, |o| loop {
            let keys: Vec<Vec<u8>> = {
                let mut it = runtime().block_on(o.db.range_iter(&prefix(&name), &upper(&name)))?;
                let mut keys = Vec::new();
                for item in it.by_ref().take(10_000) {
                    keys.push(item?.into_key());
                }
                keys
            };
            let last = keys.len() < 10_000;
            let mut wb = WriteBatch::with_capacity(keys.len() + meta.len());
            for k in keys {
                wb.delete(k);
            }
            if last {
                put_meta(&mut wb, meta);
                if !wb.is_empty() {
                    runtime().block_on(o.db.write_batch(&wb))?;
                }
                return Ok(());
            }
            runtime().block_on(o.db.write_batch(&wb))?;
        })
    }

    /// TurboKV's physical statistics of the open store (memtables, SSTables, WAL,
    /// caches), as its `Debug` text: for diagnosing memory and disk use.
    fn physical_stats(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, |o| Ok(format!("{:?}", o.db.physical_stats())))
    }

    /// Make every write durable: memtables flushed to SSTables and the WAL synced.
    fn persist(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |o| Ok(runtime().block_on(o.db.flush())?))
    }

    /// Flush, close (the store can then be renamed: its MANIFEST's paths are made
    /// relative); a later call reopens it.
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |o| Ok(runtime().block_on(o.db.flush())?))?;
        detach(py, || self.shut())
    }

    /// Close the database (its MANIFEST's paths made relative).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        detach(py, || self.shut())
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<TurbokvReader>()?;
    m.add_class::<TurbokvWriter>()?;
    m.add_function(wrap_pyfunction!(relative_manifest, m)?)?;
    m.add("TurbokvBusyError", py.get_type::<TurbokvBusyError>())?;
    m.add("TurbokvCorruptError", py.get_type::<TurbokvCorruptError>())?;
    m.add("TurbokvRefusedError", py.get_type::<TurbokvRefusedError>())?;
    m.add("TurbokvError", py.get_type::<TurbokvError>())?;
    m.add("TURBOKV_VERSION", turbokv::VERSION)?;
    Ok(())
}
