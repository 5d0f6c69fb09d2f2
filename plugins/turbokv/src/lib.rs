//! TurboKV 0.6 for statemigrate (`statemigrate_turbokv._native`): the real crate, bound
//! as statemigrate binds redb and fjall, built as its own extension because TurboKV's
//! Bloom filter hashes with gxhash, which needs the AES instructions.
//!
//! Layout: one flat key space; a table's record is stored under `table ‖ 0x00 ‖ key`
//! (table names hold no NUL, so the order and the parsing are exact), a versioned
//! table's value as `u64be(version) ‖ value`, metadata under the table name
//! `__statemigrate__` with the `kind:<table>` entries.
//!
//! TurboKV is async on tokio: one runtime, never dropped, outlives every database,
//! and every database is closed explicitly (`block_on(engine.shutdown())`, what
//! `Db::close` does; dropping one is not a clean shutdown). The binding opens the
//! crate's `Engine` with the configuration `Db::open_with_options` builds for a preset,
//! but WAL segments of 32 MiB (see [`WAL_SEGMENT`]). All work runs with the GIL
//! released; a panic becomes an error. Batches are built here, one `write_batch`
//! (atomic) per call.
//!
//! TurboKV's MANIFEST records every SSTable by absolute path, so a store that is moved
//! or copied does not open; [`relative_manifest`] rewrites the paths under a root to
//! relative ones (the crate's own `Manifest` load/save), which the crate accepts. The
//! writer does it whenever it closes a store, so the store it builds survives the
//! rename into place; the reader's private image gets it before it is opened.
use std::cell::Cell;
use std::panic::AssertUnwindSafe;
use std::path::{Path, PathBuf};
use std::sync::{Mutex, Once, OnceLock, PoisonError};

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyList, PyTuple};
use tokio::runtime::Runtime;
use turbokv::storage::manifest::Manifest;
use turbokv::storage::sstable::CompressionType;
use turbokv::{
    Engine, MemTableConfig, RangeIter, ScanError, StorageConfig, StorageError, WalConfig,
    WriteBatch,
};

create_exception!(
    _native,
    TurbokvBusyError,
    PyException,
    "The TurboKV store is held by another process."
);
create_exception!(
    _native,
    TurbokvCorruptError,
    PyException,
    "The TurboKV store is corrupt, truncated, or not in statemigrate's layout."
);
create_exception!(
    _native,
    TurbokvRefusedError,
    PyException,
    "The TurboKV writer refuses a name, key or option."
);
create_exception!(
    _native,
    TurbokvError,
    PyException,
    "Any other TurboKV error (I/O included)."
);

/// The metadata's table name.
const META: &str = "__statemigrate__";

/// An engine error, classified for the Python side.
#[derive(Debug)]
enum NErr {
    Busy(String),
    Corrupt(String),
    Refused(String),
    Other(String),
}

impl From<NErr> for PyErr {
    fn from(e: NErr) -> PyErr {
        match e {
            NErr::Busy(m) => TurbokvBusyError::new_err(m),
            NErr::Corrupt(m) => TurbokvCorruptError::new_err(m),
            NErr::Refused(m) => TurbokvRefusedError::new_err(m),
            NErr::Other(m) => TurbokvError::new_err(m),
        }
    }
}

impl From<StorageError> for NErr {
    fn from(e: StorageError) -> NErr {
        let text = e.to_string();
        match e {
            StorageError::DirectoryLocked { .. } => NErr::Busy(text),
            StorageError::Io(_) | StorageError::DirectoryLockIo { .. } => NErr::Other(text),
            // An operating-system error inside a storage error is I/O (a full disk).
            _ if text.contains("os error") => NErr::Other(text),
            _ => NErr::Corrupt(text),
        }
    }
}

impl From<ScanError> for NErr {
    fn from(e: ScanError) -> NErr {
        let text = e.to_string();
        if text.contains("os error") {
            NErr::Other(text)
        } else {
            NErr::Corrupt(text)
        }
    }
}

impl From<std::io::Error> for NErr {
    fn from(e: std::io::Error) -> NErr {
        NErr::Other(e.to_string())
    }
}

