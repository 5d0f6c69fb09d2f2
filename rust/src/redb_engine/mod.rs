//! The redb engine's native side: one binding per redb file format, chosen by
//! the caller from the file header (format 3: redb 4.x; 2: redb 2.6; 1: redb 1.5).
//!
//! Tables are classified as `plain` (`&[u8] -> &[u8]`), `versioned`
//! (`&[u8] -> (u64, &[u8])`), `typed` (any other built-in key type: keys are
//! mapped to an order-preserving encoding, see `types.rs`) or `custom` (a
//! user-defined key type, or a multimap's user-defined value type: raw bytes
//! yielded in byte order through an external sort).
use std::cell::Cell;
use std::collections::HashMap;
use std::ops::Bound as RBound;
use std::panic::AssertUnwindSafe;
use std::path::PathBuf;
use std::sync::{Arc, Mutex, Once, PoisonError};

use pyo3::create_exception;
use pyo3::exceptions::{PyException, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyDict, PyList, PyTuple};

mod overlay;
mod sort;
mod typename;
pub mod types;
#[allow(dead_code)] // format 1 is read only: its writer half is compiled but unused
mod v1;
mod v2;
mod v4;

use sort::Sorter;
use types::TypeExpr;

create_exception!(
    _native,
    RedbBusyError,
    PyException,
    "The redb file is held by another process."
);
create_exception!(
    _native,
    RedbCorruptError,
    PyException,
    "The redb file is corrupt or truncated."
);
create_exception!(
    _native,
    RedbUnsupportedError,
    PyException,
    "The redb file format is not supported."
);
create_exception!(
    _native,
    RedbRefusedError,
    PyException,
    "The redb writer refuses a table or type."
);
create_exception!(_native, RedbError, PyException, "Any other redb error.");

/// An engine error, classified for the Python side.
#[derive(Debug)]
pub enum NErr {
    Busy(String),
    Corrupt(String),
    Unsupported(u8),
    Refused(String),
    Io(String),
    Other(String),
}

impl From<NErr> for PyErr {
    fn from(e: NErr) -> PyErr {
        match e {
            NErr::Busy(m) => RedbBusyError::new_err(m),
            NErr::Corrupt(m) => RedbCorruptError::new_err(m),
            NErr::Unsupported(v) => RedbUnsupportedError::new_err(format!("file format {v}")),
            NErr::Refused(m) => RedbRefusedError::new_err(m),
            NErr::Io(m) => RedbError::new_err(m),
            NErr::Other(m) => RedbError::new_err(m),
        }
    }
}

thread_local! {
    /// Set while this thread runs redb: a panic there is reported as an error, not printed.
    static IN_REDB: Cell<bool> = const { Cell::new(false) };
}

/// Run redb work with the GIL released. redb asserts (panics) on some damaged
/// pages; such a panic becomes a "corrupt" error (exit 4) instead of a Python
/// `PanicException` and a message on stderr, and poisoned locks are recovered.
fn detach<T: Send>(py: Python<'_>, f: impl FnOnce() -> Result<T, NErr> + Send) -> Result<T, NErr> {
    static HOOK: Once = Once::new();
    HOOK.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if !IN_REDB.with(|c| c.get()) {
                previous(info);
            }
        }));
    });
    py.detach(|| {
        IN_REDB.with(|c| c.set(true));
        let out = std::panic::catch_unwind(AssertUnwindSafe(f));
        IN_REDB.with(|c| c.set(false));
        out.unwrap_or_else(|panic| {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_else(|| "a panic".into());
            Err(NErr::Corrupt(format!(
                "redb stopped on damaged data: {}",
                msg.lines().next().unwrap_or("")
            )))
        })
    })
}

pub type OwnedRec = (Vec<u8>, Vec<u8>, u64);

/// redb's page cache per open file (its default is 1 GiB, which a long copy fills:
/// memory would grow with the store). Reads and writes go through batches of
/// bounded size, so a small cache costs little.
const CACHE_BYTES: usize = 32 << 20;

