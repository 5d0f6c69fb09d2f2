//! How a batch is written: the table as the writing redb spells it (`target_desc`),
//! and records turned into the stored pairs of its types.
use std::sync::Arc;

use super::desc::{Pairs, TableDesc, TypeDesc};
use super::errors::NErr;
use super::plan::{is_composite, legacy_tuples, plan};
use super::types::TypeExpr;

/// How to re-lay a part's stored bytes (the source's tuple layout to `to_legacy`),
/// or why the type name does not tell how.
pub type Relayout = Option<(Result<TypeExpr, String>, bool)>;

/// A table as a writer writes it: exactly as described when `d.exact` (written back
/// as read), else composite types get the writing redb's own spelling and tuple
/// layout (redb 2.6's when `redb2`, in format 2 or 3; else redb 4.x's, which classifies
/// a composite holding a user-defined type `UserDefined`), so that a file converted
/// from another format opens with the app's plain `TableDefinition` in the redb it
/// targets (not only through `Legacy<T>`). Also returns, for the key and the value,
/// how to re-lay their stored bytes when their layout changes.
pub fn target_desc(format: u8, redb2: bool, d: &TableDesc) -> (TableDesc, [Relayout; 2]) {
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
        NErr::refused(format!(
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
pub fn native_versioned(redb2: bool, d: &TableDesc) -> bool {
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

/// The first bytes of a key in hex, for messages.
fn hex(b: &[u8]) -> String {
    let s: String = b.iter().take(32).map(|x| format!("{x:02x}")).collect();
    if s.is_empty() {
        "(empty)".into()
    } else {
        s
    }
}

/// Which table definition a writer creates a table with.
#[derive(Clone, Copy)]
pub enum TableKind {
    Plain,
    Versioned,
    Typed,
}

/// How a batch reaches the file: as records (a plain table, or a versioned one in the
/// writing redb's own spelling), or as stored pairs with the orders redb compares
/// their keys (and a multimap's values) by.
pub enum Encoded {
    Records,
    Pairs(Pairs, Option<Arc<TypeExpr>>, Option<Arc<TypeExpr>>),
}

/// Encode a batch of `kind` for the target table `d` (from `target_desc`, with its
/// `relayout`): records of typed and custom tables become stored pairs (refused,
/// naming the key, when a record key is no encoding of the table's key type).
pub fn encode_batch(
    format: u8,
    redb2: bool,
    kind: &str,
    d: &TableDesc,
    relayout: &[Relayout; 2],
    recs: &[(&[u8], &[u8], u64)],
) -> Result<Encoded, NErr> {
    let versioned = kind == "versioned";
    if kind == "plain" || (versioned && native_versioned(redb2, d)) {
        return Ok(Encoded::Records);
    }
    if versioned {
        let legacy = legacy_tuples(format, &d.value);
        let pairs: Pairs = recs
            .iter()
            .map(|(k, v, ver)| (k.to_vec(), versioned_value(legacy, *ver, v)))
            .collect();
        return Ok(Encoded::Pairs(pairs, None, None));
    }
    let p = plan(format, d);
    // Values are re-laid here; keys (and multimap values) were decoded into the new
    // layout, or are custom-order stored bytes, which `problems` keeps from re-laying.
    let value_relayout = if d.multimap { &None } else { &relayout[1] };
    let mut pairs = Vec::with_capacity(recs.len());
    for (k, v, _) in recs {
        let mut pair = p.stored(d.multimap, k, v).map_err(|e| {
            NErr::refused(format!(
                "key {} of table {:?} is not a valid {}: {e}",
                hex(k),
                d.name,
                d.key.name
            ))
        })?;
        pair.1 = apply_relayout(value_relayout, &pair.1).map_err(|e| {
            NErr::refused(format!(
                "a value of table {:?} cannot be re-laid as a {}: {e}",
                d.name, d.value.name
            ))
        })?;
        pairs.push(pair);
    }
    let key_order = match &p.key {
        Some(k) => Some(k.clone()),
        None => custom_order(format, d, &d.key)?,
    };
    let value_order = match &p.value {
        Some(v) => Some(v.clone()),
        None if d.multimap => custom_order(format, d, &d.value)?,
        None => None,
    };
    Ok(Encoded::Pairs(pairs, key_order, value_order))
}
