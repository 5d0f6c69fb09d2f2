// Writing a store: few large write transactions, compiled once per redb version
// (`include!`d by `binding!`, see `mod.rs`).

/// The raw wrapper types' spec for a described table (type names rebuilt from
/// classification and name).
pub fn spec_for(
    desc: &TableDesc,
    key_order: Option<Arc<TypeExpr>>,
    value_order: Option<Arc<TypeExpr>>,
) -> Result<RawSpec, NErr> {
    Ok(RawSpec {
        key: make_type_name(&desc.key.class, &desc.key.name)?,
        key_width: desc.key.width,
        value: make_type_name(&desc.value.class, &desc.value.name)?,
        value_width: desc.value.width,
        key_order,
        value_order,
    })
}

/// A store being written: few large write transactions, non-durable between
/// checkpoints, each batch committed together with its metadata.
pub struct Writer {
    db: Option<redb::Database>,
    since_durable: u32,
}

/// Every this many batches a commit is made durable (the others are `Durability::None`).
const DURABLE_EVERY: u32 = 16;

impl Writer {
    fn over(db: redb::Database) -> Self {
        Writer {
            db: Some(db),
            since_durable: 0,
        }
    }

    pub fn create(path: &Path) -> Result<Self, NErr> {
        Ok(Writer::over(create_db(path)?))
    }

    pub fn open(path: &Path) -> Result<Self, NErr> {
        Ok(Writer::over(open_db(path)?))
    }

    fn db(&self) -> Result<&redb::Database, NErr> {
        self.db
            .as_ref()
            .ok_or_else(|| NErr::other("the writer is closed"))
    }