/// The cache size: `CACHE_BYTES`, or `STATEMIGRATE_REDB_CACHE_BYTES` (to measure its cost).
pub fn cache_bytes() -> usize {
    std::env::var("STATEMIGRATE_REDB_CACHE_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(CACHE_BYTES)
}

/// A callback taking each stored pair of a scan.
pub type PairSink<'a> = dyn FnMut(&[u8], &[u8]) -> Result<(), NErr> + 'a;

/// Stored (key, value) pairs.
pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

/// What a table is read from: a reader's snapshot, or a writer's committed state.
pub trait Snapshot {
    /// A batch of a plain or versioned table strictly after `after`.
    fn read_plain(
        &self,
        name: &str,
        versioned: bool,
        after: Option<&[u8]>,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<OwnedRec>, NErr>;
    /// Stored pairs of a typed table from `start`, in redb's order.
    fn read_raw(
        &self,
        desc: &TableDesc,
        key_order: Option<Arc<TypeExpr>>,
        value_order: Option<Arc<TypeExpr>>,
        start: RBound<&[u8]>,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Pairs, NErr>;
    /// Every stored pair of a typed table, in redb's order.
    fn scan_raw(&self, desc: &TableDesc, f: &mut PairSink<'_>) -> Result<(), NErr>;
}

#[derive(Debug, Clone)]
pub struct TypeDesc {
    pub name: String,
    pub class: String,
    pub width: Option<usize>,
    /// Whether stored tuples use the redb <= 2.x layout (None: as the file's format and
    /// the classification say).
    pub legacy: Option<bool>,
}

#[derive(Debug, Clone)]
pub struct TableDesc {
    pub name: String,
    pub multimap: bool,
    pub key: TypeDesc,
    pub value: TypeDesc,
    /// Written back exactly as described (the source's own type names, classification
    /// and tuple layout) rather than as the writer's redb version spells the types.
    pub exact: bool,
    /// User-defined types (or whole composites) asserted to be ordered by their bytes.
    pub bytewise: Vec<String>,
}

/// How a table's records map to the state model.
#[derive(Debug, Clone, Copy, PartialEq)]
enum Kind {
    Plain,
    Versioned,
    Typed,
    Custom,
}

impl Kind {
    fn as_str(self) -> &'static str {
        match self {
            Kind::Plain => "plain",
            Kind::Versioned => "versioned",
            Kind::Typed => "typed",
            Kind::Custom => "custom",
        }
    }
}

/// The types a table's keys (and a multimap's values) are encoded with, whether
/// that is redb's order (typed) or needs a sort (custom), and whether values keep
/// the old tuple layout.
struct Plan {
    kind: Kind,
    key: Option<Arc<TypeExpr>>,
    value: Option<Arc<TypeExpr>>,
    key_enc: TypeExpr,
    value_enc: TypeExpr,
    /// A versioned table in redb 2.6's spelling inside a format-3 file (read raw).
    raw_versioned: bool,
}

fn stand_in(t: &TypeDesc) -> TypeExpr {
    match t.width {
        Some(w) => TypeExpr::FixedBytes(w),
        None => TypeExpr::Bytes,
    }
}

/// Whether a type's stored tuples have the redb <= 2.x layout. In format 3 the name
/// alone tells only for a variable-width tuple itself: redb 2.6 (format-3 opt-in) spells
/// it `Internal`, redb 3.0-4.1 `Internal2`, redb 4.2+ `Internal3`. A tuple inside
/// another composite (`Option<(u64,&str)>`, spelt `Internal` by both 2.6 and 3.x) is
/// taken to be in the 3.0 layout, since redb 3.x and 4.x files are the common ones.
fn legacy_tuples(format: u8, t: &TypeDesc) -> bool {
    t.legacy.unwrap_or_else(|| {
        // User-defined types inside take the width the tuple's own width leaves them.
        let tuple =
            || TypeExpr::parse_with(&t.name, true, &|_| true).and_then(|e| e.resolve(t.width).ok());
        format < 3
            || (t.class == "Internal"
                && matches!(tuple(), Some(e @ TypeExpr::Tuple(..)) if e.fixed_width().is_none()))
    })
}

fn is_composite(name: &str) -> bool {
    (name.starts_with('(') && name != "()")
        || name.starts_with("Option<")
        || name.starts_with("Vec<")
        || name.starts_with('[')
}

/// How to re-lay a part's stored bytes (the source's tuple layout to `to_legacy`),
/// or why the type name does not tell how.
type Relayout = Option<(Result<TypeExpr, String>, bool)>;

/// A table as a writer writes it: exactly as described when `d.exact` (written back
/// as read), else composite types get the writing redb's own spelling and tuple
/// layout (redb 2.6's when `redb2`, in format 2 or 3; else redb 4.x's, which classifies
/// a composite holding a user-defined type `UserDefined`), so that a file converted
/// from another format opens with the app's plain `TableDefinition` in the redb it
/// targets (not only through `Legacy<T>`). Also returns, for the key and the value,
/// how to re-lay their stored bytes when their layout changes.
fn target_desc(format: u8, redb2: bool, d: &TableDesc) -> (TableDesc, [Relayout; 2]) {
    if d.exact {
        return (d.clone(), [None, None]);
    }
    let to_legacy = redb2;
    let mut out = d.clone();
    let mut relayout = [None, None];
    for (i, t) in [&mut out.key, &mut out.value].into_iter().enumerate() {
        if !is_composite(&t.name) {
            continue;
        }
        let src_legacy = legacy_tuples(format, t);
        let Some(expr) = TypeExpr::parse_with(&t.name, src_legacy, &|_| true) else {
            continue; // not understood: carried as it is
        };
        // Re-laying also needs the user-defined types' widths in the target layout.
        let in_target =
            TypeExpr::parse_with(&t.name, to_legacy, &|_| true).map(|e| e.resolve(t.width));
        let resolved = match (expr.clone().resolve(t.width), in_target) {
            (Ok(_), Some(Err(why))) => Err(why),
            (r, _) => r,
        };
        if matches!(&resolved, Ok(e) if e.fixed_width() != t.width) {
            continue;
        }
        let custom = !expr.customs().is_empty();
        t.class = match (to_legacy, custom) {
            (true, _) => "Internal",
            (false, true) => "UserDefined",
            (false, false) => "Internal3",
        }
        .to_string();
        t.legacy = Some(to_legacy);
        let layout = match &resolved {
            Ok(e) => e.has_layout(),
            Err(_) => expr.has_layout(),
        };
        if layout && src_legacy != to_legacy {
            relayout[i] = Some((resolved, to_legacy));
        }
    }
    (out, relayout)
}

/// Re-lay stored bytes as `r` says (nothing to do when None).
fn apply_relayout(r: &Relayout, d: &[u8]) -> Result<Vec<u8>, String> {
    match r {
        None => Ok(d.to_vec()),
        Some((Ok(e), to_legacy)) => e.relayout(d, *to_legacy),
        Some((Err(why), _)) => Err(why.clone()),
    }
}

/// How a custom-order part (a key, a multimap's value) of the target table compares,
/// as the app's redb compares it: bytewise for a user-defined type (asserted by
/// `--bytewise-key`) or a composite asserted bytewise as a whole; else a composite's
/// built-in parts as redb orders them and its user-defined parts bytewise.
fn custom_order(format: u8, d: &TableDesc, t: &TypeDesc) -> Result<Option<Arc<TypeExpr>>, NErr> {
    if !is_composite(&t.name) || d.bytewise.contains(&t.name) {
        return Ok(None);
    }
    let refused = |why: String| {
        NErr::Refused(format!(
            "table {:?}: the order of type {:?} cannot be known: {why}",
            d.name, t.name
        ))
    };
    let e = TypeExpr::parse_with(&t.name, legacy_tuples(format, t), &|_| true)
        .ok_or_else(|| refused("unknown parts".into()))?;
    Ok(Some(Arc::new(e.resolve(t.width).map_err(refused)?)))
}

/// Whether a versioned table's value type is spelt as the writing redb spells
/// `(u64, &[u8])` (redb 2.6, `redb2`: `Internal`; redb 4.x: `Internal3`); other
/// spellings (redb 3.x's `Internal2`, say) are written raw.
fn native_versioned(redb2: bool, d: &TableDesc) -> bool {
    d.value.class == if redb2 { "Internal" } else { "Internal3" }
}

/// The stored value of a versioned record in the value type's tuple layout.
fn versioned_value(legacy: bool, ver: u64, v: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(v.len() + 12);
    if legacy {
        out.extend_from_slice(&8u32.to_le_bytes());
    }
    out.extend_from_slice(&ver.to_le_bytes());
    out.extend_from_slice(v);
    out
}

fn plan(format: u8, d: &TableDesc) -> Plan {
    let builtin = |t: &TypeDesc| t.class != "UserDefined";
    if !d.multimap && builtin(&d.key) && builtin(&d.value) && d.key.name == "&[u8]" {
        if d.value.name == "&[u8]" {
            return Plan {
                kind: Kind::Plain,
                key: None,
                value: None,
                key_enc: TypeExpr::Bytes,
                value_enc: TypeExpr::Bytes,
                raw_versioned: false,
            };
        }
        if d.value.name == "(u64,&[u8])" {
            // redb 4.x's real `(u64, &[u8])` does not open the old spelling (classification
            // Internal, old tuple layout) that redb 2.6 writes into format-3 files: those
            // values are read raw and split here.
            let raw = format >= 3 && d.value.class == "Internal";
            return Plan {
                kind: Kind::Versioned,
                key: None,
                value: None,
                key_enc: TypeExpr::Bytes,
                value_enc: TypeExpr::Bytes,
                raw_versioned: raw,
            };
        }
    }
    let parse = |t: &TypeDesc| {
        if builtin(t) {
            TypeExpr::parse(&t.name, legacy_tuples(format, t))
                .filter(|e| e.fixed_width() == t.width)
        } else {
            None
        }
    };
    let key = parse(&d.key);
    let value = if d.multimap { parse(&d.value) } else { None };
    let custom = key.is_none() || (d.multimap && value.is_none());
    Plan {
        kind: if custom { Kind::Custom } else { Kind::Typed },
        key_enc: key.clone().unwrap_or_else(|| stand_in(&d.key)),
        value_enc: value.clone().unwrap_or_else(|| stand_in(&d.value)),
        key: key.map(Arc::new),
        value: value.map(Arc::new),
        raw_versioned: false,
    }
}

impl Plan {
    /// The record key of a stored pair (multimap: key and value together).
    fn record_key(&self, multimap: bool, k: &[u8], v: &[u8]) -> Result<Vec<u8>, NErr> {
        let bad = |e: String| NErr::Corrupt(format!("a stored key does not match its type: {e}"));
        let mut out = Vec::with_capacity(k.len() + v.len() + 4);
        self.key_enc.enc(k, &mut out, !multimap).map_err(bad)?;
        if multimap {
            self.value_enc.enc(v, &mut out, true).map_err(bad)?;
        }
        Ok(out)
    }

    /// The stored (key, value) of a record (inverse of `record_key`).
    fn stored(
        &self,
        multimap: bool,
        key: &[u8],
        value: &[u8],
    ) -> Result<(Vec<u8>, Vec<u8>), String> {
        let mut pos = 0;
        let k = self.key_enc.dec(key, &mut pos, !multimap)?;
        let v = if multimap {
            self.value_enc.dec(key, &mut pos, true)?
        } else {
            value.to_vec()
        };
        if pos != key.len() {
            return Err("trailing bytes after the encoded key".into());
        }
        Ok((k, v))
    }
}

fn desc_to_py<'py>(py: Python<'py>, d: &TableDesc, format: u8) -> PyResult<Bound<'py, PyDict>> {
    let out = PyDict::new(py);
    out.set_item("name", &d.name)?;
    out.set_item("multimap", d.multimap)?;
    out.set_item("kind", plan(format, d).kind.as_str())?;
    for (field, t) in [("key", &d.key), ("value", &d.value)] {
        let td = PyDict::new(py);
        td.set_item("name", &t.name)?;
        td.set_item("class", &t.class)?;
        td.set_item("width", t.width)?;
        // Only built-in composites have a tuple layout to speak of.
        let composite = t.class != "UserDefined" && is_composite(&t.name);
        td.set_item("legacy", composite && legacy_tuples(format, t))?;
        out.set_item(field, td)?;
    }
    Ok(out)
}

fn desc_from_py(d: &Bound<'_, PyDict>) -> PyResult<TableDesc> {
    let get = |k: &str| -> PyResult<Bound<'_, PyAny>> {
        d.get_item(k)?
            .ok_or_else(|| PyValueError::new_err(format!("table description lacks {k:?}")))
    };
    let ty = |k: &str| -> PyResult<TypeDesc> {
        let t = get(k)?;
        let t = t
            .cast::<PyDict>()
            .map_err(|_| PyValueError::new_err("a type description must be a dict"))?;
        let item = |f: &str| {
            t.get_item(f)
                .ok()
                .flatten()
                .ok_or_else(|| PyValueError::new_err(format!("type lacks {f:?}")))
        };
        Ok(TypeDesc {
            name: item("name")?.extract()?,
            class: item("class")?.extract()?,
            width: item("width")?.extract()?,
            legacy: t
                .get_item("legacy")
                .ok()
                .flatten()
                .map(|x| x.extract::<bool>())
                .transpose()?,
        })
    };
    Ok(TableDesc {
        name: get("name")?.extract()?,
        multimap: get("multimap")
            .map(|m| m.extract::<bool>().unwrap_or(false))
            .unwrap_or(false),
        key: ty("key")?,
        value: ty("value")?,
        exact: d
            .get_item("exact")?
            .map(|x| x.extract::<bool>())
            .transpose()?
            .unwrap_or(false),
        bytewise: d
            .get_item("bytewise")?
            .map(|x| x.extract::<Vec<String>>())
            .transpose()?
            .unwrap_or_default(),
    })
}

