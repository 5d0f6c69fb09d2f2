//! What the binding says about a table: its stored key and value types, and the
//! shapes records and stored pairs travel in.
use super::errors::NErr;

pub type OwnedRec = (Vec<u8>, Vec<u8>, u64);

/// A callback taking each stored pair of a scan.
pub type PairSink<'a> = dyn FnMut(&[u8], &[u8]) -> Result<(), NErr> + 'a;

/// Stored (key, value) pairs.
/// Receives each record of a plain or versioned table in place: key, value, version.
pub type RecordSink<'a> = dyn FnMut(&[u8], &[u8], u64) -> Result<(), NErr> + 'a;

pub type Pairs = Vec<(Vec<u8>, Vec<u8>)>;

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