/// The one runtime: built on first use, never dropped, so it outlives every database.
fn runtime() -> &'static Runtime {
    static RT: OnceLock<Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .thread_name("turbokv")
            .enable_all()
            .build()
            .expect("the tokio runtime starts")
    })
}

thread_local! {
    /// Set while this thread runs TurboKV: a panic there is reported as an error.
    static IN_TURBOKV: Cell<bool> = const { Cell::new(false) };
}

/// Run TurboKV work with the GIL released; a panic becomes a "corrupt" error.
fn detach<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, NErr> + Send) -> PyResult<T> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_TURBOKV.with(|c| c.get()) {
                previous(info);
            }
        }));
    });
    let out = py.detach(|| {
        IN_TURBOKV.with(|c| c.set(true));
        let out = std::panic::catch_unwind(AssertUnwindSafe(f));
        IN_TURBOKV.with(|c| c.set(false));
        out.unwrap_or_else(|panic| {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err(NErr::Corrupt(format!(
                "TurboKV stopped on damaged data: {}",
                msg.lines().next().unwrap_or("")
            )))
        })
    });
    Ok(out?)
}

/// The stored-key prefix of table `name`: `name ‖ 0x00`.
fn prefix(name: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(name.len() + 1);
    p.extend_from_slice(name.as_bytes());
    p.push(0);
    p
}

/// The first stored key after every key of table `name`: `name ‖ 0x01`.
fn upper(name: &str) -> Vec<u8> {
    let mut p = prefix(name);
    *p.last_mut().expect("one byte") = 1;
    p
}

/// The stored key of `key` in table `name`.
fn stored_key(name: &str, key: &[u8]) -> Vec<u8> {
    let mut k = prefix(name);
    k.extend_from_slice(key);
    k
}

/// The WAL segment size: TurboKV reclaims a segment only once it is full and flushed, so
/// its 1 GiB default would leave a store statemigrate wrote holding every record twice
/// (SSTables and WAL) until the app writes 1 GiB more.
const WAL_SEGMENT: u64 = 32 << 20;

/// How often TurboKV's background task looks for immutable memtables to flush.
const FLUSH_TICK_MS: u64 = 20;
/// Immutable memtables a writer lets wait for their flush before its next batch.
const MAX_IMMUTABLE: u64 = 2;

/// Wait (at most 60 s: a flush that fails, a full disk, leaves them) until at most
/// [`MAX_IMMUTABLE`] immutable memtables wait for their flush, so a writer's memory is
/// bounded whatever the speed of the load.
fn wait_flushed(db: &Engine) {
    let start = std::time::Instant::now();
    while db.physical_stats().memtables.immutable_tables > MAX_IMMUTABLE
        && start.elapsed() < std::time::Duration::from_secs(60)
    {
        std::thread::sleep(std::time::Duration::from_millis(2));
    }
}

/// The storage configuration of `Db::open_with_options` for a durability preset
/// (`DbOptions::durable()`, `paranoid()`, `fast()`) and SSTable `compression`; when
/// `tuned` (statemigrate's), with bounded memtable, block cache and WAL segment sizes
/// and a flush timer of [`FLUSH_TICK_MS`], else exactly the crate's own.
fn config(
    path: &Path,
    preset: &str,
    compression: &str,
    tuned: bool,
) -> Result<StorageConfig, NErr> {
    let (wal_config, wal_enabled) = match preset {
        "durable" => (WalConfig::durable(), true),
        "paranoid" => (WalConfig::paranoid(), true),
        "fast" => (WalConfig::durable(), false),
        other => return Err(NErr::Refused(format!("unknown TurboKV preset {other:?}"))),
    };
    let mut c = StorageConfig {
        data_dir: path.to_path_buf(),
        wal_config,
        memtable_config: MemTableConfig {
            max_size: 64 << 20,
            ..Default::default()
        },
        wal_enabled,
        block_cache_size: 64 << 20,
        ..Default::default()
    };
    if tuned {
        c = tune(c);
    }
    c.sstable_config.compression = match compression {
        "lz4" => CompressionType::Lz4,
        "snappy" => CompressionType::Snappy,
        "zstd" => CompressionType::Zstd,
        "none" => CompressionType::None,
        other => {
            return Err(NErr::Refused(format!(
                "unknown TurboKV compression {other:?}"
            )))
        }
    };
    Ok(c)
}