enum ReaderImpl {
    V1(v1::Reader),
    V2(v2::Reader),
    V4(v4::Reader),
}

macro_rules! each {
    ($e:expr, $r:ident => $body:expr) => {
        match $e {
            ReaderImpl::V1($r) => $body,
            ReaderImpl::V2($r) => $body,
            ReaderImpl::V4($r) => $body,
        }
    };
}

struct SortState {
    sorter: Sorter,
    last: Option<Vec<u8>>,
}

struct ReaderState {
    reader: Option<ReaderImpl>,
    sorted: HashMap<String, SortState>,
}

/// A redb source at one snapshot (one read transaction); never modifies the file.
#[pyclass(module = "statemigrate._native")]
pub struct RedbReader {
    format: u8,
    state: Mutex<ReaderState>,
}

fn closed() -> NErr {
    NErr::Other("the reader is closed".into())
}

impl ReaderState {
    fn reader(&self) -> Result<&ReaderImpl, NErr> {
        self.reader.as_ref().ok_or_else(closed)
    }

    fn read(
        &mut self,
        format: u8,
        d: &TableDesc,
        after: Option<&[u8]>,
        max_records: usize,
        max_bytes: usize,
    ) -> Result<Vec<OwnedRec>, NErr> {
        let ReaderState { reader, sorted } = self;
        let r = reader.as_ref().ok_or_else(closed)?;
        each!(r, x => read_table(x, sorted, format, d, after, max_records, max_bytes))
    }
}

