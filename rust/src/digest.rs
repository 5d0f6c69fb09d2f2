//! The contract's record digest (DESIGN.md, "The digest"): XXH3-128 over
//! `u64le(len(key)) ‖ key ‖ u64le(len(value)) ‖ value [‖ u64le(version)]`,
//! summed modulo 2^128 over a batch.
use pyo3::prelude::*;
use pyo3::types::PyList;
use xxhash_rust::xxh3::xxh3_128;

use crate::batch::records_from_py;

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
    let kind = if versioned { "versioned" } else { "plain" };
    let owned = records_from_py(records, versioned, kind)?;
    let n = owned.len();
    // Python bytes are immutable and `owned` keeps them alive, so borrowing is safe.
    let items: Vec<(&[u8], &[u8], Option<u64>)> = owned
        .iter()
        .map(|(k, v, ver)| (k.as_bytes(), v.as_bytes(), *ver))
        .collect();
    let (sum, unsorted, nbytes) = py.detach(|| digest_items(&items));
    Ok((n as u64, sum, unsorted, nbytes))
}

/// `batch_digest`'s work over records however they are held: the sum of their hashes,
/// the index of the first record out of key order (or -1), and the payload bytes.
pub fn digest_items(items: &[(&[u8], &[u8], Option<u64>)]) -> (u128, i64, u64) {
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
}