/// statemigrate's bounds on a configuration (see [`WAL_SEGMENT`] and [`FLUSH_TICK_MS`]).
fn tune(c: StorageConfig) -> StorageConfig {
    StorageConfig {
        wal_config: WalConfig {
            max_file_size: WAL_SEGMENT,
            ..c.wal_config
        },
        memtable_config: MemTableConfig {
            max_size: 16 << 20,
            ..Default::default()
        },
        block_cache_size: 8 << 20,
        // TurboKV writes immutable memtables to SSTables only on this timer (60 s by
        // default): under a load every record written meanwhile stayed in memory
        // (RssAnon 1.9 GiB converting 4M records).
        flush_interval: std::time::Duration::from_millis(FLUSH_TICK_MS),
        ..c
    }
}

fn open_db(c: StorageConfig) -> Result<Engine, NErr> {
    Ok(runtime().block_on(Engine::open(c))?)
}

fn close_db(db: Engine) -> Result<(), NErr> {
    runtime().block_on(db.shutdown())?;
    drop(db);
    Ok(())
}

/// Rewrite the MANIFEST of the store at `dir`: every SSTable path under `root` (or under
/// `dir` itself) becomes relative to the store, and so does a path under another
/// directory whose `sstables/...` tail `dir` holds (a store moved or copied since).
/// Returns how many paths changed.
fn relativize(dir: &Path, root: &Path) -> Result<usize, NErr> {
    let file = dir.join("MANIFEST");
    if !file.is_file() {
        return Ok(0);
    }
    let mut m = Manifest::load(&file).map_err(|e| NErr::Corrupt(format!("MANIFEST: {e}")))?;
    let roots: Vec<PathBuf> = [root, dir]
        .iter()
        .flat_map(|r| {
            [
                r.to_path_buf(),
                std::fs::canonicalize(r).unwrap_or_default(),
            ]
        })
        .filter(|r| r.is_absolute())
        .collect();
    let mut changed = 0;
    for entry in &mut m.sstables {
        if entry.path.is_relative() {
            continue;
        }
        let under_root = roots
            .iter()
            .find_map(|r| entry.path.strip_prefix(r).ok().map(Path::to_path_buf));
        if let Some(rel) = under_root.or_else(|| moved(dir, &entry.path)) {
            entry.path = rel;
            changed += 1;
        }
    }
    if changed > 0 {
        m.save(dir)
            .map_err(|e| NErr::Other(format!("MANIFEST: {e}")))?;
    }
    Ok(changed)
}

/// Where SSTable `path` of a store that was moved or copied from elsewhere is in `dir`:
/// its path from its last `sstables` component on, when `dir` holds that file.
fn moved(dir: &Path, path: &Path) -> Option<PathBuf> {
    let parts: Vec<_> = path.components().collect();
    let at = parts.iter().rposition(|c| c.as_os_str() == "sstables")?;
    let rel: PathBuf = parts[at..].iter().collect();
    dir.join(&rel).is_file().then_some(rel)
}

/// Rewrite the SSTable paths of the MANIFEST in `dir` that lie under `root` (the store
/// `dir` was copied from), under `dir`, or elsewhere with their `sstables/...` tail in
/// `dir` (a moved store), to paths relative to the store; the number rewritten. Only
/// for a directory no database has open.
#[pyfunction]
fn relative_manifest(py: Python<'_>, dir: PathBuf, root: PathBuf) -> PyResult<usize> {
    detach(py, || relativize(&dir, &root))
}

/// One stored pair.
type Pair = (Vec<u8>, Vec<u8>);

/// Take stored pairs from `it` (all of one table) into a bounded batch: at most
/// `max_records`, stopping after the pair that brings the payload to `max_bytes`.
fn take(
    it: &mut RangeIter,
    skip: usize,
    max_records: usize,
    max_bytes: usize,
) -> Result<Vec<Pair>, NErr> {
    let mut out = Vec::new();
    let mut nbytes = 0usize;
    for item in it {
        let (k, v) = item?.into_pair();
        let key = k[skip..].to_vec();
        nbytes += key.len() + v.len();
        out.push((key, v));
        if out.len() >= max_records || nbytes >= max_bytes {
            break;
        }
    }
    Ok(out)
}