/// One batch of a table strictly after `after`, from any snapshot.
fn read_table<S: Snapshot>(
    r: &S,
    sorted: &mut HashMap<String, SortState>,
    format: u8,
    d: &TableDesc,
    after: Option<&[u8]>,
    max_records: usize,
    max_bytes: usize,
) -> Result<Vec<OwnedRec>, NErr> {
    let p = plan(format, d);
    match p.kind {
        Kind::Versioned if p.raw_versioned => {
            let start = after.map_or(RBound::Unbounded, RBound::Excluded);
            let pairs = r.read_raw(d, None, None, start, max_records, max_bytes)?;
            let mut out = Vec::with_capacity(pairs.len());
            for (k, v) in pairs {
                // Legacy (u64, &[u8]): u32 length of the first element (8), the u64, the bytes.
                if v.len() < 12 {
                    return Err(NErr::Corrupt(format!(
                        "a versioned value of table {:?} is too short",
                        d.name
                    )));
                }
                let ver = u64::from_le_bytes(v[4..12].try_into().unwrap());
                out.push((k, v[12..].to_vec(), ver));
            }
            Ok(out)
        }
        Kind::Plain | Kind::Versioned => r.read_plain(
            &d.name,
            p.kind == Kind::Versioned,
            after,
            max_records,
            max_bytes,
        ),
        Kind::Typed => {
            // A key that is no encoding of the table's type (a bisection bound, say)
            // starts from the beginning; records up to it are skipped by encoding.
            let start = after.and_then(|a| p.stored(d.multimap, a, b"").ok());
            // A multimap resumed inside a key starts at that key and skips by encoding.
            let mut from: RBound<Vec<u8>> = match start {
                Some((k, _)) if d.multimap => RBound::Included(k),
                Some((k, _)) => RBound::Excluded(k),
                None => RBound::Unbounded,
            };
            let mut out = Vec::new();
            loop {
                let b = match &from {
                    RBound::Included(k) => RBound::Included(k.as_slice()),
                    RBound::Excluded(k) => RBound::Excluded(k.as_slice()),
                    RBound::Unbounded => RBound::Unbounded,
                };
                let pairs =
                    r.read_raw(d, p.key.clone(), p.value.clone(), b, max_records, max_bytes)?;
                let Some(last) = pairs.last().map(|(k, _)| k.clone()) else {
                    break;
                };
                for (k, v) in &pairs {
                    let rk = p.record_key(d.multimap, k, v)?;
                    if let Some(a) = after {
                        if rk.as_slice() <= a {
                            continue;
                        }
                    }
                    out.push((rk, if d.multimap { Vec::new() } else { v.clone() }, 0));
                }
                if !out.is_empty() {
                    break;
                }
                from = RBound::Excluded(last);
            }
            // A multimap batch ends after a whole key's values; the next batch resumes
            // inside the key, so the batch is cut at exactly `max_records`.
            out.truncate(max_records);
            Ok(out)
        }
        Kind::Custom => {
            let resume = sorted
                .get(&d.name)
                .map(|s| s.last.as_deref() == after)
                .unwrap_or(false);
            if !resume {
                let mut sorter = Sorter::new();
                r.scan_raw(d, &mut |k: &[u8], v: &[u8]| {
                    let rk = p.record_key(d.multimap, k, v)?;
                    sorter.push(&rk, if d.multimap { b"" } else { v })
                })?;
                sorter.finish()?;
                let mut st = SortState { sorter, last: None };
                if let Some(a) = after {
                    // Skip to the resume point.
                    loop {
                        match st.sorter.next()? {
                            None => break,
                            Some((k, v)) if k.as_slice() > a => {
                                // Put back by yielding it first below.
                                st.last = Some(a.to_vec());
                                let mut out = vec![(k.clone(), v, 0)];
                                fill(&mut st, &mut out, max_records, max_bytes)?;
                                st.last = out.last().map(|r| r.0.clone());
                                sorted.insert(d.name.clone(), st);
                                return Ok(out);
                            }
                            Some(_) => {}
                        }
                    }
                }
                st.last = after.map(|a| a.to_vec());
                sorted.insert(d.name.clone(), st);
            }
            let st = sorted.get_mut(&d.name).unwrap();
            let mut out = Vec::new();
            fill(st, &mut out, max_records, max_bytes)?;
            st.last = out.last().map(|r| r.0.clone()).or(st.last.take());
            if out.is_empty() {
                sorted.remove(&d.name);
            }
            Ok(out)
        }
    }
}

