//! The contract's table digests of an LMDB store, read straight from `data.mdb`.
//!
//! The driver's cursor hands Python one tuple per record, and two such scans cannot
//! run side by side (the GIL). This walk reads the pages of one committed snapshot
//! with plain file reads, in key order, and hashes each record as `crate::digest` does,
//! without the GIL: a store's digests at file-read speed, and both sides of a check at
//! once. It reads only what statemigrate's LMDB layout holds (named databases with
//! byte-ordered keys, values inline or on overflow pages); anything else (duplicate
//! keys, integer or reversed keys, a meta page that no longer names the snapshot, a
//! damaged page) is an error string, and the caller reads through the driver instead,
//! which reports what is wrong in its usual words.
//!
//! Layouts as in `check.rs` (LMDB 0.9's `mdb.c`).
use super::check::{
    nodes, u16_at, u32_at, u64_at, Check, F_BIGDATA, F_DUPDATA, F_SUBDATA, INVALID_PAGE,
    META_MAGIC, NODE_HEADER, PAGE_HEADER, P_BRANCH, P_LEAF, P_LEAF2,
};
use super::pages::PageReader;
use crate::digest::record_hash_into;
use crate::fileio::read_exact_at;
use pyo3::prelude::*;
use std::fs::File;

/// Offsets inside a meta page: the main database's record, the snapshot's txn id.
const META_MAIN_DB: usize = 88;
const META_TXNID: usize = 144;
/// Inside an `MDB_db` record: its flags and its root page.
const DB_FLAGS: usize = 4;
const DB_ROOT: usize = 40;
const DB_SIZE: usize = 48;
const MAX_DEPTH: usize = 64;

/// What the walk hands each leaf node: its key, its value and its node flags.
type Visit<'a> = dyn FnMut(&[u8], &[u8], u16) -> Check<()> + 'a;

struct Pages {
    file: PageReader,
    psize: usize,
    pages: u64,
}

/// `len` bytes of `file` at `at`.
fn read(file: &File, at: u64, len: usize) -> Check<Vec<u8>> {
    let mut buf = vec![0u8; len];
    read_exact_at(file, &mut buf, at)
        .map_err(|e| format!("bytes {at}..{} cannot be read ({e})", at + len as u64))?;
    Ok(buf)
}

impl Pages {
    fn page(&mut self, pgno: u64) -> Check<Vec<u8>> {
        if pgno < 2 || pgno >= self.pages {
            return Err(format!("a link to page {pgno}, outside the file"));
        }
        self.file.numbered(pgno)
    }

    /// Every leaf node of the tree at `root`, in key order: `visit(key, value, flags)`.
    fn walk(&mut self, root: u64, visit: &mut Visit<'_>) -> Check<()> {
        if root == INVALID_PAGE {
            return Ok(());
        }
        let mut stack = vec![(root, 0usize)];
        while let Some((pgno, level)) = stack.pop() {
            if level > MAX_DEPTH {
                return Err(format!(
                    "a tree deeper than {MAX_DEPTH} levels at page {pgno}"
                ));
            }
            let page = self.page(pgno)?;
            let flags = u16_at(&page, 10)?;
            if flags & P_BRANCH != 0 {
                // Children go on the stack last first, so the first is walked first.
                for node in nodes(&page, page.len())?.into_iter().rev() {
                    let child = u16_at(&page, node)? as u64
                        | (u16_at(&page, node + 2)? as u64) << 16
                        | (u16_at(&page, node + 4)? as u64) << 32;
                    stack.push((child, level + 1));
                }
            } else if flags & P_LEAF != 0 && flags & P_LEAF2 == 0 {
                for node in nodes(&page, page.len())? {
                    let size =
                        u16_at(&page, node)? as usize | (u16_at(&page, node + 2)? as usize) << 16;
                    let nflags = u16_at(&page, node + 4)?;
                    let ksize = u16_at(&page, node + 6)? as usize;
                    let data = node + NODE_HEADER + ksize;
                    let key = page
                        .get(node + NODE_HEADER..data)
                        .ok_or("a key runs past its page")?;
                    if nflags & F_BIGDATA != 0 {
                        let first = u64_at(&page, data)?;
                        let end =
                            first.checked_add((PAGE_HEADER + size).div_ceil(self.psize) as u64);
                        if first < 2 || end.is_none_or(|e| e > self.pages) {
                            return Err(format!(
                                "a value on overflow page {first} runs past the file"
                            ));
                        }
                        let value = read(
                            &self.file.file,
                            first * self.psize as u64 + PAGE_HEADER as u64,
                            size,
                        )?;
                        visit(key, &value, nflags)?;
                    } else {
                        let value = page
                            .get(data..data + size)
                            .ok_or("a value runs past its page")?;
                        visit(key, value, nflags)?;
                    }
                }
            } else {
                return Err(format!(
                    "page {pgno} is not a plain branch or leaf (flags {flags:#x})"
                ));
            }
        }
        Ok(())
    }
}