/// An open database, with the scan a reader continues batch after batch.
struct Open {
    db: Engine,
    /// (table, last key returned, the scan positioned after it).
    cursor: Option<(String, Vec<u8>, RangeIter)>,
}

impl Open {
    /// Stored pairs of `name` strictly after `after` (table keys, not stored keys).
    fn scan(
        &mut self,
        name: &str,
        after: Option<&[u8]>,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<Pair>, NErr> {
        let skip = name.len() + 1;
        let mut it = match self.cursor.take() {
            Some((t, last, it)) if t == name && Some(last.as_slice()) == after => it,
            _ => {
                let start = match after {
                    Some(a) => {
                        let mut s = stored_key(name, a);
                        s.push(0); // the first key after `a`
                        s
                    }
                    None => prefix(name),
                };
                runtime().block_on(self.db.range_iter(&start, &upper(name)))?
            }
        };
        let out = take(&mut it, skip, max_records, max_bytes)?;
        if let Some(last) = out.last() {
            self.cursor = Some((name.to_string(), last.0.clone(), it));
        }
        Ok(out)
    }

    /// The first stored key at or after `start`, or None.
    fn first_at(&self, start: &[u8]) -> Result<Option<Vec<u8>>, NErr> {
        // Stored keys of the layout start with a table name's first UTF-8 byte (< 0xf5).
        let mut it = runtime().block_on(self.db.range_iter(start, &[0xff][..]))?;
        Ok(match it.next() {
            Some(item) => Some(item?.into_key()),
            None => None,
        })
    }

    /// Every table name with a record, the metadata's included: one seek per table.
    fn names(&self) -> Result<Vec<String>, NErr> {
        let mut out = Vec::new();
        let mut start = Vec::new();
        while let Some(key) = self.first_at(&start)? {
            let Some(nul) = key.iter().position(|b| *b == 0) else {
                return Err(NErr::Corrupt(format!(
                    "key {} holds no 0x00 after a table name (not statemigrate's TurboKV layout)",
                    hex(&key)
                )));
            };
            let name = String::from_utf8(key[..nul].to_vec()).map_err(|_| {
                NErr::Corrupt(format!(
                    "key {} starts with a table name that is not UTF-8 (not statemigrate's TurboKV layout)",
                    hex(&key)
                ))
            })?;
            start = upper(&name);
            out.push(name);
        }
        let mut it = runtime().block_on(self.db.scan_prefix_iter(&[0xff][..]))?;
        if let Some(item) = it.next() {
            return Err(NErr::Corrupt(format!(
                "key {} starts with 0xff (not statemigrate's TurboKV layout)",
                hex(&item?.into_key())
            )));
        }
        Ok(out)
    }

    fn metadata(&mut self) -> Result<Vec<Pair>, NErr> {
        let mut out = Vec::new();
        let mut after: Option<Vec<u8>> = None;
        loop {
            let b = self.scan(META, after.as_deref(), 10_000, 8 << 20)?;
            let Some(last) = b.last() else { break };
            after = Some(last.0.clone());
            out.extend(b);
        }
        self.cursor = None;
        Ok(out)
    }
}

fn hex(b: &[u8]) -> String {
    b.iter().take(64).map(|x| format!("{x:02x}")).collect()
}

fn meta_pairs(py: Python<'_>, pairs: Vec<Pair>) -> PyResult<Vec<(String, Py<PyBytes>)>> {
    pairs
        .into_iter()
        .map(|(k, v)| {
            let k = String::from_utf8(k)
                .map_err(|_| TurbokvCorruptError::new_err("a metadata key is not UTF-8"))?;
            Ok((k, PyBytes::new(py, &v).unbind()))
        })
        .collect()
}

/// A TurboKV store being read (a private image: opening changes the directory).
#[pyclass(module = "statemigrate_turbokv._native")]
pub struct TurbokvReader {
    h: Mutex<Option<Open>>,
}

impl TurbokvReader {
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Open) -> Result<T, NErr> + Send,
    ) -> PyResult<T> {
        detach(py, || {
            let mut g = self.h.lock().unwrap_or_else(PoisonError::into_inner);
            let o = g
                .as_mut()
                .ok_or_else(|| NErr::Other("the store is closed".into()))?;
            f(o)
        })
    }
}

