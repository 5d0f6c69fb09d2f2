//! fjall 2.x (on-disk format 2): one partition per table; names are checked by the
//! caller against fjall 2's character set (`[A-Za-z0-9_.#$-]`, see `valid_name`).
use std::collections::HashMap;
use std::path::{Path, PathBuf};

use fjall2::{
    AbstractTree, Config, Instant, Keyspace, PartitionCreateOptions, PartitionHandle, PersistMode,
};

use super::errors::NErr;
use super::store::{
    no_keyspace, take, wait_flushed, wait_until, Bytes, MetaUpdate, Pair, Records, Store, META,
};
use crate::batch::Window;

const VALID: &str = "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-.#$";

/// A name fjall 2 accepts as a partition name (it panics on others), and not a path
/// step (`.`, `..`): partitions are directories named as they are.
pub fn valid_name(s: &str) -> bool {
    !s.is_empty() && s.len() <= 255 && s != "." && s != ".." && s.chars().all(|c| VALID.contains(c))
}

pub struct Store2 {
    /// Always Some, except while the keyspace is reopened (see `delete`).
    ks: Option<Keyspace>,
    path: PathBuf,
    /// The reader's one instant (None: a writer, which reads live).
    instant: Option<Instant>,
    handles: HashMap<String, PartitionHandle>,
}

impl Store2 {
    pub fn open(path: &Path, pin: bool) -> Result<Self, NErr> {
        let ks = Config::new(path).open()?;
        let instant = pin.then(|| ks.instant());
        Ok(Store2 {
            ks: Some(ks),
            path: path.to_path_buf(),
            instant,
            handles: HashMap::new(),
        })
    }

    fn ks(&self) -> &Keyspace {
        self.ks.as_ref().expect("the keyspace is open")
    }

    fn handle(&mut self, name: &str, create: bool) -> Result<PartitionHandle, NErr> {
        if let Some(h) = self.handles.get(name) {
            return Ok(h.clone());
        }
        if !valid_name(name) {
            return Err(NErr::refused(format!(
                "{name:?} is not a fjall 2 partition name"
            )));
        }
        if !create && !self.ks().partition_exists(name) {
            return Err(no_keyspace(name));
        }
        let h = self
            .ks()
            .open_partition(name, PartitionCreateOptions::default())?;
        self.handles.insert(name.to_string(), h.clone());
        Ok(h)
    }
}

impl Store for Store2 {
    fn names(&self) -> Vec<String> {
        self.ks()
            .list_partitions()
            .iter()
            .map(|n| n.to_string())
            .collect()
    }

    fn exists(&self, name: &str) -> bool {
        valid_name(name) && self.ks().partition_exists(name)
    }

    fn scan(&mut self, name: &str, w: Window<'_>) -> Result<Vec<Pair>, NErr> {
        let p = self.handle(name, false)?;
        let range = w.range();
        // fjall 2 iterators are not Send: each lives inside this one call.
        match self.instant {
            Some(at) => {
                let it = p.snapshot_at(at).range::<&[u8], _>(range);
                take(
                    it.map(|r| {
                        r.map_err(fjall2::Error::from)
                            .map(|(k, v)| (Bytes::Fjall2(k), Bytes::Fjall2(v)))
                    }),
                    w.limits,
                )
            }
            None => take(
                p.range::<&[u8], _>(range)
                    .map(|r| r.map(|(k, v)| (Bytes::Fjall2(k), Bytes::Fjall2(v)))),
                w.limits,
            ),
        }
    }

    fn create(&mut self, name: &str) -> Result<(), NErr> {
        self.handle(name, true).map(|_| ())
    }

    fn delete(&mut self, name: &str) -> Result<(), NErr> {
        if !self.exists(name) {
            self.handles.remove(name);
            return Ok(());
        }
        // fjall 2's journals name partitions, not ids: a write of this partition still in
        // a journal would be replayed, after a kill, into a later partition of the same
        // name (an upgrade drops `events`, then copies the rebuilt table into `events`).
        // So every memtable goes to tables first and every sealed journal is evicted.
        self.persist()?;
        wait_until(
            "the journals holding flushed writes were not removed",
            || self.ks().journal_count() <= 1,
        )?;
        let p = self.handle(name, false)?;
        self.handles.remove(name);
        // Marks the partition deleted (an fsynced `.deleted` file: recovery removes it);
        // its directory goes when the last handle of it is dropped.
        self.ks().delete_partition(p)?;
        if self.path.join("partitions").join(name).exists() {
            // Something still holds it: a partition of the same name could not be
            // created until it goes, so reopen the database (recovery removes it).
            self.handles.clear();
            self.ks.take();
            self.ks = Some(Config::new(&self.path).open()?);
        }
        Ok(())
    }

    fn write(&mut self, records: Option<Records<'_>>, meta: Vec<MetaUpdate>) -> Result<(), NErr> {
        let mut batch = self.ks().batch().durability(Some(PersistMode::Buffer));
        if let Some(r) = records {
            let p = self.handle(r.name, false)?;
            // `ingest` only into an empty partition (it panics otherwise).
            if r.ingest && !r.pairs.is_empty() && p.is_empty()? {
                p.ingest(r.pairs.iter().map(|(k, v)| (&**k, &**v)))?;
            } else {
                for (k, v) in &r.pairs {
                    batch.insert(&p, &**k, &**v);
                }
            }
        }
        commit_with_meta!(self, batch, meta)
    }

    fn persist(&mut self) -> Result<(), NErr> {
        let mut handles = Vec::new();
        for n in self.names() {
            let h = self.handle(&n, false)?;
            h.rotate_memtable()?;
            handles.push(h);
        }
        wait_flushed(|| handles.iter().map(|h| h.tree.sealed_memtable_count()).sum())?;
        Ok(self.ks().persist(PersistMode::SyncAll)?)
    }

    fn approximate_len(&mut self, name: &str) -> Result<u64, NErr> {
        Ok(self.handle(name, false)?.approximate_len() as u64)
    }

    fn disk_space(&mut self, name: Option<&str>) -> Result<u64, NErr> {
        match name {
            Some(n) => Ok(self.handle(n, false)?.disk_space()),
            None => Ok(self.ks().disk_space()),
        }
    }
}
