//! The benchmarks' ceilings: redb's own fastest load and scan, through redb 4.x and
//! none of the state model's plumbing (`benchmarks/run.py` compares converts with them).
use std::ops::Bound;
use std::path::{Path, PathBuf};

use pyo3::prelude::*;
use redb::{ReadableTable, TableDefinition, TableHandle};

use super::errors::{detach, NErr};
use super::versions::v4::{create_db, err, set_durable, Reader, META_TABLE};

/// Insert `n` generated records into table `bench`: redb's own fastest load (ascending
/// keys through a cursor at the table's end, as the writer appends), the benchmarks' ceiling. `batch == 0`: one durable transaction, then `compact()`;
/// otherwise a commit every `batch` records with `Durability::None` and a durable last
/// one (the fair ceiling for a writer that commits batches and does not compact).
pub fn bulk_load(
    path: &Path,
    n: u64,
    key_len: usize,
    value_len: usize,
    batch: u64,
) -> Result<(), NErr> {
    let mut db = create_db(path)?;
    let per_txn = if batch == 0 { n.max(1) } else { batch };
    let mut key = vec![0u8; key_len.max(8)];
    let value = vec![0x5au8; value_len];
    let mut i = 0u64;
    loop {
        let end = (i + per_txn).min(n);
        let mut txn = db.begin_write().map_err(err)?;
        set_durable(&mut txn, end == n)?;
        {
            let mut t = txn
                .open_table(TableDefinition::<&[u8], &[u8]>::new("bench"))
                .map_err(err)?;
            // Ascending keys through a cursor at the table's end: redb's own bulk path.
            let mut c = t.upper_bound_mut(Bound::<&[u8]>::Unbounded).map_err(err)?;
            while i < end {
                let kl = key.len();
                key[kl - 8..].copy_from_slice(&i.to_be_bytes());
                c.insert_before(&key[..], &value[..]).map_err(err)?;
                i += 1;
            }
            c.close().map_err(err)?;
        }
        txn.commit().map_err(err)?;
        if i >= n {
            break;
        }
    }
    if batch == 0 {
        while db.compact().map_err(err)? {}
    }
    Ok(())
}

/// Scan every plain table of a source, touching each key and value: the
/// benchmarks' read ceiling. Returns (records, payload bytes).
pub fn full_scan(path: &Path) -> Result<(u64, u64), NErr> {
    let reader = Reader::open(path)?;
    let mut n = 0u64;
    let mut bytes = 0u64;
    let names: Vec<String> = reader
        .txn()
        .list_tables()
        .map_err(err)?
        .map(|h| h.name().to_string())
        .collect();
    for name in names {
        if name == META_TABLE {
            continue;
        }
        let table = match reader
            .txn()
            .open_table(TableDefinition::<&[u8], &[u8]>::new(&name))
        {
            Ok(t) => t,
            Err(_) => continue,
        };
        for item in table.iter().map_err(err)? {
            let (k, v) = item.map_err(err)?;
            n += 1;
            bytes += (k.value().len() + v.value().len()) as u64;
        }
    }
    Ok((n, bytes))
}

/// redb's own fastest load (`&[u8] -> &[u8]`), for the benchmark ceiling: one
/// transaction and `compact()` (`batch=0`), or a commit every `batch` records.
#[pyfunction]
#[pyo3(signature = (path, records, key_len, value_len, batch=0))]
pub fn redb_bulk_load(
    py: Python<'_>,
    path: PathBuf,
    records: u64,
    key_len: usize,
    value_len: usize,
    batch: u64,
) -> PyResult<()> {
    detach(py, || bulk_load(&path, records, key_len, value_len, batch))?;
    Ok(())
}

/// redb's own full scan of every plain table, for the benchmark ceiling: (records, bytes).
#[pyfunction]
pub fn redb_full_scan(py: Python<'_>, path: PathBuf) -> PyResult<(u64, u64)> {
    Ok(detach(py, || full_scan(&path))?)
}
