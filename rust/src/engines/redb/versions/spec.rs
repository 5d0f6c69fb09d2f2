// The raw wrapper types' stored-type spec, the probe that finds a table's stored
// types, and redb's errors classified: compiled once per redb version (`include!`d by
// `binding!`, see `mod.rs`).
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
use std::sync::Arc;

use redb::{MultimapTableDefinition, TableDefinition};

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
    pub static SPEC: RefCell<RawSpec> = RefCell::new(probe_spec());
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
            NErr::busy("the database is open in another process")
        }
        redb::Error::UpgradeRequired(v) => NErr::unsupported(v),
        redb::Error::Corrupted(s) => NErr::corrupt(s),
        redb::Error::Io(io) => {
            if io.kind() == std::io::ErrorKind::WouldBlock {
                NErr::busy("the database is open in another process")
            } else if io.kind() == std::io::ErrorKind::UnexpectedEof {
                NErr::corrupt("the file is truncated")
            } else {
                NErr::other(io.to_string())
            }
        }
        other => NErr::other(other.to_string()),
    }
}

/// The stored key and value types of a table, found by opening it with the probe
/// type and reading redb's mismatch errors.
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
                    found.ok_or_else(|| NErr::other("probe type matched a stored table"))?;
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
                    NErr::other("type definition changed before names matched")
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
    Err(NErr::other(
        "could not determine the table's stored types",
    ))
}

/// The stored key and value types of table `name` (a multimap table when `multimap`).
fn probe_table(
    txn: &RT<'_>,
    name: &str,
    multimap: bool,
) -> Result<(redb::TypeName, Option<usize>, redb::TypeName, Option<usize>), NErr> {
    if multimap {
        probe_types(&|| {
            txn.open_multimap_table(MultimapTableDefinition::<RawKey, RawValue>::new(name))
                .map(|_| ())
        })
    } else {
        probe_types(&|| {
            txn.open_table(TableDefinition::<RawKey, RawValue>::new(name))
                .map(|_| ())
        })
    }
}
