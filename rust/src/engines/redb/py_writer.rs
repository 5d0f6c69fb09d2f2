//! `RedbWriter`: a redb store being written, for the Python side.
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::errors::{detach, NErr};
use super::plan::plan;
use super::pyconv::{desc_from_py, metadata_to_py, recs_to_py, tables_to_py};
use super::read::{read_table, Snapshot, SortState};
use super::versions::{v2, v4};
use super::write::{encode_batch, native_versioned, target_desc, Encoded, TableKind};
use crate::batch::{records_from_py, HeldBatch, Window};

enum WriterImpl {
    V2(v2::Writer),
    V4(v4::Writer),
}

/// `body` with `$w` bound to the writer of whichever redb version writes the file.
macro_rules! each_w {
    ($e:expr, $w:ident => $body:expr) => {
        each_version!(WriterImpl { V2, V4 }, $e, $w => $body)
    };
}

/// A redb store being written (format 3 through redb 4.x, or format 2 through redb 2.6).
#[pyclass(module = "statemigrate._native")]
pub struct RedbWriter {
    format: u8,
    /// Written through redb 2.6 (format 2, or format 3 as redb 2.6 writes it).
    redb2: bool,
    inner: Mutex<Option<WriterImpl>>,
    /// Custom-order tables being read back in byte order (cleared by every write).
    sorted: Mutex<HashMap<String, SortState>>,
}

type MetaUpdates = Vec<(String, Option<Vec<u8>>)>;

impl RedbWriter {
    /// Run `f` on the open writer with the GIL released. A call that `writes` first
    /// drops the custom-order tables being read back (what they would read changes).
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        writes: bool,
        f: impl FnOnce(&mut WriterImpl) -> Result<T, NErr> + Send,
    ) -> PyResult<T> {
        Ok(detach(py, || {
            if writes {
                let mut sorted = self.sorted.lock().unwrap_or_else(PoisonError::into_inner);
                sorted.clear();
            }
            let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let w = g
                .as_mut()
                .ok_or_else(|| NErr::other("the writer is closed"))?;
            f(w)
        })?)
    }
}

#[pymethods]
impl RedbWriter {
    /// Create (`create=True`, the path must not exist) or open a store of `format` 2 or 3.
    /// `redb2` writes a format-3 file through redb 2.6 (as its format-3 option does),
    /// which redb 2.6 still opens (redb 3.0 and later change its allocator state).
    #[new]
    #[pyo3(signature = (path, format, create, redb2=false))]
    fn new(py: Python<'_>, path: PathBuf, format: u8, create: bool, redb2: bool) -> PyResult<Self> {
        let w = detach(py, || -> Result<WriterImpl, NErr> {
            Ok(match (format, create) {
                (3, true) if redb2 => WriterImpl::V2(v2::Writer::create_format3(&path)?),
                (3, false) if redb2 => WriterImpl::V2(v2::Writer::open(&path)?),
                (2, true) => WriterImpl::V2(v2::Writer::create(&path)?),
                (2, false) => WriterImpl::V2(v2::Writer::open(&path)?),
                (3, true) => WriterImpl::V4(v4::Writer::create(&path)?),
                (3, false) => WriterImpl::V4(v4::Writer::open(&path)?),
                (v, _) => {
                    return Err(NErr::refused(format!(
                        "redb file format {v} cannot be written"
                    )))
                }
            })
        })?;
        let redb2 = matches!(w, WriterImpl::V2(_));
        Ok(RedbWriter {
            format,
            redb2,
            inner: Mutex::new(Some(w)),
            sorted: Mutex::new(HashMap::new()),
        })
    }

    #[getter]
    fn format(&self) -> u8 {
        self.format
    }

