// Shared reader and writer code, compiled once per redb major version: each
// `vN.rs` module names its crate `redb`, provides the version's shims (opening a
// source, durability, the raw wrapper types' trait impls) and `include!`s this file.
//
// Typed tables are read through `RawKey`/`RawValue`: wrapper types whose
// `type_name()`/`fixed_width()` return the stored type read from a thread-local,
// set just before a table is opened (the stored names come from redb's own
// `TableTypeMismatch`, so even the classification byte matches). We chose this
// over a second reader of redb's page format because redb itself keeps doing the
// page parsing, checksums and repair for all three formats, and one generic code
// path over a parsed type name covers every key/value type combination without
// monomorphising a reader per type.
use std::cell::RefCell;
use std::ops::Bound;
use std::path::Path;
use std::sync::Arc;

use redb::{
    MultimapTableDefinition, MultimapTableHandle, ReadableMultimapTable, ReadableTable,
    TableDefinition, TableHandle,
};

use super::types::TypeExpr;
use super::{NErr, OwnedRec, PairSink, Pairs, TableDesc, TypeDesc};

pub const META_TABLE: &str = "__statemigrate__";
const PROBE: &str = "statemigrate::probe";

/// The stored types the raw wrapper types impersonate on this thread.
pub struct RawSpec {
    pub key: redb::TypeName,
    pub key_width: Option<usize>,
    pub value: redb::TypeName,
    pub value_width: Option<usize>,
    pub key_order: Option<Arc<TypeExpr>>,
    pub value_order: Option<Arc<TypeExpr>>,
}

thread_local! {
    pub static SPEC: RefCell<RawSpec> = RefCell::new(RawSpec {
        key: redb::TypeName::new(PROBE),
        key_width: None,
        value: redb::TypeName::new(PROBE),
        value_width: None,
        key_order: None,
        value_order: None,
    });
}

pub fn set_spec(spec: RawSpec) {
    SPEC.with(|s| *s.borrow_mut() = spec);
}

fn probe_spec() -> RawSpec {
    RawSpec {
        key: redb::TypeName::new(PROBE),
        key_width: None,
        value: redb::TypeName::new(PROBE),
        value_width: None,
        key_order: None,
        value_order: None,
    }
}

/// Compare two stored values of a type through its order-preserving encoding,
/// which is how redb orders them; bytewise when the type is custom or unparsed.
pub fn compare_with(order: &Option<Arc<TypeExpr>>, a: &[u8], b: &[u8]) -> std::cmp::Ordering {
    match order {
        Some(t) => match (t.encode(a), t.encode(b)) {
            (Ok(x), Ok(y)) => x.cmp(&y),
            _ => a.cmp(b),
        },
        None => a.cmp(b),
    }
}

/// (classification, name) of a redb type name.
pub fn type_parts(t: &redb::TypeName) -> (String, String) {
    super::typename::parts(t)
}

fn describe(t: &redb::TypeName, width: Option<usize>) -> TypeDesc {
    let (class, name) = type_parts(t);
    TypeDesc {
        name,
        class,
        width,
        legacy: None,
    }
}

/// Classify any redb error into the engine's error kinds.
pub fn err<E: Into<redb::Error>>(e: E) -> NErr {
    let e: redb::Error = e.into();
    match e {
        redb::Error::DatabaseAlreadyOpen => {
            NErr::Busy("the database is open in another process".into())
        }
        redb::Error::UpgradeRequired(v) => NErr::Unsupported(v),
        redb::Error::Corrupted(s) => NErr::Corrupt(s),
        redb::Error::Io(io) => {
            if io.raw_os_error() == Some(libc::EWOULDBLOCK) {
                NErr::Busy("the database is open in another process".into())
            } else if io.kind() == std::io::ErrorKind::UnexpectedEof {
                NErr::Corrupt("the file is truncated".into())
            } else {
                NErr::Io(io.to_string())
            }
        }
        other => NErr::Other(other.to_string()),
    }
}

