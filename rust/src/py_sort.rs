//! `_native.ExternalSort`: the external sort of `op.rekey`, over the project's one
//! sort (`crate::sort`). Records go in as Python batches in any order and come out
//! in ascending key order, in bounded batches; memory stays bounded by the run size
//! whatever the table's size. A versioned record's version travels as 8 big-endian
//! bytes in front of its value. Sorting, spilling and merging run without the GIL.
use std::path::PathBuf;

use pyo3::exceptions::{PyOSError, PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};

use crate::sort::{default_run_bytes, Pair, SortError, Sorter};

fn os_error(e: SortError) -> PyErr {
    match e.errno {
        Some(n) => PyOSError::new_err((n, e.message)),
        None => PyOSError::new_err(e.message),
    }
}

fn bytes_of(item: &Bound<'_, PyAny>, what: &str) -> PyResult<Vec<u8>> {
    item.cast::<PyBytes>()
        .map(|b| b.as_bytes().to_vec())
        .map_err(|_| {
            let name = item
                .get_type()
                .name()
                .map(|n| n.to_string())
                .unwrap_or_default();
            PyValueError::new_err(format!("a record's {what} must be bytes, got {name}"))
        })
}

/// Sorts records with bounded memory (see the module's doc).
#[pyclass(module = "statemigrate._native")]
pub struct ExternalSort {
    sorter: Sorter,
    versioned: bool,
    merging: bool,
}

#[pymethods]
impl ExternalSort {
    /// `versioned`: records are `(key, value, version)`, else `(key, value)`;
    /// `directory`: where runs spill (anonymous files; the system's temporary
    /// directory when None); `run_bytes`: the payload held in memory at most (64 MiB,
    /// or `$STATEMIGRATE_SORT_RUN_BYTES`, when None); `make_directory`: `directory`
    /// does not exist yet, and the first spill creates it (mode 0700), refusing a path
    /// that exists by then (EEXIST), so a sort that never spills leaves nothing.
    #[new]
    #[pyo3(signature = (versioned, directory=None, run_bytes=None, make_directory=false))]
    fn new(
        versioned: bool,
        directory: Option<PathBuf>,
        run_bytes: Option<usize>,
        make_directory: bool,
    ) -> PyResult<Self> {
        let run_bytes = run_bytes.unwrap_or_else(default_run_bytes).max(1);
        let sorter = match (directory, make_directory) {
            (Some(dir), true) => Sorter::new_in_new_dir(run_bytes, dir),
            (None, true) => return Err(PyValueError::new_err("make_directory needs a directory")),
            (dir, false) => Sorter::new(run_bytes, dir),
        };
        Ok(ExternalSort {
            sorter,
            versioned,
            merging: false,
        })
    }

    /// Add a batch of records (a list of tuples), in any order.
    fn push(&mut self, py: Python<'_>, records: &Bound<'_, PyList>) -> PyResult<()> {
        if self.merging {
            return Err(PyRuntimeError::new_err("push after finish"));
        }
        let width = if self.versioned { 3 } else { 2 };
        for item in records.iter() {
            let t = item
                .cast::<PyTuple>()
                .map_err(|_| PyValueError::new_err("a record must be a tuple"))?;
            if t.len() != width {
                let shape = if self.versioned {
                    "(key, value, version)"
                } else {
                    "(key, value)"
                };
                return Err(PyValueError::new_err(format!("a record must be {shape}")));
            }
            let key = bytes_of(&t.get_item(0)?, "key")?;
            let value = t.get_item(1)?;
            let value = if self.versioned {
                let version: u64 = t.get_item(2)?.extract()?;
                let raw = value
                    .cast::<PyBytes>()
                    .map_err(|_| PyValueError::new_err("a record's value must be bytes"))?;
                let mut v = Vec::with_capacity(8 + raw.as_bytes().len());
                v.extend_from_slice(&version.to_be_bytes());
                v.extend_from_slice(raw.as_bytes());
                v
            } else {
                bytes_of(&value, "value")?
            };
            self.sorter.add(key, value);
            if self.sorter.is_full() {
                let sorter = &mut self.sorter;
                py.detach(|| sorter.spill()).map_err(os_error)?;
            }
        }
        Ok(())
    }

    /// How many runs spilled to files so far.
    #[getter]
    fn spilled_runs(&self) -> usize {
        self.sorter.spilled_runs()
    }

    /// Stop collecting; from here `take` yields the records in key order.
    fn finish(&mut self, py: Python<'_>) -> PyResult<()> {
        if !self.merging {
            let sorter = &mut self.sorter;
            py.detach(|| sorter.finish()).map_err(os_error)?;
            self.merging = true;
        }
        Ok(())
    }

    /// The next records in key order: up to `max_records`, stopping after the record
    /// that brings keys + values to `max_bytes` or more. Empty when all were taken.
    fn take<'py>(
        &mut self,
        py: Python<'py>,
        max_records: usize,
        max_bytes: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        if !self.merging {
            return Err(PyRuntimeError::new_err("take before finish"));
        }
        let sorter = &mut self.sorter;
        let versioned = self.versioned;
        let pairs: Vec<Pair> = py
            .detach(|| {
                let mut out = Vec::new();
                let mut size = 0usize;
                while out.len() < max_records.max(1) && size < max_bytes.max(1) {
                    match sorter.next()? {
                        Some((k, v)) => {
                            size += k.len() + v.len() - if versioned { 8 } else { 0 };
                            out.push((k, v));
                        }
                        None => break,
                    }
                }
                Ok(out)
            })
            .map_err(os_error)?;
        let out = PyList::empty(py);
        for (k, v) in pairs {
            let key = PyBytes::new(py, &k);
            if versioned {
                let version = u64::from_be_bytes(v[..8].try_into().expect("8 bytes"));
                let value = PyBytes::new(py, &v[8..]);
                out.append(PyTuple::new(
                    py,
                    [
                        key.into_any(),
                        value.into_any(),
                        version.into_pyobject(py)?.into_any(),
                    ],
                )?)?;
            } else {
                out.append(PyTuple::new(py, [key, PyBytes::new(py, &v)])?)?;
            }
        }
        Ok(out)
    }
}
