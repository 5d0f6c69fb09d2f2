//! fjall 3.x (on-disk format 3): one keyspace per table.
//!
//! fjall 3 records each new keyspace in its own meta keyspace by writing a table and
//! compacting that keyspace (`meta_keyspace.rs`, fjall 3.1), with a version GC
//! watermark of 0: every table the compaction replaced stays on disk until the
//! database is opened again, whose recovery removes them. Those tables grow with the
//! number of keyspaces, so creating N keyspaces in one session left O(N²) bytes (a
//! 32 MB store of 1,500 tables peaked at 658 MB). A writer reopens the database after
//! every `REOPEN_EVERY` keyspaces it creates: the dead tables then stay within a
//! small multiple of the store (see `REOPEN_EVERY`).
use std::collections::{HashMap, HashSet};
use std::path::{Path, PathBuf};

use fjall::{Database, Keyspace, KeyspaceCreateOptions, PersistMode, Readable, Snapshot};

use super::errors::NErr;
use super::store::{
    no_keyspace, take, wait_flushed, Bytes, MetaUpdate, Pair, Records, Store, META,
};
use crate::batch::Window;

/// Keyspaces a writer creates between two openings of the database. Each creation
/// leaves dead meta tables of about 1.1 KB per keyspace in the store, where a
/// one-record table takes about 14 KB of blocks: 32 creations leave about 1.2x the live
/// store at most, while a reopening reads every keyspace's version (0.13 ms each).
const REOPEN_EVERY: usize = 32;

pub struct Store3 {
    /// Always Some, except while the database is reopened (see `create`).
    db: Option<Database>,
    path: PathBuf,
    /// Keyspaces created since the database was opened.
    created: usize,
    /// The reader's one snapshot (None: a writer, which reads live).
    snap: Option<Snapshot>,
    handles: HashMap<String, Keyspace>,
    names: HashSet<String>,
}

impl Store3 {
    pub fn open(path: &Path, pin: bool) -> Result<Self, NErr> {
        let db = Database::builder(path).open()?;
        let names = db
            .list_keyspace_names()
            .iter()
            .map(|n| n.to_string())
            .collect();
        let snap = pin.then(|| db.snapshot());
        Ok(Store3 {
            db: Some(db),
            path: path.to_path_buf(),
            created: 0,
            snap,
            handles: HashMap::new(),
            names,
        })
    }

    fn db(&self) -> &Database {
        self.db.as_ref().expect("the database is open")
    }

    fn handle(&mut self, name: &str, create: bool) -> Result<Keyspace, NErr> {
        if let Some(h) = self.handles.get(name) {
            return Ok(h.clone());
        }
        // `keyspace` creates a missing keyspace: only ever called for one that exists,
        // or to create one on purpose.
        if !create && !self.db().keyspace_exists(name) {
            return Err(no_keyspace(name));
        }
        let h = self.db().keyspace(name, KeyspaceCreateOptions::default)?;
        self.names.insert(name.to_string());
        self.handles.insert(name.to_string(), h.clone());
        Ok(h)
    }
}

fn pair(g: fjall::Guard) -> Result<Pair, fjall::Error> {
    let (k, v) = g.into_inner()?;
    Ok((Bytes::Fjall3(k), Bytes::Fjall3(v)))
}

impl Store for Store3 {
    fn names(&self) -> Vec<String> {
        self.names.iter().cloned().collect()
    }

    fn exists(&self, name: &str) -> bool {
        self.names.contains(name)
    }

    fn scan(&mut self, name: &str, w: Window<'_>) -> Result<Vec<Pair>, NErr> {
        if !self.exists(name) {
            return Err(no_keyspace(name));
        }
        let ks = self.handle(name, false)?;
        let range = w.range();
        let it = match &self.snap {
            Some(s) => s.range::<&[u8], _>(&ks, range),
            None => ks.range::<&[u8], _>(range),
        };
        take(it.map(pair), w.limits)
    }

    fn create(&mut self, name: &str) -> Result<(), NErr> {
        self.handle(name, true)?;
        self.created += 1;
        if self.snap.is_none() && self.created >= REOPEN_EVERY {
            // Dropping the database writes its journal out; the writes in it are
            // replayed by the recovery, which also removes the dead meta tables.
            self.handles.clear();
            self.db.take();
            self.db = Some(Database::builder(&self.path).open()?);
            self.created = 0;
        }
        Ok(())
    }

    fn delete(&mut self, name: &str) -> Result<(), NErr> {
        // A new keyspace of the same name gets a new id: journal entries of this one are
        // never replayed into it.
        let handle = self.handles.remove(name);
        self.names.remove(name);
        if !self.db().keyspace_exists(name) {
            return Ok(());
        }
        let h = match handle {
            Some(h) => h,
            None => self.db().keyspace(name, KeyspaceCreateOptions::default)?,
        };
        Ok(self.db().delete_keyspace(h)?)
    }

    fn write(&mut self, records: Option<Records<'_>>, meta: Vec<MetaUpdate>) -> Result<(), NErr> {
        let mut batch = self.db().batch().durability(Some(PersistMode::Buffer));
        if let Some(r) = records {
            let ks = self.handle(r.name, false)?;
            if r.ingest && !r.pairs.is_empty() {
                let mut ing = ks.start_ingestion()?;
                for (k, v) in &r.pairs {
                    ing.write(&**k, &**v)?;
                }
                ing.finish()?;
            } else {
                for (k, v) in &r.pairs {
                    batch.insert(&ks, &**k, &**v);
                }
            }
        }
        commit_with_meta!(self, batch, meta)
    }

    fn persist(&mut self) -> Result<(), NErr> {
        let names: Vec<String> = self
            .db()
            .list_keyspace_names()
            .iter()
            .map(|n| n.to_string())
            .collect();
        let mut handles = Vec::new();
        for n in names {
            let h = self.handle(&n, false)?;
            h.rotate_memtable()?;
            handles.push(h);
        }
        wait_flushed(|| handles.iter().map(|h| h.sealed_memtable_count()).sum())?;
        Ok(self.db().persist(PersistMode::SyncAll)?)
    }

    fn approximate_len(&mut self, name: &str) -> Result<u64, NErr> {
        Ok(self.handle(name, false)?.approximate_len() as u64)
    }

    fn disk_space(&mut self, name: Option<&str>) -> Result<u64, NErr> {
        match name {
            Some(n) => Ok(self.handle(n, false)?.disk_space()),
            None => Ok(self.db().disk_space()?),
        }
    }
}