/// One table's `(count, sum, payload bytes)`, or why it cannot be read here.
type TableDigest = (u64, u128, u64);

fn digests(path: &str, txnid: u64, tables: &[(Vec<u8>, bool)]) -> Check<Vec<TableDigest>> {
    let file = File::open(path).map_err(|e| format!("cannot be read ({e})"))?;
    let size = file
        .metadata()
        .map_err(|e| format!("cannot be read ({e})"))?
        .len();
    let head = read(&file, 0, 160)?;
    let psize = u32_at(&head, 40)? as usize;
    if u32_at(&head, 16)? != META_MAGIC || !(512..=1 << 16).contains(&psize) {
        return Err("has no valid meta page".into());
    }
    let mut pages = Pages {
        file: PageReader::new(file, psize),
        psize,
        pages: size / psize as u64,
    };
    // The meta page of the reader's snapshot (LMDB alternates two): gone after two
    // more commits, when the caller reads through the driver instead.
    let mut meta = None;
    for at in [0, psize as u64] {
        let m = read(&pages.file.file, at, 160)?;
        if u32_at(&m, 16)? == META_MAGIC && u64_at(&m, META_TXNID)? == txnid {
            meta = Some(m);
        }
    }
    let meta = meta.ok_or_else(|| format!("no meta page holds transaction {txnid}"))?;
    let mut roots: Vec<Option<u64>> = vec![None; tables.len()];
    pages.walk(
        u64_at(&meta, META_MAIN_DB + DB_ROOT)?,
        &mut |key, value, flags| {
            if flags & F_SUBDATA != 0 {
                if let Some(i) = tables.iter().position(|(name, _)| name.as_slice() == key) {
                    if value.len() < DB_SIZE {
                        return Err("a database record is cut short".into());
                    }
                    // Any flag (duplicates, integer or reversed keys) changes the order or
                    // the records: not the layout this walk reads.
                    if u16_at(value, DB_FLAGS)? != 0 {
                        return Err("a table database has flags this walk does not read".into());
                    }
                    roots[i] = Some(u64_at(value, DB_ROOT)?);
                }
            }
            Ok(())
        },
    )?;
    let mut out = Vec::with_capacity(tables.len());
    let mut buf = Vec::with_capacity(4096);
    for ((name, versioned), root) in tables.iter().zip(roots) {
        let root =
            root.ok_or_else(|| format!("no database {:?}", String::from_utf8_lossy(name)))?;
        let (mut count, mut sum, mut nbytes) = (0u64, 0u128, 0u64);
        let mut last: Vec<u8> = Vec::new();
        pages.walk(root, &mut |key, value, flags| {
            if flags & (F_SUBDATA | F_DUPDATA) != 0 {
                return Err("a table holds a sub-database".into());
            }
            if count > 0 && last.as_slice() >= key {
                return Err("keys out of order".into());
            }
            let (value, version) = if *versioned {
                if value.len() < 8 {
                    return Err("a versioned record is shorter than its 8-byte version".into());
                }
                (
                    &value[8..],
                    Some(u64::from_be_bytes(value[..8].try_into().unwrap())),
                )
            } else {
                (value, None)
            };
            sum = sum.wrapping_add(record_hash_into(&mut buf, key, value, version));
            count += 1;
            nbytes += (key.len() + value.len()) as u64;
            last.clear();
            last.extend_from_slice(key);
            Ok(())
        })?;
        out.push((count, sum, nbytes));
    }
    Ok(out)
}

/// Each of `tables`' `(count, digest sum, payload bytes)` in the snapshot of
/// transaction `txnid` of the LMDB file `path`, read without the driver and without
/// the GIL. Raises `ValueError` naming why the walk cannot read it (then read it
/// through the driver). The caller holds that snapshot (a read transaction, or no
/// writer: a commit meanwhile moves the last transaction id, which it checks after).
#[pyfunction]
pub fn lmdb_digests(
    py: Python<'_>,
    path: String,
    txnid: u64,
    tables: Vec<(Vec<u8>, bool)>,
) -> PyResult<Vec<TableDigest>> {
    py.detach(|| digests(&path, txnid, &tables))
        .map_err(pyo3::exceptions::PyValueError::new_err)
}