    /// A read transaction of what has been committed so far (in-place upgrades).
    pub fn begin_read(&self) -> Result<RT<'_>, NErr> {
        self.db()?.begin_read().map_err(err)
    }

    #[allow(mismatched_lifetime_syntaxes)] // redb 1.x transactions borrow the database, later ones do not
    fn begin(&mut self, force_durable: bool) -> Result<redb::WriteTransaction, NErr> {
        self.since_durable += 1;
        let durable = force_durable || self.since_durable >= DURABLE_EVERY;
        if durable {
            self.since_durable = 0;
        }
        let mut txn = self.db()?.begin_write().map_err(err)?;
        set_durable(&mut txn, durable)?;
        Ok(txn)
    }

    fn put_meta(
        txn: &redb::WriteTransaction,
        meta: &[(String, Option<Vec<u8>>)],
    ) -> Result<(), NErr> {
        if meta.is_empty() {
            return Ok(());
        }
        let def: TableDefinition<&str, &[u8]> = TableDefinition::new(META_TABLE);
        let mut t = txn.open_table(def).map_err(err)?;
        for (k, v) in meta {
            match v {
                Some(v) => {
                    t.insert(k.as_str(), v.as_slice()).map_err(err)?;
                }
                None => {
                    t.remove(k.as_str()).map_err(err)?;
                }
            }
        }
        Ok(())
    }

    /// Create a plain, versioned or typed table (typed: `desc` carries the stored types).
    pub fn create_table(&mut self, desc: &TableDesc, kind: TableKind) -> Result<(), NErr> {
        let txn = self.begin(false)?;
        match kind {
            TableKind::Plain => {
                txn.open_table(TableDefinition::<&[u8], &[u8]>::new(&desc.name))
                    .map_err(err)?;
            }
            TableKind::Versioned => {
                txn.open_table(TableDefinition::<&[u8], (u64, &[u8])>::new(&desc.name))
                    .map_err(err)?;
            }
            TableKind::Typed => {
                set_spec(spec_for(desc, None, None)?);
                if desc.multimap {
                    txn.open_multimap_table(MultimapTableDefinition::<RawKey, RawValue>::new(
                        &desc.name,
                    ))
                    .map_err(err)?;
                } else {
                    txn.open_table(TableDefinition::<RawKey, RawValue>::new(&desc.name))
                        .map_err(err)?;
                }
            }
        }
        txn.commit().map_err(err)
    }

    /// Insert a batch of plain or versioned records and the metadata updates, in one commit:
    /// appended at the table's end through redb's own bulk path where the version has one
    /// and the batch allows it (`append_plain`), else record by record.
    pub fn write_plain(
        &mut self,
        name: &str,
        versioned: bool,
        recs: &[(&[u8], &[u8], u64)],
        meta: &[(String, Option<Vec<u8>>)],
    ) -> Result<(), NErr> {
        let txn = self.begin(false)?;
        {
            if versioned {
                let mut t = txn
                    .open_table(TableDefinition::<&[u8], (u64, &[u8])>::new(name))
                    .map_err(err)?;
                if !append_versioned(&mut t, recs)? {
                    for (k, v, ver) in recs {
                        t.insert(*k, (*ver, *v)).map_err(err)?;
                    }
                }
            } else {
                let mut t = txn
                    .open_table(TableDefinition::<&[u8], &[u8]>::new(name))
                    .map_err(err)?;
                if !append_plain(&mut t, recs)? {
                    for (k, v, _) in recs {
                        t.insert(*k, *v).map_err(err)?;
                    }
                }
            }
            Self::put_meta(&txn, meta)?;
        }
        txn.commit().map_err(err)
    }

    /// Insert stored (already redb-encoded) pairs into a typed table, with metadata, in one commit.
    pub fn write_raw(
        &mut self,
        desc: &TableDesc,
        key_order: Option<Arc<TypeExpr>>,
        value_order: Option<Arc<TypeExpr>>,
        pairs: &[(Vec<u8>, Vec<u8>)],
        meta: &[(String, Option<Vec<u8>>)],
    ) -> Result<(), NErr> {
        let txn = self.begin(false)?;
        set_spec(spec_for(desc, key_order, value_order)?);
        {
            if desc.multimap {
                let mut t = txn
                    .open_multimap_table(MultimapTableDefinition::<RawKey, RawValue>::new(
                        &desc.name,
                    ))
                    .map_err(err)?;
                for (k, v) in pairs {
                    t.insert(k.as_slice(), v.as_slice()).map_err(err)?;
                }
            } else {
                let mut t = txn
                    .open_table(TableDefinition::<RawKey, RawValue>::new(&desc.name))
                    .map_err(err)?;
                for (k, v) in pairs {
                    t.insert(k.as_slice(), v.as_slice()).map_err(err)?;
                }
            }
            Self::put_meta(&txn, meta)?;
        }
        txn.commit().map_err(err)
    }

    pub fn put_metadata(&mut self, meta: &[(String, Option<Vec<u8>>)]) -> Result<(), NErr> {
        let txn = self.begin(false)?;
        Self::put_meta(&txn, meta)?;
        txn.commit().map_err(err)
    }

    /// A durable commit. No `compact()`: it holds every page of the file in memory (up
    /// to a million, with their paths) and walks the whole tree on each pass, so its
    /// memory grows with the store and its time faster than it (SQLite -> redb, 4M
    /// records: +47 MiB anonymous memory and a fifth of the convert's time). Without it the
    /// file's length is up to ~1.6x its pages, but the gaps were never written: sparse
    /// on disk, and reused by the app's next writes.
    pub fn finish(&mut self) -> Result<(), NErr> {
        let txn = self.begin(true)?;
        txn.commit().map_err(err)
    }

    /// Drop a table (plain or multimap; nothing if it does not exist) with metadata updates, in one commit.
    pub fn drop_table(
        &mut self,
        name: &str,
        meta: &[(String, Option<Vec<u8>>)],
    ) -> Result<(), NErr> {
        let txn = self.begin(false)?;
        match txn.delete_table(TableDefinition::<&[u8], &[u8]>::new(name)) {
            Ok(_) => {}
            Err(redb::TableError::TableIsMultimap(_)) => {
                txn.delete_multimap_table(MultimapTableDefinition::<&[u8], &[u8]>::new(name))
                    .map_err(err)?;
            }
            Err(e) => return Err(err(e)),
        }
        Self::put_meta(&txn, meta)?;
        txn.commit().map_err(err)
    }

    /// Make every commit so far durable.
    pub fn sync(&mut self) -> Result<(), NErr> {
        let txn = self.begin(true)?;
        txn.commit().map_err(err)
    }
}