/// The stored key and value types of a table, found by opening it with the probe
/// type and reading redb's mismatch errors; `multimap` picks the table kind.
fn probe_types(
    open: &dyn Fn() -> Result<(), redb::TableError>,
) -> Result<(redb::TypeName, Option<usize>, redb::TypeName, Option<usize>), NErr> {
    set_spec(probe_spec());
    let mut found: Option<(redb::TypeName, redb::TypeName)> = None;
    let mut kw: Option<usize> = None;
    let mut vw: Option<usize> = None;
    for _ in 0..6 {
        match open() {
            Ok(()) => {
                let (k, v) =
                    found.ok_or_else(|| NErr::Other("probe type matched a stored table".into()))?;
                return Ok((k, kw, v, vw));
            }
            Err(redb::TableError::TableTypeMismatch { key, value, .. }) => {
                set_spec(RawSpec {
                    key: key.clone(),
                    key_width: kw,
                    value: value.clone(),
                    value_width: vw,
                    key_order: None,
                    value_order: None,
                });
                found = Some((key, value));
            }
            Err(redb::TableError::TypeDefinitionChanged { name, width, .. }) => {
                let (k, v) = found.clone().ok_or_else(|| {
                    NErr::Other("type definition changed before names matched".into())
                })?;
                // The key's width is checked first, so a mismatch on a name both share is the key's.
                let key_ok = SPEC.with(|s| s.borrow().key_width == width);
                if name == k && !key_ok {
                    kw = width;
                } else {
                    vw = width;
                }
                set_spec(RawSpec {
                    key: k,
                    key_width: kw,
                    value: v,
                    value_width: vw,
                    key_order: None,
                    value_order: None,
                });
            }
            Err(e) => return Err(err(e)),
        }
    }
    Err(NErr::Other(
        "could not determine the table's stored types".into(),
    ))
}

fn list_tables_in(txn: &RT<'_>) -> Result<Vec<TableDesc>, NErr> {
    let mut out = Vec::new();
    let names: Vec<String> = txn
        .list_tables()
        .map_err(err)?
        .map(|h| h.name().to_string())
        .collect();
    for name in names {
        if name == META_TABLE {
            continue;
        }
        let open = || {
            txn.open_table(TableDefinition::<RawKey, RawValue>::new(&name))
                .map(|_| ())
        };
        let (k, kw, v, vw) = probe_types(&open)?;
        out.push(TableDesc {
            name,
            multimap: false,
            key: describe(&k, kw),
            value: describe(&v, vw),
            exact: false,
            bytewise: Vec::new(),
        });
    }
    let names: Vec<String> = txn
        .list_multimap_tables()
        .map_err(err)?
        .map(|h| h.name().to_string())
        .collect();
    for name in names {
        let open = || {
            txn.open_multimap_table(MultimapTableDefinition::<RawKey, RawValue>::new(&name))
                .map(|_| ())
        };
        let (k, kw, v, vw) = probe_types(&open)?;
        out.push(TableDesc {
            name,
            multimap: true,
            key: describe(&k, kw),
            value: describe(&v, vw),
            exact: false,
            bytewise: Vec::new(),
        });
    }
    Ok(out)
}

/// The raw types' spec for reading a table: its stored type names exactly as redb
/// reports them (a name rebuilt from the description could differ in classification,
/// e.g. redb 3.x's `Internal2`, which redb 4.x can no longer make).
fn exact_spec(
    txn: &RT<'_>,
    desc: &TableDesc,
    key_order: Option<Arc<TypeExpr>>,
    value_order: Option<Arc<TypeExpr>>,
) -> Result<RawSpec, NErr> {
    let (k, kw, v, vw) = if desc.multimap {
        let open = || {
            txn.open_multimap_table(MultimapTableDefinition::<RawKey, RawValue>::new(&desc.name))
                .map(|_| ())
        };
        probe_types(&open)?
    } else {
        let open = || {
            txn.open_table(TableDefinition::<RawKey, RawValue>::new(&desc.name))
                .map(|_| ())
        };
        probe_types(&open)?
    };
    Ok(RawSpec {
        key: k,
        key_width: kw,
        value: v,
        value_width: vw,
        key_order,
        value_order,
    })
}

