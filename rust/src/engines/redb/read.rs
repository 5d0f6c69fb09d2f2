//! One batch of a table from any snapshot: read in redb's order where the plan's
//! encoding keeps it, or through an external sort (custom-order tables).
use std::collections::{HashMap, HashSet};
use std::ops::Bound as RBound;
use std::sync::Arc;

use super::desc::{OwnedRec, PairSink, Pairs, RecordSink, TableDesc};
use super::errors::NErr;
use super::plan::{plan, Kind};
use super::types::TypeExpr;
use crate::batch::{Limits, Window};
use crate::sort::{default_run_bytes, Sorter};

/// A typed table's key and value orders: their order-preserving encodings (`None`:
/// bytewise).
pub type Orders = (Option<Arc<TypeExpr>>, Option<Arc<TypeExpr>>);

/// What a table is read from: a reader's snapshot, or a read transaction of a writer's
/// committed state (implemented by each redb version's read transaction).
pub trait Snapshot {
    /// Every table and multimap table (not the metadata table).
    fn tables(&self) -> Result<Vec<TableDesc>, NErr>;
    /// The metadata table's entries.
    fn metadata(&self) -> Result<Vec<(String, Vec<u8>)>, NErr>;
    /// The batch of window `w` of a plain or versioned table.
    fn read_plain(&self, name: &str, versioned: bool, w: Window<'_>)
        -> Result<Vec<OwnedRec>, NErr>;
    /// Every record of a plain or versioned table in key order, lent to `f` in place
    /// (no copy per record: the digest walk).
    fn each_plain(&self, name: &str, versioned: bool, f: &mut RecordSink<'_>) -> Result<(), NErr>;
    /// Stored pairs of a typed table from `start`, in redb's order; `orders` are the
    /// key's and value's order-preserving encodings.
    fn read_raw(
        &self,
        desc: &TableDesc,
        orders: Orders,
        start: RBound<&[u8]>,
        limits: Limits,
    ) -> Result<Pairs, NErr>;
    /// Every stored pair of a typed table, in redb's order.
    fn scan_raw(&self, desc: &TableDesc, f: &mut PairSink<'_>) -> Result<(), NErr>;
    /// The table's stored length (a multimap's: its key-value pairs), exact.
    fn count(&self, desc: &TableDesc) -> Result<u64, NErr>;
}

pub struct SortState {
    sorter: Sorter,
    last: Option<Vec<u8>>,
}

/// The batch of window `w` of a table (strictly after `w.after`), from any snapshot.
pub fn read_table<S: Snapshot>(
    r: &S,
    sorted: &mut HashMap<String, SortState>,
    format: u8,
    d: &TableDesc,
    w: Window<'_>,
) -> Result<Vec<OwnedRec>, NErr> {
    let Window { after, limits } = w;
    let p = plan(format, d);
    match p.kind {
        Kind::Versioned if p.raw_versioned => {
            let start = after.map_or(RBound::Unbounded, RBound::Excluded);
            let pairs = r.read_raw(d, (None, None), start, limits)?;
            let mut out = Vec::with_capacity(pairs.len());
            for (k, v) in pairs {
                // Legacy (u64, &[u8]): u32 length of the first element (8), the u64, the bytes.
                if v.len() < 12 {
                    return Err(NErr::corrupt(format!(
                        "a versioned value of table {:?} is too short",
                        d.name
                    )));
                }
                let ver = u64::from_le_bytes(v[4..12].try_into().unwrap());
                out.push((k, v[12..].to_vec(), ver));
            }
            Ok(out)
        }
        Kind::Plain | Kind::Versioned => r.read_plain(&d.name, p.kind == Kind::Versioned, w),
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
            // Each round must reach keys it has not reached before: a damaged file whose
            // tree leads back to a key already passed would otherwise skip forever.
            let mut reached: HashSet<Vec<u8>> = HashSet::new();
            loop {
                let b = match &from {
                    RBound::Included(k) => RBound::Included(k.as_slice()),
                    RBound::Excluded(k) => RBound::Excluded(k.as_slice()),
                    RBound::Unbounded => RBound::Unbounded,
                };
                let pairs = r.read_raw(d, (p.key.clone(), p.value.clone()), b, limits)?;
                let Some(last) = pairs.last().map(|(k, _)| k.clone()) else {
                    break;
                };
                if !reached.insert(last.clone()) {
                    return Err(NErr::corrupt(format!(
                        "table {:?} leads its reader back to a key it already passed",
                        d.name
                    )));
                }
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
            // inside the key, so the batch is cut at exactly `limits.records`.
            out.truncate(limits.records);
            Ok(out)
        }
        Kind::Custom => {
            let resume = sorted
                .get(&d.name)
                .map(|s| s.last.as_deref() == after)
                .unwrap_or(false);
            if !resume {
                let mut sorter = Sorter::new(default_run_bytes(), None);
                r.scan_raw(d, &mut |k: &[u8], v: &[u8]| {
                    let rk = p.record_key(d.multimap, k, v)?;
                    Ok(sorter.push(&rk, if d.multimap { b"" } else { v })?)
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
                                fill(&mut st, &mut out, limits)?;
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
            fill(st, &mut out, limits)?;
            st.last = out.last().map(|r| r.0.clone()).or(st.last.take());
            if out.is_empty() {
                sorted.remove(&d.name);
            }
            Ok(out)
        }
    }
}

fn fill(st: &mut SortState, out: &mut Vec<OwnedRec>, limits: Limits) -> Result<(), NErr> {
    let mut size: usize = out.iter().map(|r| r.0.len() + r.1.len()).sum();
    while !limits.reached(out.len(), size) {
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
