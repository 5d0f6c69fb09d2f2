//! `RedbReader`: a redb source at one snapshot, for the Python side.
use std::collections::HashMap;
use std::path::PathBuf;
use std::sync::{Mutex, PoisonError};

use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList};

use super::desc::{OwnedRec, TableDesc};
use super::errors::{detach, NErr};
use super::plan::{plan, Kind};
use super::pyconv::{desc_from_py, metadata_to_py, recs_to_held, recs_to_py, tables_to_py};
use super::read::{read_table, Snapshot, SortState};
use super::versions::{v1, v2, v4};
use crate::batch::{HeldBatch, Window};
use crate::digest::record_hash_into;

enum ReaderImpl {
    V1(v1::Reader),
    V2(v2::Reader),
    V4(v4::Reader),
}

/// `body` with `$r` bound to the reader of whichever redb version opened the file.
macro_rules! each {
    ($e:expr, $r:ident => $body:expr) => {
        each_version!(ReaderImpl { V1, V2, V4 }, $e, $r => $body)
    };
}

struct ReaderState {
    reader: Option<ReaderImpl>,
    /// Custom-order tables being read in byte order, by name.
    sorted: HashMap<String, SortState>,
}

/// A redb source at one snapshot (one read transaction); never modifies the file.
#[pyclass(module = "statemigrate._native")]
pub struct RedbReader {
    format: u8,
    state: Mutex<ReaderState>,
}

impl RedbReader {
    /// Run `f` on the open reader (and its sorted tables) with the GIL released.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&ReaderImpl, &mut HashMap<String, SortState>) -> Result<T, NErr> + Send,
    ) -> PyResult<T> {
        Ok(detach(py, || {
            let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let ReaderState { reader, sorted } = &mut *st;
            let r = reader
                .as_ref()
                .ok_or_else(|| NErr::other("the reader is closed"))?;
            f(r, sorted)
        })?)
    }
}

impl RedbReader {
    /// One batch of `table` strictly after `after`, read with the GIL released, and the
    /// table's description.
    fn read(
        &self,
        py: Python<'_>,
        table: &Bound<'_, PyDict>,
        after: Option<Vec<u8>>,
        max_records: usize,
        max_bytes: usize,
    ) -> PyResult<(Vec<OwnedRec>, TableDesc)> {
        let d = desc_from_py(table)?;
        let format = self.format;
        let at = Window::new(after.as_deref(), max_records, max_bytes);
        let recs = self.run(
            py,
            |r, sorted| each!(r, x => read_table(x.txn(), sorted, format, &d, at)),
        )?;
        Ok((recs, d))
    }
}

#[pymethods]
impl RedbReader {
    /// Open `path` (a redb file of `format` 1, 2 or 3) read-only at one snapshot.
    #[new]
    fn new(py: Python<'_>, path: PathBuf, format: u8) -> PyResult<Self> {
        let reader = detach(py, || -> Result<ReaderImpl, NErr> {
            Ok(match format {
                1 => ReaderImpl::V1(v1::Reader::open(&path)?),
                2 => ReaderImpl::V2(v2::Reader::open(&path)?),
                3 => ReaderImpl::V4(v4::Reader::open(&path)?),
                v => return Err(NErr::unsupported(v)),
            })
        })?;
        Ok(RedbReader {
            format,
            state: Mutex::new(ReaderState {
                reader: Some(reader),
                sorted: HashMap::new(),
            }),
        })
    }

    #[getter]
    fn format(&self) -> u8 {
        self.format
    }

