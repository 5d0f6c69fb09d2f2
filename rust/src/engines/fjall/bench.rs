//! The benchmarks' ceiling for many tables: fjall's own fastest way to make a store of
//! `n` one-record keyspaces, through the fjall crate of one major and none of the state
//! model's plumbing (`benchmarks/many_tables.py` compares converts with it).
use std::path::{Path, PathBuf};

use pyo3::prelude::*;

use super::errors::{detach, NErr};
use super::store::wait_within;

/// Wait until `pending` reports no sealed memtable left: thousands of flushes on a loaded
/// machine take longer than the writer's 60 s (`store::wait_flushed`), so ten minutes here.
fn wait_flushed(mut pending: impl FnMut() -> usize) -> Result<(), NErr> {
    wait_within(
        "flushing the memtables to tables did not finish",
        600,
        || pending() == 0,
    )
}

/// The benchmark's table names: `t00000`, `t00001`, …
fn name(i: u64) -> String {
    format!("t{i:05}")
}

/// fjall 3: `n` keyspaces created in one opening of the database, one record ingested
/// (`ingest`) or inserted in each, every memtable flushed to tables, fsynced, closed.
/// `reopen_every` (0: never, the ceiling) reopens the database after that many
/// creations, as the tool's writer does (`v3.rs`): fjall's part of the writer's cost.
fn create3(path: &Path, n: u64, ingest: bool, reopen_every: u64) -> Result<(), NErr> {
    use fjall::{Database, KeyspaceCreateOptions, PersistMode};
    let mut db = Database::builder(path).open()?;
    let mut created = 0;
    for i in 0..n {
        let ks = db.keyspace(&name(i), KeyspaceCreateOptions::default)?;
        let value = format!("v{i}");
        if ingest {
            let mut ing = ks.start_ingestion()?;
            ing.write(b"k", value.as_bytes())?;
            ing.finish()?;
        } else {
            ks.insert(b"k", value.as_bytes())?;
        }
        created += 1;
        if reopen_every > 0 && created >= reopen_every {
            drop(ks);
            drop(db);
            db = Database::builder(path).open()?;
            created = 0;
        }
    }
    let mut handles = Vec::with_capacity(n as usize);
    for k in db.list_keyspace_names().iter() {
        let h = db.keyspace(k, KeyspaceCreateOptions::default)?;
        h.rotate_memtable()?;
        handles.push(h);
    }
    wait_flushed(|| handles.iter().map(|h| h.sealed_memtable_count()).sum())?;
    db.persist(PersistMode::SyncAll)?;
    Ok(())
}

/// fjall 2: the same with partitions.
fn create2(path: &Path, n: u64, ingest: bool) -> Result<(), NErr> {
    use fjall2::{AbstractTree, Config, PartitionCreateOptions, PersistMode};
    let ks = Config::new(path).open()?;
    let mut handles = Vec::with_capacity(n as usize);
    for i in 0..n {
        let p = ks.open_partition(&name(i), PartitionCreateOptions::default())?;
        let value = format!("v{i}");
        if ingest {
            p.ingest(std::iter::once((b"k".as_slice(), value.as_bytes())))?;
        } else {
            p.insert(b"k", value.as_bytes())?;
        }
        handles.push(p);
    }
    for h in &handles {
        h.rotate_memtable()?;
    }
    wait_flushed(|| handles.iter().map(|h| h.tree.sealed_memtable_count()).sum())?;
    ks.persist(PersistMode::SyncAll)?;
    Ok(())
}

/// Create the fjall `major` (2 or 3) database at `path` holding `n` keyspaces
/// (partitions) `t00000`, … of one record each (`b"k"` -> `b"v<i>"`): fjall's own
/// fastest way to make the store `benchmarks/many_tables.py` converts into, the
/// benchmark's ceiling, which times both ways (`ingest`) and keeps the faster. `ingest`
/// None: fjall 2 ingests (inserts into 5,000 partitions took 1.9x as long), fjall 3
/// inserts (its ingestions, a table file and a new version each, took 1.2-1.8x the CPU
/// for 500 and 1,500 keyspaces, 0.8x for 5,000). `reopen_every` (fjall 3): see `create3`.
#[pyfunction]
#[pyo3(signature = (path, major, n, ingest=None, reopen_every=0))]
pub fn fjall_create_tables(
    py: Python<'_>,
    path: PathBuf,
    major: u8,
    n: u64,
    ingest: Option<bool>,
    reopen_every: u64,
) -> PyResult<()> {
    if path.exists() {
        return Err(NErr::refused(format!("{}: already exists", path.display())).into());
    }
    let ingest = ingest.unwrap_or(major == 2);
    detach(py, || match major {
        3 => create3(&path, n, ingest, reopen_every),
        2 => create2(&path, n, ingest),
        v => Err(NErr::other(format!(
            "fjall format {v} is not supported (2 and 3 are)"
        ))),
    })?;
    Ok(())
}