fn fill(
    st: &mut SortState,
    out: &mut Vec<OwnedRec>,
    max_records: usize,
    max_bytes: usize,
) -> Result<(), NErr> {
    let mut size: usize = out.iter().map(|r| r.0.len() + r.1.len()).sum();
    while out.len() < max_records && size < max_bytes {
        match st.sorter.next()? {
            Some((k, v)) => {
                size += k.len() + v.len();
                out.push((k, v, 0));
            }
            None => break,
        }
    }
    Ok(())
}

fn recs_to_py<'py>(
    py: Python<'py>,
    recs: Vec<OwnedRec>,
    versioned: bool,
) -> PyResult<Bound<'py, PyList>> {
    let items: Vec<Bound<'py, PyTuple>> = recs
        .into_iter()
        .map(|(k, v, ver)| {
            let k = PyBytes::new(py, &k);
            let v = PyBytes::new(py, &v);
            if versioned {
                PyTuple::new(
                    py,
                    [
                        k.into_any(),
                        v.into_any(),
                        ver.into_pyobject(py)?.into_any(),
                    ],
                )
            } else {
                PyTuple::new(py, [k, v])
            }
        })
        .collect::<PyResult<_>>()?;
    PyList::new(py, items)
}

#[pymethods]
impl RedbReader {
    /// Open `path` (a redb file of `format` 1, 2 or 3) read-only at one snapshot.
    #[new]
    fn new(py: Python<'_>, path: PathBuf, format: u8) -> PyResult<Self> {
        let reader = detach(py, || -> Result<ReaderImpl, NErr> {
            Ok(match format {
                1 => ReaderImpl::V1(v1::Reader::open(&path)?),
                2 => ReaderImpl::V2(v2::Reader::open(&path)?),
                3 => ReaderImpl::V4(v4::Reader::open(&path)?),
                v => return Err(NErr::Unsupported(v)),
            })
        })?;
        Ok(RedbReader {
            format,
            state: Mutex::new(ReaderState {
                reader: Some(reader),
                sorted: HashMap::new(),
            }),
        })
    }

    #[getter]
    fn format(&self) -> u8 {
        self.format
    }

    /// Every table and multimap table (not the metadata table), as dicts.
    fn list_tables<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let descs = detach(py, || {
            let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let r = st.reader()?;
            each!(r, x => x.list_tables())
        })?;
        descs
            .iter()
            .map(|d| desc_to_py(py, d, self.format))
            .collect()
    }

    /// The `__statemigrate__` table's entries.
    fn metadata(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyBytes>)>> {
        let meta = detach(py, || {
            let st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            let r = st.reader()?;
            each!(r, x => x.metadata())
        })?;
        Ok(meta
            .into_iter()
            .map(|(k, v)| (k, PyBytes::new(py, &v).unbind()))
            .collect())
    }

    /// One batch of `table` (a dict from `list_tables`) strictly after `after`.
    #[pyo3(signature = (table, after=None, max_records=10000, max_bytes=8388608))]
    fn read_batch<'py>(
        &self,
        py: Python<'py>,
        table: &Bound<'py, PyDict>,
        after: Option<Vec<u8>>,
        max_records: usize,
        max_bytes: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let d = desc_from_py(table)?;
        let format = self.format;
        let recs = detach(py, || {
            let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            st.read(
                format,
                &d,
                after.as_deref(),
                max_records.max(1),
                max_bytes.max(1),
            )
        })?;
        recs_to_py(py, recs, plan(format, &d).kind == Kind::Versioned)
    }

    /// Release the snapshot and the file.
    fn close(&self, py: Python<'_>) {
        // Closing never raises: a damaged file may make redb fail even here.
        let _ = detach(py, || {
            let mut st = self.state.lock().unwrap_or_else(PoisonError::into_inner);
            st.sorted.clear();
            st.reader = None;
            Ok(())
        });
    }
}

enum WriterImpl {
    V2(v2::Writer),
    V4(v4::Writer),
}

macro_rules! each_w {
    ($e:expr, $w:ident => $body:expr) => {
        match $e {
            WriterImpl::V2($w) => $body,
            WriterImpl::V4($w) => $body,
        }
    };
}

/// A redb store being written (format 3 through redb 4.x, or format 2 through redb 2.6).
#[pyclass(module = "statemigrate._native")]
pub struct RedbWriter {
    format: u8,
    /// Written through redb 2.6 (format 2, or format 3 as redb 2.6 writes it).
    redb2: bool,
    inner: Mutex<Option<WriterImpl>>,
    /// Custom-order tables being read back in byte order (cleared by every write).
    sorted: Mutex<HashMap<String, SortState>>,
}

type MetaUpdates = Vec<(String, Option<Vec<u8>>)>;

