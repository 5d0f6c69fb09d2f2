//! The open store: TurboKV's configuration, the one runtime, the layout's stored keys,
//! bounded scans and table names, and the MANIFEST's paths made relative.
use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use tokio::runtime::Runtime;
use turbokv::storage::manifest::Manifest;
use turbokv::storage::sstable::CompressionType;
use turbokv::{Engine, MemTableConfig, RangeIter, StorageConfig, WalConfig};

use crate::errors::NErr;

/// The metadata's table name.
pub(crate) const META: &str = "__statemigrate__";

/// The one runtime: built on first use, never dropped, so it outlives every database.
pub(crate) fn runtime() -> &'static Runtime {
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

/// The stored-key prefix of table `name`: `name ‖ 0x00`.
pub(crate) fn prefix(name: &str) -> Vec<u8> {
    let mut p = Vec::with_capacity(name.len() + 1);
    p.extend_from_slice(name.as_bytes());
    p.push(0);
    p
}

/// The first stored key after every key of table `name`: `name ‖ 0x01`.
pub(crate) fn upper(name: &str) -> Vec<u8> {
    let mut p = prefix(name);
    *p.last_mut().expect("one byte") = 1;
    p
}

/// The stored key of `key` in table `name`.
pub(crate) fn stored_key(name: &str, key: &[u8]) -> Vec<u8> {
    let mut k = prefix(name);
    k.extend_from_slice(key);
    k
}

/// The WAL segment size: TurboKV reclaims a segment only once it is full and flushed, so
/// its 1 GiB default would leave a store statemigrate wrote holding every record twice
/// (SSTables and WAL) until the app writes 1 GiB more.
pub(crate) const WAL_SEGMENT: u64 = 32 << 20;

/// How often TurboKV's background task looks for immutable memtables to flush.
pub(crate) const FLUSH_TICK_MS: u64 = 20;
/// Immutable memtables a writer lets wait for their flush before its next batch.
pub(crate) const MAX_IMMUTABLE: u64 = 2;

/// Wait (at most 60 s: a flush that fails, a full disk, leaves them) until at most
/// [`MAX_IMMUTABLE`] immutable memtables wait for their flush, so a writer's memory is
/// bounded whatever the speed of the load.
pub(crate) fn wait_flushed(db: &Engine) {
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
pub(crate) fn config(
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
pub(crate) fn tune(c: StorageConfig) -> StorageConfig {
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

pub(crate) fn open_db(c: StorageConfig) -> Result<Engine, NErr> {
    Ok(runtime().block_on(Engine::open(c))?)
}

pub(crate) fn close_db(db: Engine) -> Result<(), NErr> {
    runtime().block_on(db.shutdown())?;
    drop(db);
    Ok(())
}

/// Rewrite the MANIFEST of the store at `dir`: every SSTable path under `root` (or under
/// `dir` itself) becomes relative to the store, and so does a path under another
/// directory whose `sstables/...` tail `dir` holds (a store moved or copied since).
/// Returns how many paths changed.
pub(crate) fn relativize(dir: &Path, root: &Path) -> Result<usize, NErr> {
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
pub(crate) fn moved(dir: &Path, path: &Path) -> Option<PathBuf> {
    let parts: Vec<_> = path.components().collect();
    let at = parts.iter().rposition(|c| c.as_os_str() == "sstables")?;
    let rel: PathBuf = parts[at..].iter().collect();
    dir.join(&rel).is_file().then_some(rel)
}

/// One stored pair.
pub(crate) type Pair = (Vec<u8>, Vec<u8>);

/// Take stored pairs from `it` (all of one table) into a bounded batch: at most
/// `max_records`, stopping after the pair that brings the payload to `max_bytes`.
pub(crate) fn take(
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
pub(crate) struct Open {
    pub(crate) db: Engine,
    /// (table, last key returned, the scan positioned after it).
    pub(crate) cursor: Option<(String, Vec<u8>, RangeIter)>,
}

impl Open {
    /// Stored pairs of `name` strictly after `after` (table keys, not stored keys).
    pub(crate) fn scan(
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
    pub(crate) fn first_at(&self, start: &[u8]) -> Result<Option<Vec<u8>>, NErr> {
        // Stored keys of the layout start with a table name's first UTF-8 byte (< 0xf5).
        let mut it = runtime().block_on(self.db.range_iter(start, &[0xff][..]))?;
        Ok(match it.next() {
            Some(item) => Some(item?.into_key()),
            None => None,
        })
    }

    /// Every table name with a record, the metadata's included: one seek per table.
    pub(crate) fn names(&self) -> Result<Vec<String>, NErr> {
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

    pub(crate) fn metadata(&mut self) -> Result<Vec<Pair>, NErr> {
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

pub(crate) fn hex(b: &[u8]) -> String {
    b.iter().take(64).map(|x| format!("{x:02x}")).collect()
}
