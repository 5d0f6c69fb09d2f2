//! A structural check of an LMDB `data.mdb`, before LMDB maps it.
//!
//! LMDB trusts its file: a node whose size field was damaged makes it read past the
//! end of the file, inside its memory map, and the process dies of SIGBUS (no error
//! can be raised). This walk visits every page the newest meta page reaches (the free
//! database and the main database, every named database below it, every duplicate
//! sub-tree) and checks what LMDB would later dereference without checking: page
//! numbers inside the file, pointers and nodes inside their page, overflow runs inside
//! the file, no page reached twice. It reads with plain file reads, never a map, so a
//! damaged file is a description here, never a signal.
//!
//! The newest meta's last page may lie past the file's end: LMDB counts a page it
//! allocated in a commit and then freed unwritten (a conversion into 3,000 named
//! databases leaves one), and reads such a file whole. So only a page the trees reach
//! past the end makes a file truncated; the last page alone never does.
//!
//! Layouts follow LMDB 0.9's `midl.h`/`mdb.c` (page header, `MDB_node`, `MDB_db`,
//! `MDB_meta`); sizes are little-endian on every platform the tool supports.
use super::pages::PageReader;
use crate::fileio::read_exact_at;
use pyo3::prelude::*;
use std::fs::File;

pub(crate) const PAGE_HEADER: usize = 16;
pub(crate) const NODE_HEADER: usize = 8;
const DB_SIZE: usize = 48;
pub(crate) const META_MAGIC: u32 = 0xBEEF_C0DE;
pub(crate) const INVALID_PAGE: u64 = u64::MAX;

pub(crate) const P_BRANCH: u16 = 0x01;
pub(crate) const P_LEAF: u16 = 0x02;
pub(crate) const P_LEAF2: u16 = 0x20;
pub(crate) const F_BIGDATA: u16 = 0x01;
pub(crate) const F_SUBDATA: u16 = 0x02;
pub(crate) const F_DUPDATA: u16 = 0x04;
const MDB_DUPSORT: u16 = 0x04;

pub(crate) type Check<T> = Result<T, String>;

pub(crate) fn u16_at(b: &[u8], at: usize) -> Check<u16> {
    b.get(at..at + 2)
        .map(|s| u16::from_le_bytes([s[0], s[1]]))
        .ok_or_else(|| format!("a field at byte {at} lies outside its page"))
}

pub(crate) fn u32_at(b: &[u8], at: usize) -> Check<u32> {
    b.get(at..at + 4)
        .map(|s| u32::from_le_bytes(s.try_into().unwrap()))
        .ok_or_else(|| format!("a field at byte {at} lies outside its page"))
}

pub(crate) fn u64_at(b: &[u8], at: usize) -> Check<u64> {
    b.get(at..at + 8)
        .map(|s| u64::from_le_bytes(s.try_into().unwrap()))
        .ok_or_else(|| format!("a field at byte {at} lies outside its page"))
}

/// One `MDB_db`: the flags, fixed key size and root a tree is walked with.
struct Db {
    pad: u32,
    flags: u16,
    root: u64,
}

fn db_at(b: &[u8], at: usize) -> Check<Db> {
    if b.len() < at + DB_SIZE {
        return Err("a database record is cut short".into());
    }
    Ok(Db {
        pad: u32_at(b, at)?,
        flags: u16_at(b, at + 4)?,
        root: u64_at(b, at + 40)?,
    })
}

struct Walk {
    file: PageReader,
    psize: usize,
    /// Pages in the file (pages past them are a SIGBUS in LMDB's map).
    pages: u64,
    /// Pages below the newest meta's last page + 1 (LMDB refuses the others itself).
    next_page: u64,
    seen: Vec<u64>,
    /// A page the trees reach that LMDB counts but the file no longer holds: the file
    /// was cut short (told as truncated, not as a damaged link).
    cut_at: Option<u64>,
}

impl Walk {
    fn mark(&mut self, pgno: u64) -> Check<()> {
        let (word, bit) = ((pgno / 64) as usize, pgno % 64);
        if self.seen[word] & (1 << bit) != 0 {
            return Err(format!("page {pgno} is reached twice (a loop in the tree)"));
        }
        self.seen[word] |= 1 << bit;
        Ok(())
    }