    /// Every table and multimap table (not the metadata table), as dicts.
    fn list_tables<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let descs = self.run(py, |r, _| each!(r, x => x.txn().tables()))?;
        tables_to_py(py, &descs, self.format)
    }

    /// The `__statemigrate__` table's entries.
    fn metadata(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyBytes>)>> {
        let meta = self.run(py, |r, _| each!(r, x => x.txn().metadata()))?;
        Ok(metadata_to_py(py, meta))
    }

    /// One batch of `table` (a dict from `list_tables`) strictly after `after`.
    #[pyo3(signature = (table, after=None, max_records=10000, max_bytes=8388608))]
    fn read_batch<'py>(
        &self,
        py: Python<'py>,
        table: &Bound<'py, PyDict>,
        after: Option<Vec<u8>>,
        max_records: usize,
        max_bytes: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let (recs, d) = self.read(py, table, after, max_records, max_bytes)?;
        recs_to_py(py, recs, self.format, &d)
    }

    /// The same batch held in Rust (`HeldBatch`), for a `RedbWriter` to write without
    /// a Python object per record.
    #[pyo3(signature = (table, after=None, max_records=10000, max_bytes=8388608))]
    fn read_held(
        &self,
        py: Python<'_>,
        table: &Bound<'_, PyDict>,
        after: Option<Vec<u8>>,
        max_records: usize,
        max_bytes: usize,
    ) -> PyResult<HeldBatch> {
        let (recs, d) = self.read(py, table, after, max_records, max_bytes)?;
        Ok(recs_to_held(recs, self.format, &d))
    }

    /// Each table's `(count, digest sum, payload bytes)` (the contract's digest), read
    /// in Rust through the same batches as `read_batch`, without the GIL. Raises when a
    /// table's keys come out of order or the file cannot be read (the caller then
    /// reads it through `read_batch`, which names the problem).
    fn digests(
        &self,
        py: Python<'_>,
        tables: Vec<Bound<'_, PyDict>>,
    ) -> PyResult<Vec<(u64, u128, u64)>> {
        let descs = tables
            .iter()
            .map(|t| desc_from_py(t))
            .collect::<PyResult<Vec<_>>>()?;
        let format = self.format;
        self.run(py, |r, sorted| {
            let mut out = Vec::with_capacity(descs.len());
            let mut buf = Vec::with_capacity(4096);
            for d in &descs {
                let p = plan(format, d);
                let versioned = p.kind == Kind::Versioned;
                let (mut count, mut sum, mut nbytes) = (0u64, 0u128, 0u64);
                let mut add = |prev: Option<&[u8]>, k: &[u8], v: &[u8], ver: u64| {
                    if prev.is_some_and(|p| p >= k) {
                        return Err(NErr::corrupt(format!(
                            "table {:?}: keys out of order",
                            d.name
                        )));
                    }
                    sum = sum.wrapping_add(record_hash_into(
                        &mut buf,
                        k,
                        v,
                        versioned.then_some(ver),
                    ));
                    nbytes += (k.len() + v.len()) as u64;
                    count += 1;
                    Ok(())
                };
                if matches!(p.kind, Kind::Plain | Kind::Versioned) && !p.raw_versioned {
                    // Records lent in place, one pass: no copy per record.
                    let (mut prev, mut started) = (Vec::new(), false);
                    each!(r, x => x.txn().each_plain(&d.name, versioned, &mut |k, v, ver| {
                        add(started.then_some(prev.as_slice()), k, v, ver)?;
                        started = true;
                        prev.clear();
                        prev.extend_from_slice(k);
                        Ok(())
                    }))?;
                } else {
                    let mut after: Option<Vec<u8>> = None;
                    loop {
                        let w = Window::new(after.as_deref(), 10_000, 8 << 20);
                        let recs = each!(r, x => read_table(x.txn(), sorted, format, d, w))?;
                        let Some(last) = recs.last() else { break };
                        for (i, (k, v, ver)) in recs.iter().enumerate() {
                            let prev = if i == 0 {
                                after.as_deref()
                            } else {
                                Some(recs[i - 1].0.as_slice())
                            };
                            add(prev, k, v, *ver)?;
                        }
                        after = Some(last.0.clone());
                    }
                }
                out.push((count, sum, nbytes));
            }
            Ok(out)
        })
    }

    /// How many records `table` (a dict from `list_tables`) holds: redb's stored length.
    fn count(&self, py: Python<'_>, table: &Bound<'_, PyDict>) -> PyResult<u64> {
        let d = desc_from_py(table)?;
        self.run(py, |r, _| each!(r, x => x.txn().count(&d)))
    }

    /// Release the snapshot and the file.
    fn close(&self, py: Python<'_>) {
        // Closing never raises: a damaged file may make redb fail even here.
        let _ = detach(py, || {
            let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            st.sorted.clear();
            st.reader = None;
            Ok::<_, NErr>(())
        });
    }
}
