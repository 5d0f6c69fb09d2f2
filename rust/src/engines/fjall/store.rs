//! What both fjall majors offer the bindings: one `Store` per open database.
use std::ops::Deref;

use pyo3::pybacked::PyBackedBytes;

use super::errors::NErr;
use crate::batch::{Limits, Window};

/// Bytes of a key or value, wherever they already are: a Python `bytes` (a batch being
/// written), a buffer built here (a versioned value) or fjall's own slice (a record
/// read). A huge value is then copied only where fjall or Python takes it, not into a
/// `Vec` on the way (a 200 MB value cost 3-4x its size in memory).
pub enum Bytes {
    Owned(Vec<u8>),
    Python(PyBackedBytes),
    Fjall3(fjall::Slice),
    Fjall2(fjall2::Slice),
}

impl Deref for Bytes {
    type Target = [u8];

    fn deref(&self) -> &[u8] {
        match self {
            Bytes::Owned(v) => v,
            Bytes::Python(b) => b,
            Bytes::Fjall3(s) => s,
            Bytes::Fjall2(s) => s,
        }
    }
}

/// A stored pair: the key, and the value as stored (a versioned table's carries its
/// 8-byte big-endian version first).
pub type Pair = (Bytes, Bytes);
/// A metadata update: key, and the new value (None deletes).
pub type MetaUpdate = (String, Option<Vec<u8>>);

/// Records for one keyspace, stored by [`Store::write`].
pub struct Records<'a> {
    /// The keyspace (it must exist).
    pub name: &'a str,
    /// The pairs to store, keys ascending.
    pub pairs: Vec<Pair>,
    /// Whether to ingest them (the keyspace was created by this writer, so they come
    /// ascending into an empty keyspace) rather than put them in a write batch.
    pub ingest: bool,
}

/// The longest key fjall stores (both majors; longer ones make it panic).
pub const MAX_KEY: usize = 65_535;
/// The metadata keyspace (partition) of the layout.
pub const META: &str = "__statemigrate__";

/// One open fjall database, read at a pinned snapshot (a reader) or live (a writer).
pub trait Store: Send {
    /// Every keyspace (partition) name, the metadata's included.
    fn names(&self) -> Vec<String>;
    /// Whether keyspace `name` exists (never creates it).
    fn exists(&self, name: &str) -> bool;
    /// One batch of the stored pairs of `name`: those of window `w`.
    fn scan(&mut self, name: &str, w: Window<'_>) -> Result<Vec<Pair>, NErr>;
    /// Create an empty keyspace (it does not exist).
    fn create(&mut self, name: &str) -> Result<(), NErr>;
    /// Delete keyspace `name` and its records (nothing when it does not exist). The
    /// deletion survives a kill of the process once this returns; a kill during it
    /// leaves the keyspace whole or gone.
    fn delete(&mut self, name: &str) -> Result<(), NErr>;
    /// Store `records`, if any (ingested when `records.ingest`, else in one write batch
    /// holding the metadata updates too), and `meta`; both survive a kill of the process.
    fn write(&mut self, records: Option<Records<'_>>, meta: Vec<MetaUpdate>) -> Result<(), NErr>;
    /// Make every write durable (fsync), with every keyspace's memtable flushed to
    /// tables: the journal then holds nothing a reader needs, so a store whose journal
    /// is damaged or cut later loses nothing silently (fjall takes a cut journal for
    /// its end).
    fn persist(&mut self) -> Result<(), NErr>;
    /// fjall's approximate record count of `name`.
    fn approximate_len(&mut self, name: &str) -> Result<u64, NErr>;
    /// Bytes on disk of `name`, or of the whole database.
    fn disk_space(&mut self, name: Option<&str>) -> Result<u64, NErr>;
}

/// Take pairs from `it` into a bounded batch (see [`Store::scan`]).
pub fn take<E>(it: impl Iterator<Item = Result<Pair, E>>, limits: Limits) -> Result<Vec<Pair>, NErr>
where
    NErr: From<E>,
{
    let mut out = Vec::new();
    let mut nbytes = 0usize;
    for item in it {
        let (k, v) = item?;
        nbytes += k.len() + v.len();
        out.push((k, v));
        if limits.reached(out.len(), nbytes) {
            break;
        }
    }
    Ok(out)
}

pub fn no_keyspace(name: &str) -> NErr {
    NErr::other(format!("no keyspace {name:?}"))
}

/// Wait until `pending` reports no sealed memtable left (the flush workers wrote them
/// to tables); a flush that fails (a full disk) leaves them, so the wait is bounded.
pub fn wait_flushed(mut pending: impl FnMut() -> usize) -> Result<(), NErr> {
    wait_until("flushing the memtables to tables did not finish", || {
        pending() == 0
    })
}

/// Wait until `done` holds, for 60 s at most (then the error says `what`).
pub fn wait_until(what: &str, done: impl FnMut() -> bool) -> Result<(), NErr> {
    wait_within(what, 60, done)
}

/// Wait until `done` holds, for `secs` at most (then the error says `what`).
pub fn wait_within(what: &str, secs: u64, mut done: impl FnMut() -> bool) -> Result<(), NErr> {
    let start = std::time::Instant::now();
    while !done() {
        if start.elapsed() > std::time::Duration::from_secs(secs) {
            return Err(NErr::other(format!("{what} within {secs} s")));
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
    Ok(())
}