fn metadata_in(txn: &RT<'_>) -> Result<Vec<(String, Vec<u8>)>, NErr> {
    let def: TableDefinition<&str, &[u8]> = TableDefinition::new(META_TABLE);
    let table = match txn.open_table(def) {
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

fn bounds(after: Option<&[u8]>) -> (Bound<&[u8]>, Bound<&[u8]>) {
    match after {
        Some(a) => (Bound::Excluded(a), Bound::Unbounded),
        None => (Bound::Unbounded, Bound::Unbounded),
    }
}

/// A batch of a plain (`&[u8] -> &[u8]`) or versioned (`&[u8] -> (u64, &[u8])`) table.
fn read_plain_in(
    txn: &RT<'_>,
    name: &str,
    versioned: bool,
    after: Option<&[u8]>,
    max_records: usize,
    max_bytes: usize,
) -> Result<Vec<OwnedRec>, NErr> {
    let mut out = Vec::new();
    let mut size = 0usize;
    if versioned {
        let def: TableDefinition<&[u8], (u64, &[u8])> = TableDefinition::new(name);
        let table = txn.open_table(def).map_err(err)?;
        for item in table.range::<&[u8]>(bounds(after)).map_err(err)? {
            let (k, v) = item.map_err(err)?;
            let (ver, val) = v.value();
            size += k.value().len() + val.len();
            out.push((k.value().to_vec(), val.to_vec(), ver));
            if out.len() >= max_records || size >= max_bytes {
                break;
            }
        }
    } else {
        let def: TableDefinition<&[u8], &[u8]> = TableDefinition::new(name);
        let table = txn.open_table(def).map_err(err)?;
        for item in table.range::<&[u8]>(bounds(after)).map_err(err)? {
            let (k, v) = item.map_err(err)?;
            size += k.value().len() + v.value().len();
            out.push((k.value().to_vec(), v.value().to_vec(), 0));
            if out.len() >= max_records || size >= max_bytes {
                break;
            }
        }
    }
    Ok(out)
}

/// Raw stored pairs of a typed table, in redb's order, starting after the stored key
/// `after_raw` (already bytes of the stored type); opened with the stored types.
fn read_raw_in(
    txn: &RT<'_>,
    desc: &TableDesc,
    spec: RawSpec,
    start: Bound<&[u8]>,
    max_records: usize,
    max_bytes: usize,
) -> Result<Pairs, NErr> {
    set_spec(spec);
    let mut out = Vec::new();
    let mut size = 0usize;
    if desc.multimap {
        // A resume inside a key's values is done by the caller (it skips by encoding).
        let def = MultimapTableDefinition::<RawKey, RawValue>::new(&desc.name);
        let table = txn.open_multimap_table(def).map_err(err)?;
        for item in table
            .range::<&[u8]>((start, Bound::Unbounded))
            .map_err(err)?
        {
            let (k, vals) = item.map_err(err)?;
            let kb = k.value().to_vec();
            for v in vals {
                let v = v.map_err(err)?;
                let vb = v.value().to_vec();
                size += kb.len() + vb.len();
                out.push((kb.clone(), vb));
            }
            if out.len() >= max_records || size >= max_bytes {
                break;
            }
        }
    } else {
        let def = TableDefinition::<RawKey, RawValue>::new(&desc.name);
        let table = txn.open_table(def).map_err(err)?;
        for item in table
            .range::<&[u8]>((start, Bound::Unbounded))
            .map_err(err)?
        {
            let (k, v) = item.map_err(err)?;
            let kb = k.value().to_vec();
            let vb = v.value().to_vec();
            size += kb.len() + vb.len();
            out.push((kb, vb));
            if out.len() >= max_records || size >= max_bytes {
                break;
            }
        }
    }
    Ok(out)
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

    pub fn list_tables(&self) -> Result<Vec<TableDesc>, NErr> {
        list_tables_in(&self.txn)
    }

    pub fn metadata(&self) -> Result<Vec<(String, Vec<u8>)>, NErr> {
        metadata_in(&self.txn)
    }
}

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
    pub fn create(path: &Path) -> Result<Self, NErr> {
        Ok(Writer {
            db: Some(create_db(path)?),
            since_durable: 0,
        })
    }

    pub fn open(path: &Path) -> Result<Self, NErr> {
        Ok(Writer {
            db: Some(open_db(path)?),
            since_durable: 0,
        })
    }

    fn db(&self) -> Result<&redb::Database, NErr> {
        self.db
            .as_ref()
            .ok_or_else(|| NErr::Other("the writer is closed".into()))
    }

    pub fn list_tables(&self) -> Result<Vec<TableDesc>, NErr> {
        let txn = self.db()?.begin_read().map_err(err)?;
        list_tables_in(&txn)
    }

    pub fn metadata(&self) -> Result<Vec<(String, Vec<u8>)>, NErr> {
        let txn = self.db()?.begin_read().map_err(err)?;
        metadata_in(&txn)
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
    pub fn create_table(&mut self, desc: &TableDesc, kind: TableKindN) -> Result<(), NErr> {
        let txn = self.begin(false)?;
        match kind {
            TableKindN::Plain => {
                txn.open_table(TableDefinition::<&[u8], &[u8]>::new(&desc.name))
                    .map_err(err)?;
            }
            TableKindN::Versioned => {
                txn.open_table(TableDefinition::<&[u8], (u64, &[u8])>::new(&desc.name))
                    .map_err(err)?;
            }
            TableKindN::Typed => {
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

    /// Insert a batch of plain or versioned records and the metadata updates, in one commit.
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
                for (k, v, ver) in recs {
                    t.insert(*k, (*ver, *v)).map_err(err)?;
                }
            } else {
                let mut t = txn
                    .open_table(TableDefinition::<&[u8], &[u8]>::new(name))
                    .map_err(err)?;
                for (k, v, _) in recs {
                    t.insert(*k, *v).map_err(err)?;
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

    /// A durable commit, then compaction (which commits durably itself).
    pub fn finish(&mut self) -> Result<(), NErr> {
        let txn = self.begin(true)?;
        txn.commit().map_err(err)?;
        let db = self
            .db
            .as_mut()
            .ok_or_else(|| NErr::Other("the writer is closed".into()))?;
        while db.compact().map_err(err)? {}
        Ok(())
    }
}

/// Which table definition a writer uses.
#[derive(Clone, Copy)]
pub enum TableKindN {
    Plain,
    Versioned,
    Typed,
}

#[allow(dead_code)] // the ceiling runs on redb 4.x only
/// Insert `n` generated records into table `bench` in one durable transaction
/// and compact: redb's own fastest load, the benchmarks' ceiling.
pub fn bulk_load(path: &Path, n: u64, key_len: usize, value_len: usize) -> Result<(), NErr> {
    let mut db = create_db(path)?;
    {
        let mut txn = db.begin_write().map_err(err)?;
        set_durable(&mut txn, true)?;
        {
            let mut t = txn
                .open_table(TableDefinition::<&[u8], &[u8]>::new("bench"))
                .map_err(err)?;
            let mut key = vec![0u8; key_len.max(8)];
            let value = vec![0x5au8; value_len];
            for i in 0..n {
                let kl = key.len();
                key[kl - 8..].copy_from_slice(&i.to_be_bytes());
                t.insert(&key[..], &value[..]).map_err(err)?;
            }
        }
        txn.commit().map_err(err)?;
    }
    while db.compact().map_err(err)? {}
    Ok(())
}

#[allow(dead_code)] // the ceiling runs on redb 4.x only
/// Scan every plain table of a source, touching each key and value: the
/// benchmarks' read ceiling. Returns (records, payload bytes).
pub fn full_scan(path: &Path) -> Result<(u64, u64), NErr> {
    let reader = Reader::open(path)?;
    let mut n = 0u64;
    let mut bytes = 0u64;
    let names: Vec<String> = reader
        .txn
        .list_tables()
        .map_err(err)?
        .map(|h| h.name().to_string())
        .collect();
    for name in names {
        if name == META_TABLE {
            continue;
        }
        let table = match reader
            .txn
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

/// Every stored pair of a typed table in redb's order, in one pass (for
/// custom-order tables, whose keys cannot be sought by bytes).
fn scan_raw_in(txn: &RT<'_>, desc: &TableDesc, f: &mut PairSink<'_>) -> Result<(), NErr> {
    set_spec(exact_spec(txn, desc, None, None)?);
    if desc.multimap {
        let def = MultimapTableDefinition::<RawKey, RawValue>::new(&desc.name);
        let table = txn.open_multimap_table(def).map_err(err)?;
        for item in table.iter().map_err(err)? {
            let (k, vals) = item.map_err(err)?;
            for v in vals {
                let v = v.map_err(err)?;
                f(k.value(), v.value())?;
            }
        }
    } else {
        let def = TableDefinition::<RawKey, RawValue>::new(&desc.name);
        let table = txn.open_table(def).map_err(err)?;
        for item in table.iter().map_err(err)? {
            let (k, v) = item.map_err(err)?;
            f(k.value(), v.value())?;
        }
    }
    Ok(())
}

impl super::Snapshot for Reader {
    fn read_plain(
        &self,
        name: &str,
        versioned: bool,
        after: Option<&[u8]>,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<OwnedRec>, NErr> {
        read_plain_in(&self.txn, name, versioned, after, max_records, max_bytes)
    }

    fn read_raw(
        &self,
        desc: &TableDesc,
        key_order: Option<Arc<TypeExpr>>,
        value_order: Option<Arc<TypeExpr>>,
        start: Bound<&[u8]>,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Pairs, NErr> {
        read_raw_in(
            &self.txn,
            desc,
            exact_spec(&self.txn, desc, key_order, value_order)?,
            start,
            max_records,
            max_bytes,
        )
    }

    fn scan_raw(&self, desc: &TableDesc, f: &mut PairSink<'_>) -> Result<(), NErr> {
        scan_raw_in(&self.txn, desc, f)
    }
}

/// The writer reads what it has committed so far (in-place upgrades), each call
/// from a read transaction of its own.
impl super::Snapshot for Writer {
    fn read_plain(
        &self,
        name: &str,
        versioned: bool,
        after: Option<&[u8]>,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<OwnedRec>, NErr> {
        let txn = self.db()?.begin_read().map_err(err)?;
        read_plain_in(&txn, name, versioned, after, max_records, max_bytes)
    }

    fn read_raw(
        &self,
        desc: &TableDesc,
        key_order: Option<Arc<TypeExpr>>,
        value_order: Option<Arc<TypeExpr>>,
        start: Bound<&[u8]>,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Pairs, NErr> {
        let txn = self.db()?.begin_read().map_err(err)?;
        read_raw_in(
            &txn,
            desc,
            exact_spec(&txn, desc, key_order, value_order)?,
            start,
            max_records,
            max_bytes,
        )
    }

    fn scan_raw(&self, desc: &TableDesc, f: &mut PairSink<'_>) -> Result<(), NErr> {
        let txn = self.db()?.begin_read().map_err(err)?;
        scan_raw_in(&txn, desc, f)
    }
}

impl Writer {
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