fn wclosed() -> NErr {
    NErr::Other("the writer is closed".into())
}

#[pymethods]
impl RedbWriter {
    /// Create (`create=True`, the path must not exist) or open a store of `format` 2 or 3.
    /// `redb2` writes a format-3 file through redb 2.6 (as its format-3 option does),
    /// which redb 2.6 still opens (redb 3.0 and later change its allocator state).
    #[new]
    #[pyo3(signature = (path, format, create, redb2=false))]
    fn new(py: Python<'_>, path: PathBuf, format: u8, create: bool, redb2: bool) -> PyResult<Self> {
        let w = detach(py, || -> Result<WriterImpl, NErr> {
            Ok(match (format, create) {
                (3, true) if redb2 => WriterImpl::V2(v2::Writer::create_format3(&path)?),
                (3, false) if redb2 => WriterImpl::V2(v2::Writer::open(&path)?),
                (2, true) => WriterImpl::V2(v2::Writer::create(&path)?),
                (2, false) => WriterImpl::V2(v2::Writer::open(&path)?),
                (3, true) => WriterImpl::V4(v4::Writer::create(&path)?),
                (3, false) => WriterImpl::V4(v4::Writer::open(&path)?),
                (v, _) => {
                    return Err(NErr::Refused(format!(
                        "redb file format {v} cannot be written"
                    )))
                }
            })
        })?;
        let redb2 = matches!(w, WriterImpl::V2(_));
        Ok(RedbWriter {
            format,
            redb2,
            inner: Mutex::new(Some(w)),
            sorted: Mutex::new(HashMap::new()),
        })
    }

    #[getter]
    fn format(&self) -> u8 {
        self.format
    }