    fn list_tables<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let descs = self.run(py, false, |w| each_w!(w, x => x.begin_read()?.tables()))?;
        tables_to_py(py, &descs, self.format)
    }

    fn metadata(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyBytes>)>> {
        let meta = self.run(py, false, |w| each_w!(w, x => x.begin_read()?.metadata()))?;
        Ok(metadata_to_py(py, meta))
    }

    /// The kind (`plain`, `versioned`, `typed`, `custom`) a table description gets.
    fn kind_of(&self, table: &Bound<'_, PyDict>) -> PyResult<&'static str> {
        Ok(plan(
            self.format,
            &target_desc(self.format, self.redb2, &desc_from_py(table)?).0,
        )
        .kind
        .as_str())
    }

    /// Create an empty table: `kind` `plain`/`versioned`, or `typed` with the stored types in `table`.
    fn create_table(&self, py: Python<'_>, table: &Bound<'_, PyDict>, kind: &str) -> PyResult<()> {
        let d = target_desc(self.format, self.redb2, &desc_from_py(table)?).0;
        let k = match kind {
            "plain" => TableKind::Plain,
            "versioned" if native_versioned(self.redb2, &d) => TableKind::Versioned,
            _ => TableKind::Typed,
        };
        self.run(py, false, |w| each_w!(w, x => x.create_table(&d, k)))
    }

    /// Commit `records` (in key order) into `table` with `metadata` updates (None deletes), atomically.
    ///
    /// `records` is a list of tuples or a `HeldBatch` a `RedbReader` read (no Python
    /// object per record). `kind` is `plain`, `versioned` (records carry a version), or
    /// `typed`/`custom` (record keys are decoded back to the stored types described by
    /// `table`).
    fn write_batch(
        &self,
        py: Python<'_>,
        table: &Bound<'_, PyDict>,
        kind: &str,
        records: &Bound<'_, PyAny>,
        metadata: MetaUpdates,
    ) -> PyResult<()> {
        let (d, relayout) = target_desc(self.format, self.redb2, &desc_from_py(table)?);
        let versioned = kind == "versioned";
        let held = records.cast::<HeldBatch>().ok();
        let owned;
        let recs: Vec<(&[u8], &[u8], u64)> = match &held {
            Some(h) if h.get().versioned != versioned => {
                return Err(PyValueError::new_err(format!(
                    "a held batch of {} records cannot be written to a {kind} table",
                    if h.get().versioned {
                        "versioned"
                    } else {
                        "plain"
                    }
                )));
            }
            Some(h) => h.get().borrowed(),
            None => {
                let list = records
                    .cast::<PyList>()
                    .map_err(|_| PyValueError::new_err("a batch must be a list or a HeldBatch"))?;
                owned = records_from_py(list, versioned, kind)?;
                owned
                    .iter()
                    .map(|(k, v, ver)| (k.as_bytes(), v.as_bytes(), ver.unwrap_or(0)))
                    .collect()
            }
        };
        let (format, redb2) = (self.format, self.redb2);
        let kind = kind.to_string();
        self.run(py, true, |w| {
            match encode_batch(format, redb2, &kind, &d, &relayout, &recs)? {
                Encoded::Records => {
                    each_w!(w, x => x.write_plain(&d.name, versioned, &recs, &metadata))
                }
                Encoded::Pairs(pairs, key_order, value_order) => {
                    each_w!(w, x => x.write_raw(&d, key_order, value_order, &pairs, &metadata))
                }
            }
        })
    }

    /// One batch of `table` as committed so far, strictly after `after` (in-place upgrades).
    #[pyo3(signature = (table, after=None, max_records=10000, max_bytes=8388608))]
    fn read_batch<'py>(
        &self,
        py: Python<'py>,
        table: &Bound<'py, PyDict>,
        after: Option<Vec<u8>>,
        max_records: usize,
        max_bytes: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let format = self.format;
        let d = target_desc(format, self.redb2, &desc_from_py(table)?).0;
        let at = Window::new(after.as_deref(), max_records, max_bytes);
        let recs = self.run(py, false, |w| {
            let mut sorted = self.sorted.lock().unwrap_or_else(PoisonError::into_inner);
            each_w!(w, x => read_table(&x.begin_read()?, &mut sorted, format, &d, at))
        })?;
        recs_to_py(py, recs, format, &d)
    }

    /// Drop a table (nothing if it does not exist) and apply `metadata` updates, in one commit.
    fn drop_table(&self, py: Python<'_>, name: String, metadata: MetaUpdates) -> PyResult<()> {
        self.run(
            py,
            true,
            |w| each_w!(w, x => x.drop_table(&name, &metadata)),
        )
    }

    /// Make every commit so far durable.
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, false, |w| each_w!(w, x => x.sync()))
    }

    fn put_metadata(&self, py: Python<'_>, metadata: MetaUpdates) -> PyResult<()> {
        self.run(py, true, |w| each_w!(w, x => x.put_metadata(&metadata)))
    }

    /// A durable commit (no compaction: see `Writer::finish`).
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, false, |w| each_w!(w, x => x.finish()))
    }

    fn close(&self, py: Python<'_>) {
        let _ = detach(py, || {
            let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            *g = None;
            Ok::<_, NErr>(())
        });
    }
}
