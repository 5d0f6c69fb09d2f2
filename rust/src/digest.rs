//! The contract's record digest (DESIGN.md, "The digest"): XXH3-128 over
//! `u64le(len(key)) ‖ key ‖ u64le(len(value)) ‖ value [‖ u64le(version)]`,
//! summed modulo 2^128 over a batch.
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use xxhash_rust::xxh3::xxh3_128;

/// Hash of one record, as the contract defines it, using `buf` as scratch space.
///
/// One-shot XXH3 over a contiguous buffer is several times faster than the
/// streaming hasher for records of a few hundred bytes.
pub fn record_hash_into(buf: &mut Vec<u8>, key: &[u8], value: &[u8], version: Option<u64>) -> u128 {
    buf.clear();
    buf.extend_from_slice(&(key.len() as u64).to_le_bytes());
    buf.extend_from_slice(key);
    buf.extend_from_slice(&(value.len() as u64).to_le_bytes());
    buf.extend_from_slice(value);
    if let Some(v) = version {
        buf.extend_from_slice(&v.to_le_bytes());
    }
    xxh3_128(buf)
}

/// Digest a list of `(key, value)` or `(key, value, version)` tuples.
///
/// Returns `(count, sum, unsorted, nbytes)`: the sum of the record hashes modulo 2^128, and
/// the index of the first record whose key is not strictly greater than the one
/// before it (or -1 when the batch is in key order, as every reader must yield it),
/// and the payload bytes (keys plus values).
/// The bytes are borrowed from the Python objects (no copy); the hashing runs
/// with the GIL released.
#[pyfunction]
pub fn batch_digest(
    py: Python<'_>,
    records: &Bound<'_, PyList>,
    versioned: bool,
) -> PyResult<(u64, u128, i64, u64)> {
    let want = if versioned { 3 } else { 2 };
    let mut owned: Vec<(Bound<'_, PyBytes>, Bound<'_, PyBytes>, Option<u64>)> =
        Vec::with_capacity(records.len());
    for item in records.iter() {
        let t = item
            .cast_into::<PyTuple>()
            .map_err(|_| PyValueError::new_err("a record must be a tuple"))?;
        if t.len() != want {
            return Err(PyValueError::new_err(format!(
                "a {} record has {} fields, got {}",
                if versioned { "versioned" } else { "plain" },
                want,
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
    let n = owned.len();
    // Python bytes are immutable and `owned` keeps them alive, so borrowing is safe.
    let items: Vec<(&[u8], &[u8], Option<u64>)> = owned
        .iter()
        .map(|(k, v, ver)| (k.as_bytes(), v.as_bytes(), *ver))
        .collect();
    let (sum, unsorted, nbytes) = py.detach(|| {
        let mut buf = Vec::with_capacity(4096);
        let sum = items.iter().fold(0u128, |acc, (k, v, ver)| {
            acc.wrapping_add(record_hash_into(&mut buf, k, v, *ver))
        });
        let unsorted = items
            .windows(2)
            .position(|w| w[0].0 >= w[1].0)
            .map(|i| i as i64 + 1)
            .unwrap_or(-1);
        let nbytes: u64 = items
            .iter()
            .map(|(k, v, _)| (k.len() + v.len()) as u64)
            .sum();
        (sum, unsorted, nbytes)
    });
    Ok((n as u64, sum, unsorted, nbytes))
}