#[pymethods]
impl TurbokvReader {
    /// Open the TurboKV store at `path` (a private image nobody else writes, so every
    /// read sees the same state).
    #[new]
    fn new(py: Python<'_>, path: PathBuf) -> PyResult<Self> {
        let db = detach(py, || open_db(config(&path, "durable", "lz4", true)?))?;
        Ok(TurbokvReader {
            h: Mutex::new(Some(Open { db, cursor: None })),
        })
    }

    /// Every table name with a record, the metadata's included.
    fn names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.run(py, |o| o.names())
    }

    /// The metadata's entries.
    fn metadata(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyBytes>)>> {
        let pairs = self.run(py, |o| o.metadata())?;
        meta_pairs(py, pairs)
    }

    /// One batch of table `name` strictly after `after`: `(key, value)` tuples, or
    /// `(key, value, version)` for a versioned table.
    #[pyo3(signature = (name, after=None, max_records=10000, max_bytes=8388608, versioned=false))]
    fn read_batch<'py>(
        &self,
        py: Python<'py>,
        name: String,
        after: Option<Vec<u8>>,
        max_records: usize,
        max_bytes: usize,
        versioned: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let (n, b) = (max_records.max(1), max_bytes.max(1));
        let recs = self.run(py, |o| o.scan(&name, after.as_deref(), n, b))?;
        to_list(py, &name, recs, versioned)
    }

    /// Close the database (flushes what it recovered into the private image).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        detach(py, || {
            let taken = self.h.lock().unwrap_or_else(PoisonError::into_inner).take();
            match taken {
                Some(o) => {
                    drop(o.cursor);
                    close_db(o.db)
                }
                None => Ok(()),
            }
        })
    }
}

fn to_list<'py>(
    py: Python<'py>,
    name: &str,
    recs: Vec<Pair>,
    versioned: bool,
) -> PyResult<Bound<'py, PyList>> {
    let out = PyList::empty(py);
    for (k, v) in recs {
        let key = PyBytes::new(py, &k).into_any();
        if versioned {
            if v.len() < 8 {
                return Err(TurbokvCorruptError::new_err(format!(
                    "a record of versioned table {name:?} is shorter than its 8-byte version"
                )));
            }
            let ver = u64::from_be_bytes(v[..8].try_into().expect("8 bytes"));
            let val = PyBytes::new(py, &v[8..]).into_any();
            out.append(PyTuple::new(
                py,
                [key, val, ver.into_pyobject(py)?.into_any()],
            )?)?;
        } else {
            out.append(PyTuple::new(py, [key, PyBytes::new(py, &v).into_any()])?)?;
        }
    }
    Ok(out)
}

/// A metadata update: key, and the new value (None deletes).
type MetaUpdate = (String, Option<Vec<u8>>);

fn put_meta(batch: &mut WriteBatch, meta: Vec<MetaUpdate>) {
    for (k, v) in meta {
        let key = stored_key(META, k.as_bytes());
        match v {
            Some(v) => batch.put(key, v),
            None => batch.delete(key),
        }
    }
}

/// Build the write batch of `records` of table `name` (keys ascending), GIL held only
/// to read the Python objects.
fn records(name: &str, batch: &Bound<'_, PyList>, versioned: bool) -> PyResult<WriteBatch> {
    let mut out = WriteBatch::with_capacity(batch.len());
    let mut prev: Option<Vec<u8>> = None;
    for row in batch.iter() {
        let t = row
            .cast::<PyTuple>()
            .map_err(|_| PyValueError::new_err("a record must be a tuple"))?;
        let key_item = t.get_item(0)?;
        let key = key_item.cast::<PyBytes>()?.as_bytes();
        let item = t.get_item(1)?;
        let value = item.cast::<PyBytes>()?.as_bytes();
        if prev.as_deref().is_some_and(|p| p >= key) {
            return Err(TurbokvRefusedError::new_err(format!(
                "table {name:?}: keys out of order in a batch"
            )));
        }
        prev = Some(key.to_vec());
        let stored = stored_key(name, key);
        if versioned {
            let ver: u64 = t.get_item(2)?.extract()?;
            let mut s = Vec::with_capacity(8 + value.len());
            s.extend_from_slice(&ver.to_be_bytes());
            s.extend_from_slice(value);
            out.put(stored, s);
        } else {
            out.put(stored, value);
        }
    }
    Ok(out)
}

