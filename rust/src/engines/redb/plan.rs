//! How a table's records map to the state model: its kind, and the encodings of its
//! keys (and a multimap's values) that keep redb's order.
use std::sync::Arc;

use super::desc::{TableDesc, TypeDesc};
use super::errors::NErr;
use super::types::TypeExpr;

/// How a table's records map to the state model.
#[derive(Debug, Clone, Copy, PartialEq)]
pub enum Kind {
    Plain,
    Versioned,
    Typed,
    Custom,
}

impl Kind {
    pub fn as_str(self) -> &'static str {
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
pub struct Plan {
    pub kind: Kind,
    pub key: Option<Arc<TypeExpr>>,
    pub value: Option<Arc<TypeExpr>>,
    pub key_enc: TypeExpr,
    pub value_enc: TypeExpr,
    /// A versioned table in redb 2.6's spelling inside a format-3 file (read raw).
    pub raw_versioned: bool,
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
pub fn legacy_tuples(format: u8, t: &TypeDesc) -> bool {
    t.legacy.unwrap_or_else(|| {
        // User-defined types inside take the width the tuple's own width leaves them.
        let tuple =
            || TypeExpr::parse_with(&t.name, true, &|_| true).and_then(|e| e.resolve(t.width).ok());
        format < 3
            || (t.class == "Internal"
                && matches!(tuple(), Some(e @ TypeExpr::Tuple(..)) if e.fixed_width().is_none()))
    })
}

pub fn is_composite(name: &str) -> bool {
    (name.starts_with('(') && name != "()")
        || name.starts_with("Option<")
        || name.starts_with("Vec<")
        || name.starts_with('[')
}

pub fn plan(format: u8, d: &TableDesc) -> Plan {
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
    pub fn record_key(&self, multimap: bool, k: &[u8], v: &[u8]) -> Result<Vec<u8>, NErr> {
        let bad = |e: String| NErr::corrupt(format!("a stored key does not match its type: {e}"));
        let mut out = Vec::with_capacity(k.len() + v.len() + 4);
        self.key_enc.enc(k, &mut out, !multimap).map_err(bad)?;
        if multimap {
            self.value_enc.enc(v, &mut out, true).map_err(bad)?;
        }
        Ok(out)
    }

    /// The stored (key, value) of a record (inverse of `record_key`).
    pub fn stored(
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
