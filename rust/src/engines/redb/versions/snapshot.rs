// Reading a read transaction (a reader's snapshot, or one a writer begins for a read):
// its tables, its metadata, batches of a table. Compiled once per redb version
// (`include!`d by `binding!`, see `mod.rs`).
use std::ops::Bound;
use std::path::Path;

#[allow(unused_imports)] // redb 4.x's multimap tables have `range` of their own
use redb::ReadableMultimapTable;
use redb::{MultimapTableHandle, ReadableTable, TableHandle};

/// The raw types' spec for reading a table: its stored type names exactly as redb
/// reports them (a name rebuilt from the description could differ in classification,
/// e.g. redb 3.x's `Internal2`, which redb 4.x can no longer make).
fn exact_spec(
    txn: &RT<'_>,
    desc: &TableDesc,
    key_order: Option<Arc<TypeExpr>>,
    value_order: Option<Arc<TypeExpr>>,
) -> Result<RawSpec, NErr> {
    let (k, kw, v, vw) = probe_table(txn, &desc.name, desc.multimap)?;
    Ok(RawSpec {
        key: k,
        key_width: kw,
        value: v,
        value_width: vw,
        key_order,
        value_order,
    })
}

/// Visit the stored pairs of a typed table in redb's order from `start` (opened with
/// the types `SPEC` holds) until `f` asks to stop by returning true; a multimap stops
/// only after the whole key's values (a resume inside a key's values is done by the
/// caller, which skips by encoding).
fn visit_raw(
    txn: &RT<'_>,
    desc: &TableDesc,
    start: Bound<&[u8]>,
    mut f: impl FnMut(&[u8], &[u8]) -> Result<bool, NErr>,
) -> Result<(), NErr> {
    let range = (start, Bound::Unbounded);
    if desc.multimap {
        let def = MultimapTableDefinition::<RawKey, RawValue>::new(&desc.name);
        let table = txn.open_multimap_table(def).map_err(err)?;
        for item in table.range::<&[u8]>(range).map_err(err)? {
            let (k, vals) = item.map_err(err)?;
            let mut stop = false;
            for v in vals {
                stop |= f(k.value(), v.map_err(err)?.value())?;
            }
            if stop {
                break;
            }
        }
    } else {
        let def = TableDefinition::<RawKey, RawValue>::new(&desc.name);
        let table = txn.open_table(def).map_err(err)?;
        for item in table.range::<&[u8]>(range).map_err(err)? {
            let (k, v) = item.map_err(err)?;
            if f(k.value(), v.value())? {
                break;
            }
        }
    }
    Ok(())
}