fn check_name(name: &str) -> Result<(), NErr> {
    if name.as_bytes().contains(&0) {
        return Err(NErr::Refused(format!(
            "table name {name:?} holds a NUL byte, which TurboKV's layout cannot hold"
        )));
    }
    Ok(())
}

/// A TurboKV store being written (live reads).
#[pyclass(module = "statemigrate_turbokv._native")]
pub struct TurbokvWriter {
    h: Mutex<Option<Open>>,
    path: PathBuf,
    preset: String,
    compression: String,
    /// statemigrate's bounds (memory, WAL segments); false: the crate's own configuration.
    tuned: bool,
}

impl TurbokvWriter {
    /// Run `f` on the open database, reopening it when `finish` closed it.
    fn run<T: Send>(
        &self,
        py: Python<'_>,
        f: impl FnOnce(&mut Open) -> Result<T, NErr> + Send,
    ) -> PyResult<T> {
        detach(py, || {
            let mut g = self.h.lock().unwrap_or_else(PoisonError::into_inner);
            if g.is_none() {
                let db = open_db(config(
                    &self.path,
                    &self.preset,
                    &self.compression,
                    self.tuned,
                )?)?;
                *g = Some(Open { db, cursor: None });
            }
            let o = g.as_mut().expect("opened above");
            o.cursor = None; // a writer's scans see its latest writes
            f(o)
        })
    }

    /// Close the database and make its MANIFEST's paths relative.
    fn shut(&self) -> Result<(), NErr> {
        let taken = self.h.lock().unwrap_or_else(PoisonError::into_inner).take();
        if let Some(o) = taken {
            drop(o.cursor);
            close_db(o.db)?;
            relativize(&self.path, &self.path)?;
        }
        Ok(())
    }
}

#[pymethods]
impl TurbokvWriter {
    /// Open (`create`: create) the TurboKV store at `path` (absolute) for writing with
    /// durability `preset` (`durable`, `paranoid`, `fast`), SSTable `compression` and
    /// statemigrate's bounds on memory and WAL segments (`tuned`; false: exactly the
    /// configuration `Db::open_with_options` builds, for benchmarks).
    #[new]
    #[pyo3(signature = (path, create, preset="durable", compression="lz4", tuned=true))]
    fn new(
        py: Python<'_>,
        path: PathBuf,
        create: bool,
        preset: &str,
        compression: &str,
        tuned: bool,
    ) -> PyResult<Self> {
        if !path.is_absolute() {
            return Err(PyValueError::new_err("the store's path must be absolute"));
        }
        if create == path.exists() {
            let why = if create {
                "already exists"
            } else {
                "does not exist"
            };
            return Err(TurbokvRefusedError::new_err(format!(
                "{}: {why}",
                path.display()
            )));
        }
        let w = TurbokvWriter {
            h: Mutex::new(None),
            path,
            preset: preset.to_string(),
            compression: compression.to_string(),
            tuned,
        };
        w.run(py, |_| Ok(()))?;
        Ok(w)
    }

    /// Every table name with a record, the metadata's included.
    fn names(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        self.run(py, |o| o.names())
    }

    /// The metadata's entries.
    fn metadata(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyBytes>)>> {
        let pairs = self.run(py, |o| o.metadata())?;
        meta_pairs(py, pairs)
    }