    fn page(&mut self, pgno: u64) -> Check<Vec<u8>> {
        if pgno >= self.pages && pgno < self.next_page {
            self.cut_at = Some(pgno);
        }
        if pgno < 2 || pgno >= self.next_page || pgno >= self.pages {
            return Err(format!(
                "a link to page {pgno}, outside the file's {} pages",
                self.pages
            ));
        }
        self.mark(pgno)?;
        self.file.numbered(pgno)
    }

    /// A tree from `root` (a named database, the main or free database, a dup sub-tree).
    fn tree(&mut self, db: &Db, depth: usize) -> Check<()> {
        if db.root == INVALID_PAGE {
            return Ok(());
        }
        if depth > 64 {
            return Err("databases nested deeper than LMDB allows".into());
        }
        let mut stack = vec![(db.root, 0usize)];
        while let Some((pgno, level)) = stack.pop() {
            if level > 64 {
                return Err(format!("a tree deeper than 64 levels at page {pgno}"));
            }
            let page = self.page(pgno)?;
            let flags = u16_at(&page, 10)?;
            let at = |e: String| {
                if e.starts_with("page ") {
                    e
                } else {
                    format!("page {pgno}: {e}")
                }
            };
            if flags & P_BRANCH != 0 {
                // Pushed last first, so the first is walked first: in the order the
                // pages lie in the file, mostly (see `pages.rs`).
                for child in self.branch(&page).map_err(at)?.into_iter().rev() {
                    stack.push((child, level + 1));
                }
            } else if flags & P_LEAF2 != 0 {
                leaf2(&page, db.pad as usize, page.len()).map_err(at)?;
            } else if flags & P_LEAF != 0 {
                self.leaf(&page, page.len(), db.flags, depth).map_err(at)?;
            } else {
                return Err(format!(
                    "page {pgno} is neither a branch nor a leaf (flags {flags:#x})"
                ));
            }
        }
        Ok(())
    }

    /// A branch page's children, after checking its nodes lie inside it.
    fn branch(&self, page: &[u8]) -> Check<Vec<u64>> {
        let mut out = Vec::new();
        for node in nodes(page, page.len())? {
            let ksize = u16_at(page, node + 6)? as usize;
            if node + NODE_HEADER + ksize > page.len() {
                return Err(format!("a branch key of {ksize} bytes runs past the page"));
            }
            let lo = u16_at(page, node)? as u64;
            let hi = u16_at(page, node + 2)? as u64;
            let top = u16_at(page, node + 4)? as u64;
            out.push(lo | hi << 16 | top << 32);
        }
        Ok(out)
    }

    /// A leaf (a page, or a sub-page of `limit` bytes inside a node): every key and
    /// value inside it or inside its overflow run, every sub-database walked.
    fn leaf(&mut self, page: &[u8], limit: usize, db_flags: u16, depth: usize) -> Check<()> {
        for node in nodes(page, limit)? {
            let size = u16_at(page, node)? as usize | (u16_at(page, node + 2)? as usize) << 16;
            let flags = u16_at(page, node + 4)?;
            let ksize = u16_at(page, node + 6)? as usize;
            let data = node + NODE_HEADER + ksize;
            if data > limit {
                return Err(format!("a key of {ksize} bytes runs past the page"));
            }
            if flags & F_BIGDATA != 0 {
                let first = u64_at(&page[..limit], data)?;
                let end = first
                    .checked_mul(self.psize as u64)
                    .and_then(|b| b.checked_add((PAGE_HEADER + size) as u64));
                let run_end = end.map(|e| e.div_ceil(self.psize as u64));
                if first >= 2 && run_end.is_some_and(|e| e <= self.next_page && e > self.pages) {
                    self.cut_at = Some(first.max(self.pages));
                }
                if first < 2
                    || first >= self.next_page
                    || end.is_none_or(|e| e > self.pages * self.psize as u64)
                {
                    return Err(format!(
                        "a value of {size} bytes on overflow page {first} runs past the file"
                    ));
                }
                continue;
            }
            if data + size > limit {
                return Err(format!("a value of {size} bytes runs past the page"));
            }
            let value = &page[data..data + size];
            if flags & F_SUBDATA != 0 {
                // A named database (in the main tree) or a dup sub-tree.
                self.tree(&db_at(value, 0)?, depth + 1)?;
            } else if flags & F_DUPDATA != 0 {
                if db_flags & MDB_DUPSORT == 0 {
                    return Err("a duplicate-data node in a database without duplicates".into());
                }
                // A sub-page inside the node: its own header, pointers relative to it.
                let sub_flags = u16_at(value, 10)?;
                if sub_flags & P_LEAF2 != 0 {
                    leaf2(value, u16_at(value, 8)? as usize, size)?;
                } else {
                    self.leaf(value, size, 0, depth + 1)?;
                }
            }
        }
        Ok(())
    }
}