impl Snapshot for RT<'_> {
    fn tables(&self) -> Result<Vec<TableDesc>, NErr> {
        let mut out = Vec::new();
        for multimap in [false, true] {
            let names: Vec<String> = if multimap {
                let tables = self.list_multimap_tables().map_err(err)?;
                tables.map(|h| h.name().to_string()).collect()
            } else {
                let tables = self.list_tables().map_err(err)?;
                tables.map(|h| h.name().to_string()).collect()
            };
            for name in names {
                if !multimap && name == META_TABLE {
                    continue;
                }
                let (k, kw, v, vw) = probe_table(self, &name, multimap)?;
                out.push(TableDesc {
                    name,
                    multimap,
                    key: describe(&k, kw),
                    value: describe(&v, vw),
                    exact: false,
                    bytewise: Vec::new(),
                });
            }
        }
        Ok(out)
    }

    fn metadata(&self) -> Result<Vec<(String, Vec<u8>)>, NErr> {
        let def: TableDefinition<&str, &[u8]> = TableDefinition::new(META_TABLE);
        let table = match self.open_table(def) {
            Ok(t) => t,
            Err(redb::TableError::TableDoesNotExist(_)) => return Ok(Vec::new()),
            Err(e) => return Err(err(e)),
        };
        let mut out = Vec::new();
        for item in table.iter().map_err(err)? {
            let (k, v) = item.map_err(err)?;
            out.push((k.value().to_string(), v.value().to_vec()));
        }
        Ok(out)
    }

    fn read_plain(&self, name: &str, versioned: bool, w: Window<'_>) -> Result<Vec<OwnedRec>, NErr> {
        let mut out = Vec::new();
        let mut size = 0usize;
        if versioned {
            let def: TableDefinition<&[u8], (u64, &[u8])> = TableDefinition::new(name);
            let table = self.open_table(def).map_err(err)?;
            for item in table.range::<&[u8]>(w.range()).map_err(err)? {
                let (k, v) = item.map_err(err)?;
                let (ver, val) = v.value();
                size += k.value().len() + val.len();
                out.push((k.value().to_vec(), val.to_vec(), ver));
                if w.limits.reached(out.len(), size) {
                    break;
                }
            }
        } else {
            let def: TableDefinition<&[u8], &[u8]> = TableDefinition::new(name);
            let table = self.open_table(def).map_err(err)?;
            for item in table.range::<&[u8]>(w.range()).map_err(err)? {
                let (k, v) = item.map_err(err)?;
                size += k.value().len() + v.value().len();
                out.push((k.value().to_vec(), v.value().to_vec(), 0));
                if w.limits.reached(out.len(), size) {
                    break;
                }
            }
        }
        Ok(out)
    }

    fn each_plain(&self, name: &str, versioned: bool, f: &mut RecordSink<'_>) -> Result<(), NErr> {
        if versioned {
            let def: TableDefinition<&[u8], (u64, &[u8])> = TableDefinition::new(name);
            let table = self.open_table(def).map_err(err)?;
            for item in table.iter().map_err(err)? {
                let (k, v) = item.map_err(err)?;
                let (ver, val) = v.value();
                f(k.value(), val, ver)?;
            }
        } else {
            let def: TableDefinition<&[u8], &[u8]> = TableDefinition::new(name);
            let table = self.open_table(def).map_err(err)?;
            for item in table.iter().map_err(err)? {
                let (k, v) = item.map_err(err)?;
                f(k.value(), v.value(), 0)?;
            }
        }
        Ok(())
    }

    fn read_raw(&self, desc: &TableDesc, orders: Orders, start: Bound<&[u8]>, limits: Limits) -> Result<Pairs, NErr> {
        set_spec(exact_spec(self, desc, orders.0, orders.1)?);
        let mut out = Vec::new();
        let mut size = 0usize;
        visit_raw(self, desc, start, |k, v| {
            size += k.len() + v.len();
            out.push((k.to_vec(), v.to_vec()));
            Ok(limits.reached(out.len(), size))
        })?;
        Ok(out)
    }

    /// Every stored pair in one pass (for custom-order tables, whose keys cannot be
    /// sought by bytes).
    fn scan_raw(&self, desc: &TableDesc, f: &mut PairSink<'_>) -> Result<(), NErr> {
        set_spec(exact_spec(self, desc, None, None)?);
        visit_raw(self, desc, Bound::Unbounded, |k, v| f(k, v).map(|()| false))
    }

    /// redb's length of the table (opened with its stored types), without reading it.
    fn count(&self, desc: &TableDesc) -> Result<u64, NErr> {
        set_spec(exact_spec(self, desc, None, None)?);
        if desc.multimap {
            let def = MultimapTableDefinition::<RawKey, RawValue>::new(&desc.name);
            self.open_multimap_table(def).map_err(err)?.len().map_err(err)
        } else {
            let def = TableDefinition::<RawKey, RawValue>::new(&desc.name);
            self.open_table(def).map_err(err)?.len().map_err(err)
        }
    }
}

/// A source opened at one snapshot (one read transaction) that is never modified.
pub struct Reader {
    // Declared before `_db` so that the transaction is dropped first.
    txn: RT<'static>,
    _db: SourceDb,
}

impl Reader {
    pub fn open(path: &Path) -> Result<Self, NErr> {
        let (db, txn) = open_source(path)?;
        Ok(Reader { txn, _db: db })
    }

    /// The snapshot.
    pub fn txn(&self) -> &RT<'static> {
        &self.txn
    }
}