    /// One batch of table `name` as written so far (see `TurbokvReader.read_batch`).
    #[pyo3(signature = (name, after=None, max_records=10000, max_bytes=8388608, versioned=false))]
    fn read_batch<'py>(
        &self,
        py: Python<'py>,
        name: String,
        after: Option<Vec<u8>>,
        max_records: usize,
        max_bytes: usize,
        versioned: bool,
    ) -> PyResult<Bound<'py, PyList>> {
        let (n, b) = (max_records.max(1), max_bytes.max(1));
        let recs = self.run(py, |o| o.scan(&name, after.as_deref(), n, b))?;
        to_list(py, &name, recs, versioned)
    }

    /// Store a batch of `(key, value[, version])` records of table `name` (keys
    /// ascending) and the metadata updates `meta`: one atomic `write_batch`.
    fn write_batch(
        &self,
        py: Python<'_>,
        name: String,
        batch: &Bound<'_, PyList>,
        versioned: bool,
        meta: Vec<MetaUpdate>,
    ) -> PyResult<()> {
        check_name(&name)?;
        let mut wb = records(&name, batch, versioned)?;
        put_meta(&mut wb, meta);
        self.run(py, |o| {
            runtime().block_on(o.db.write_batch(&wb))?;
            if self.tuned {
                wait_flushed(&o.db);
            }
            Ok(())
        })
    }

    /// Commit metadata updates alone (None deletes), atomically.
    fn put_metadata(&self, py: Python<'_>, meta: Vec<MetaUpdate>) -> PyResult<()> {
        let mut wb = WriteBatch::new();
        put_meta(&mut wb, meta);
        if wb.is_empty() {
            return Ok(());
        }
        self.run(py, |o| Ok(runtime().block_on(o.db.write_batch(&wb))?))
    }

    /// Delete every record of table `name` and apply `meta`, in batches of 10,000
    /// (the last one atomic with `meta`).
    fn clear_table(&self, py: Python<'_>, name: String, meta: Vec<MetaUpdate>) -> PyResult<()> {
        check_name(&name)?;
        self.run(py, |o| loop {
            let keys: Vec<Vec<u8>> = {
                let mut it = runtime().block_on(o.db.range_iter(&prefix(&name), &upper(&name)))?;
                let mut keys = Vec::new();
                for item in it.by_ref().take(10_000) {
                    keys.push(item?.into_key());
                }
                keys
            };
            let last = keys.len() < 10_000;
            let mut wb = WriteBatch::with_capacity(keys.len() + meta.len());
            for k in keys {
                wb.delete(k);
            }
            if last {
                put_meta(&mut wb, meta);
                if !wb.is_empty() {
                    runtime().block_on(o.db.write_batch(&wb))?;
                }
                return Ok(());
            }
            runtime().block_on(o.db.write_batch(&wb))?;
        })
    }

    /// TurboKV's physical statistics of the open store (memtables, SSTables, WAL,
    /// caches), as its `Debug` text: for diagnosing memory and disk use.
    fn physical_stats(&self, py: Python<'_>) -> PyResult<String> {
        self.run(py, |o| Ok(format!("{:?}", o.db.physical_stats())))
    }

    /// Make every write durable: memtables flushed to SSTables and the WAL synced.
    fn persist(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |o| Ok(runtime().block_on(o.db.flush())?))
    }

    /// Flush, close (the store can then be renamed: its MANIFEST's paths are made
    /// relative); a later call reopens it.
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        self.run(py, |o| Ok(runtime().block_on(o.db.flush())?))?;
        detach(py, || self.shut())
    }

    /// Close the database (its MANIFEST's paths made relative).
    fn close(&self, py: Python<'_>) -> PyResult<()> {
        detach(py, || self.shut())
    }
}

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<TurbokvReader>()?;
    m.add_class::<TurbokvWriter>()?;
    m.add_function(wrap_pyfunction!(relative_manifest, m)?)?;
    m.add("TurbokvBusyError", py.get_type::<TurbokvBusyError>())?;
    m.add("TurbokvCorruptError", py.get_type::<TurbokvCorruptError>())?;
    m.add("TurbokvRefusedError", py.get_type::<TurbokvRefusedError>())?;
    m.add("TurbokvError", py.get_type::<TurbokvError>())?;
    m.add("TURBOKV_VERSION", turbokv::VERSION)?;
    Ok(())
}