    fn list_tables<'py>(&self, py: Python<'py>) -> PyResult<Vec<Bound<'py, PyDict>>> {
        let descs = detach(py, || {
            let g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let w = g.as_ref().ok_or_else(wclosed)?;
            each_w!(w, x => x.list_tables())
        })?;
        descs
            .iter()
            .map(|d| desc_to_py(py, d, self.format))
            .collect()
    }

    fn metadata(&self, py: Python<'_>) -> PyResult<Vec<(String, Py<PyBytes>)>> {
        let meta = detach(py, || {
            let g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let w = g.as_ref().ok_or_else(wclosed)?;
            each_w!(w, x => x.metadata())
        })?;
        Ok(meta
            .into_iter()
            .map(|(k, v)| (k, PyBytes::new(py, &v).unbind()))
            .collect())
    }

    /// The kind (`plain`, `versioned`, `typed`, `custom`) a table description gets.
    fn kind_of(&self, table: &Bound<'_, PyDict>) -> PyResult<&'static str> {
        Ok(plan(
            self.format,
            &target_desc(self.format, self.redb2, &desc_from_py(table)?).0,
        )
        .kind
        .as_str())
    }

    /// Create an empty table: `kind` `plain`/`versioned`, or `typed` with the stored types in `table`.
    fn create_table(&self, py: Python<'_>, table: &Bound<'_, PyDict>, kind: &str) -> PyResult<()> {
        let d = target_desc(self.format, self.redb2, &desc_from_py(table)?).0;
        let k = match kind {
            "plain" => v4::TableKindN::Plain,
            "versioned" if native_versioned(self.redb2, &d) => v4::TableKindN::Versioned,
            _ => v4::TableKindN::Typed,
        };
        detach(py, || {
            let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let w = g.as_mut().ok_or_else(wclosed)?;
            match w {
                WriterImpl::V2(x) => x.create_table(
                    &d,
                    match k {
                        v4::TableKindN::Plain => v2::TableKindN::Plain,
                        v4::TableKindN::Versioned => v2::TableKindN::Versioned,
                        v4::TableKindN::Typed => v2::TableKindN::Typed,
                    },
                ),
                WriterImpl::V4(x) => x.create_table(&d, k),
            }
        })?;
        Ok(())
    }

    /// Commit `records` (in key order) into `table` with `metadata` updates (None deletes), atomically.
    ///
    /// `kind` is `plain`, `versioned` (records carry a version), or `typed`/`custom`
    /// (record keys are decoded back to the stored types described by `table`).
    fn write_batch(
        &self,
        py: Python<'_>,
        table: &Bound<'_, PyDict>,
        kind: &str,
        records: &Bound<'_, PyList>,
        metadata: MetaUpdates,
    ) -> PyResult<()> {
        let (d, relayout) = target_desc(self.format, self.redb2, &desc_from_py(table)?);
        let versioned = kind == "versioned";
        let want = if versioned { 3 } else { 2 };
        let mut owned: Vec<(Bound<'_, PyBytes>, Bound<'_, PyBytes>, u64)> =
            Vec::with_capacity(records.len());
        for item in records.iter() {
            let t = item
                .cast_into::<PyTuple>()
                .map_err(|_| PyValueError::new_err("a record must be a tuple"))?;
            if t.len() != want {
                return Err(PyValueError::new_err(format!(
                    "a {kind} record has {want} fields, got {}",
                    t.len()
                )));
            }
            let k = t
                .get_item(0)?
                .cast_into::<PyBytes>()
                .map_err(|_| PyValueError::new_err("a key must be bytes"))?;
            let v = t
                .get_item(1)?
                .cast_into::<PyBytes>()
                .map_err(|_| PyValueError::new_err("a value must be bytes"))?;
            let ver = if versioned {
                t.get_item(2)?.extract::<u64>()?
            } else {
                0
            };
            owned.push((k, v, ver));
        }
        let recs: Vec<(&[u8], &[u8], u64)> = owned
            .iter()
            .map(|(k, v, ver)| (k.as_bytes(), v.as_bytes(), *ver))
            .collect();
        let (format, redb2) = (self.format, self.redb2);
        let kind = kind.to_string();
        detach(py, || -> Result<(), NErr> {
            self.sorted
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
            let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let w = g.as_mut().ok_or_else(wclosed)?;
            if kind == "plain" || (versioned && native_versioned(redb2, &d)) {
                return each_w!(w, x => x.write_plain(&d.name, versioned, &recs, &metadata));
            }
            if versioned {
                let legacy = legacy_tuples(format, &d.value);
                let pairs: Pairs = recs
                    .iter()
                    .map(|(k, v, ver)| (k.to_vec(), versioned_value(legacy, *ver, v)))
                    .collect();
                return each_w!(w, x => x.write_raw(&d, None, None, &pairs, &metadata));
            }
            let p = plan(format, &d);
            // Values are re-laid here; keys (and multimap values) were decoded into the new
            // layout, or are custom-order stored bytes, which `problems` keeps from re-laying.
            let value_relayout = if d.multimap { &None } else { &relayout[1] };
            let mut pairs = Vec::with_capacity(recs.len());
            for (k, v, _) in &recs {
                let mut pair = p.stored(d.multimap, k, v).map_err(|e| {
                    NErr::Refused(format!(
                        "key {} of table {:?} is not a valid {}: {e}",
                        hex(k),
                        d.name,
                        d.key.name
                    ))
                })?;
                pair.1 = apply_relayout(value_relayout, &pair.1).map_err(|e| {
                    NErr::Refused(format!(
                        "a value of table {:?} cannot be re-laid as a {}: {e}",
                        d.name, d.value.name
                    ))
                })?;
                pairs.push(pair);
            }
            let key_order = match &p.key {
                Some(k) => Some(k.clone()),
                None => custom_order(format, &d, &d.key)?,
            };
            let value_order = match &p.value {
                Some(v) => Some(v.clone()),
                None if d.multimap => custom_order(format, &d, &d.value)?,
                None => None,
            };
            each_w!(w, x => x.write_raw(&d, key_order, value_order, &pairs, &metadata))
        })?;
        Ok(())
    }

    /// One batch of `table` as committed so far, strictly after `after` (in-place upgrades).
    #[pyo3(signature = (table, after=None, max_records=10000, max_bytes=8388608))]
    fn read_batch<'py>(
        &self,
        py: Python<'py>,
        table: &Bound<'py, PyDict>,
        after: Option<Vec<u8>>,
        max_records: usize,
        max_bytes: usize,
    ) -> PyResult<Bound<'py, PyList>> {
        let format = self.format;
        let d = target_desc(format, self.redb2, &desc_from_py(table)?).0;
        let recs = detach(py, || {
            let g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let w = g.as_ref().ok_or_else(wclosed)?;
            let mut sorted = self.sorted.lock().unwrap_or_else(PoisonError::into_inner);
            let (after, n, b) = (after.as_deref(), max_records.max(1), max_bytes.max(1));
            match w {
                WriterImpl::V2(x) => read_table(x, &mut sorted, format, &d, after, n, b),
                WriterImpl::V4(x) => read_table(x, &mut sorted, format, &d, after, n, b),
            }
        })?;
        recs_to_py(py, recs, plan(format, &d).kind == Kind::Versioned)
    }

    /// Drop a table (nothing if it does not exist) and apply `metadata` updates, in one commit.
    fn drop_table(&self, py: Python<'_>, name: String, metadata: MetaUpdates) -> PyResult<()> {
        detach(py, || {
            self.sorted
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
            let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let w = g.as_mut().ok_or_else(wclosed)?;
            each_w!(w, x => x.drop_table(&name, &metadata))
        })?;
        Ok(())
    }

    /// Make every commit so far durable.
    fn sync(&self, py: Python<'_>) -> PyResult<()> {
        detach(py, || {
            let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let w = g.as_mut().ok_or_else(wclosed)?;
            each_w!(w, x => x.sync())
        })?;
        Ok(())
    }

    fn put_metadata(&self, py: Python<'_>, metadata: MetaUpdates) -> PyResult<()> {
        detach(py, || {
            self.sorted
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .clear();
            let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let w = g.as_mut().ok_or_else(wclosed)?;
            each_w!(w, x => x.put_metadata(&metadata))
        })?;
        Ok(())
    }

    /// A durable commit, then compaction.
    fn finish(&self, py: Python<'_>) -> PyResult<()> {
        detach(py, || {
            let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            let w = g.as_mut().ok_or_else(wclosed)?;
            each_w!(w, x => x.finish())
        })?;
        Ok(())
    }

    fn close(&self, py: Python<'_>) {
        let _ = detach(py, || {
            let mut g = self.inner.lock().unwrap_or_else(PoisonError::into_inner);
            *g = None;
            Ok(())
        });
    }
}

fn hex(b: &[u8]) -> String {
    let s: String = b.iter().take(32).map(|x| format!("{x:02x}")).collect();
    if s.is_empty() {
        "(empty)".into()
    } else {
        s
    }
}

/// redb's own fastest load (one transaction, `&[u8] -> &[u8]`), for the benchmark ceiling.
#[pyfunction]
pub fn redb_bulk_load(
    py: Python<'_>,
    path: PathBuf,
    records: u64,
    key_len: usize,
    value_len: usize,
) -> PyResult<()> {
    detach(py, || v4::bulk_load(&path, records, key_len, value_len))?;
    Ok(())
}

/// redb's own full scan of every plain table, for the benchmark ceiling: (records, bytes).
#[pyfunction]
pub fn redb_full_scan(py: Python<'_>, path: PathBuf) -> PyResult<(u64, u64)> {
    Ok(detach(py, || v4::full_scan(&path))?)
}