/// The node offsets of a page (or sub-page) of `limit` bytes, each inside it.
pub(crate) fn nodes(page: &[u8], limit: usize) -> Check<Vec<usize>> {
    let lower = u16_at(page, 12)? as usize;
    let upper = u16_at(page, 14)? as usize;
    if lower < PAGE_HEADER
        || lower > upper
        || upper > limit
        || !(lower - PAGE_HEADER).is_multiple_of(2)
    {
        return Err(format!(
            "free-space bounds {lower}..{upper} do not fit its {limit} bytes"
        ));
    }
    let mut out = Vec::with_capacity((lower - PAGE_HEADER) / 2);
    for i in 0..(lower - PAGE_HEADER) / 2 {
        let node = u16_at(page, PAGE_HEADER + 2 * i)? as usize;
        if node < upper || node + NODE_HEADER > limit {
            return Err(format!(
                "node {i} at byte {node} lies outside the page's data"
            ));
        }
        out.push(node);
    }
    Ok(out)
}

/// A page of fixed-size keys (`MDB_DUPFIXED`): all of them inside `limit` bytes.
fn leaf2(page: &[u8], ksize: usize, limit: usize) -> Check<()> {
    let lower = u16_at(page, 12)? as usize;
    if lower < PAGE_HEADER || lower > limit {
        return Err(format!("a fixed-size key page claims {lower} header bytes"));
    }
    let count = (lower - PAGE_HEADER) / 2;
    if PAGE_HEADER + count * ksize > limit {
        return Err(format!(
            "{count} fixed-size keys of {ksize} bytes run past the page"
        ));
    }
    Ok(())
}

fn check(path: &str) -> Check<()> {
    let file = File::open(path).map_err(|e| format!("cannot be read ({e})"))?;
    let size = file
        .metadata()
        .map_err(|e| format!("cannot be read ({e})"))?
        .len();
    // Both meta pages: the newest valid one is what LMDB reads from.
    let mut head = vec![0u8; 160];
    read_exact_at(&file, &mut head, 0)
        .map_err(|_| "is too short for LMDB's meta pages".to_string())?;
    let psize = u32_at(&head, 40)? as usize;
    if u32_at(&head, 16)? != META_MAGIC || !(512..=1 << 16).contains(&psize) {
        return Err("has no valid meta page".into());
    }
    let mut metas = vec![head];
    let mut second = vec![0u8; 160];
    if read_exact_at(&file, &mut second, psize as u64).is_ok() && u32_at(&second, 16)? == META_MAGIC
    {
        metas.push(second);
    }
    let meta = metas
        .into_iter()
        .max_by_key(|m| u64_at(m, 144).unwrap_or(0))
        .unwrap();
    let last = u64_at(&meta, 136)?;
    let pages = size / psize as u64;
    let mut walk = Walk {
        file: PageReader::new(file, psize),
        psize,
        pages,
        next_page: last.saturating_add(1),
        seen: vec![0u64; (pages as usize).div_ceil(64)],
        cut_at: None,
    };
    let walked = walk
        .tree(&db_at(&meta, 40)?, 0)
        .map_err(|e| format!("free-page database: {e}"))
        .and_then(|()| walk.tree(&db_at(&meta, 88)?, 0));
    match (walked, walk.cut_at) {
        (Err(_), Some(pgno)) => Err(format!(
            "is truncated ({size} bytes; page {pgno}, which its trees reach, lies past the end)"
        )),
        (walked, _) => walked,
    }
}

/// `None` if every page the newest meta reaches is sound, else what is wrong (one
/// clause, for "data.mdb is damaged (…)"). Runs without the GIL.
#[pyfunction]
pub fn lmdb_check(py: Python<'_>, path: String) -> Option<String> {
    py.detach(|| check(&path).err())
}