/// The kind (`plain`, `versioned`, `typed`, `custom`) a table description gets from
/// the writer of `format` (through redb 2.6 when `redb2`), without a file.
#[pyfunction]
#[pyo3(signature = (table, format, redb2=false))]
pub fn redb_table_kind(
    table: &Bound<'_, PyDict>,
    format: u8,
    redb2: bool,
) -> PyResult<&'static str> {
    Ok(plan(
        format,
        &target_desc(format, redb2 || format < 3, &desc_from_py(table)?).0,
    )
    .kind
    .as_str())
}

/// Why the writer of `format` (through redb 2.6 when `redb2`) cannot write a table
/// as described, without a file (to refuse before anything is created): one
/// `(part, type name, reason)` per problem, the reason naming what would allow it.
#[pyfunction]
#[pyo3(signature = (table, format, redb2=false))]
pub fn redb_table_problems(
    table: &Bound<'_, PyDict>,
    format: u8,
    redb2: bool,
) -> PyResult<Vec<(String, String, String)>> {
    Ok(problems(format, redb2 || format < 3, &desc_from_py(table)?))
}

fn problems(format: u8, redb2: bool, d: &TableDesc) -> Vec<(String, String, String)> {
    let (t, relayout) = target_desc(format, redb2, d);
    let mut out = Vec::new();
    let p = plan(format, &t);
    for (i, (part, ty)) in [("key", &t.key), ("value", &t.value)]
        .into_iter()
        .enumerate()
    {
        let mut why = Vec::new();
        let writable = match ty.class.as_str() {
            "Internal" | "UserDefined" => true,
            "Internal2" | "Internal3" => !redb2,
            _ => false,
        };
        if !writable {
            let by = if redb2 {
                "redb 2.6, which writes this file,"
            } else {
                "this redb"
            };
            why.push(format!(
                "its classification {} cannot be written by {by}",
                ty.class
            ));
        }
        let ordered = i == 0 || t.multimap;
        let raw = if i == 0 {
            p.key.is_none()
        } else {
            p.value.is_none()
        };
        if ordered && raw && p.kind == Kind::Custom {
            why.extend(order_problem(format, &t, ty));
        }
        match &relayout[i] {
            // A custom-order table's records are its stored bytes: re-laid, they would
            // no longer be the source's records (and no verification could pass).
            Some(_) if ordered && raw => why.push(
                "changes its tuple layout in this file format, and the records of a custom-order table are its stored bytes; convert it in its own file format (no --redb-format)".to_string(),
            ),
            Some((Err(e), _)) if !ordered => why.push(format!(
                "cannot have its tuples re-laid for this file format ({e}); in its own file format (no --redb-format) it needs no re-laying"
            )),
            _ => {}
        }
        out.extend(
            why.into_iter()
                .map(|w| (part.to_string(), ty.name.clone(), w)),
        );
    }
    out
}

/// Why the order of a custom-order part cannot be known, if it cannot.
fn order_problem(format: u8, d: &TableDesc, t: &TypeDesc) -> Option<String> {
    let asserted = |n: &str| d.bytewise.iter().any(|b| b == n);
    if asserted(&t.name) {
        return None;
    }
    if !is_composite(&t.name) {
        return Some(if t.class == "UserDefined" {
            format!("is user-defined and its order may not be bytewise; if it is, pass --bytewise-key '{}'", t.name)
        } else {
            "is a type the redb writer cannot produce".to_string()
        });
    }
    let Some(e) = TypeExpr::parse_with(&t.name, legacy_tuples(format, t), &|_| true) else {
        return Some("is a type the redb writer cannot produce".to_string());
    };
    let mut unasserted: Vec<&str> = e.customs().into_iter().filter(|n| !asserted(n)).collect();
    unasserted.sort_unstable();
    unasserted.dedup();
    if !unasserted.is_empty() {
        let opts: Vec<String> = unasserted
            .iter()
            .map(|n| format!("--bytewise-key '{n}'"))
            .collect();
        return Some(format!(
            "holds user-defined {} whose order may not be bytewise; if it is, pass {}",
            unasserted.join(", "),
            opts.join(" ")
        ));
    }
    e.resolve(t.width).err().map(|why| {
        format!("its order cannot be known ({why}); if the whole type's order is bytewise, pass --bytewise-key '{}'", t.name)
    })
}

/// The order-preserving encoding of a stored key of redb type `type_name` (for tests and tools).
#[pyfunction]
#[pyo3(signature = (type_name, stored, legacy_tuples=false))]
pub fn redb_encode_key(type_name: &str, stored: &[u8], legacy_tuples: bool) -> PyResult<Vec<u8>> {
    let t = TypeExpr::parse(type_name, legacy_tuples)
        .ok_or_else(|| PyValueError::new_err(format!("not a built-in key type: {type_name}")))?;
    t.encode(stored).map_err(PyValueError::new_err)
}

pub fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    let py = m.py();
    m.add_class::<RedbReader>()?;
    m.add_class::<RedbWriter>()?;
    m.add_function(wrap_pyfunction!(redb_bulk_load, m)?)?;
    m.add_function(wrap_pyfunction!(redb_full_scan, m)?)?;
    m.add_function(wrap_pyfunction!(redb_encode_key, m)?)?;
    m.add_function(wrap_pyfunction!(redb_table_kind, m)?)?;
    m.add_function(wrap_pyfunction!(redb_table_problems, m)?)?;
    m.add("RedbBusyError", py.get_type::<RedbBusyError>())?;
    m.add("RedbCorruptError", py.get_type::<RedbCorruptError>())?;
    m.add(
        "RedbUnsupportedError",
        py.get_type::<RedbUnsupportedError>(),
    )?;
    m.add("RedbRefusedError", py.get_type::<RedbRefusedError>())?;
    m.add("RedbError", py.get_type::<RedbError>())?;
    Ok(())
}
