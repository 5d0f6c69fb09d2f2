//! Reading an LMDB `data.mdb` a page at a time with plain file reads, for the
//! structural check (`check.rs`) and the digest walk (`digest.rs`).
//!
//! Both walk B-trees depth first, and in the files LMDB writes (a store filled in key
//! order, a compacting copy) the next page is nearly always the one after the last:
//! in a 1M-record store, 81,903 of 83,963 steps (82,716 in its compacting copy). One
//! read per page was most of both walks' time (two system calls and a fresh buffer per
//! 4 KiB page). So a page that follows the last one read is read with the pages after
//! it, and served from that window until a page outside it is asked for; any other
//! page is read alone. As the kernel's own read-ahead does, the window starts small
//! after a page read alone and grows fourfold each time the walk runs off its end, up
//! to `WINDOW` bytes: a walk that jumps about reads little it does not use. Memory
//! stays at one window.
//!
//! A file whose walk jumps about (an app's random inserts) is a disk read per page
//! when it is not in the page cache: 5.7 s for a 120 MB, 1M-record store here, where
//! reading it straight through took 0.11 s. So once one page in eight has been read
//! alone (and at least `ALONE_BEFORE_WARMING`), a file of up to `WARM_MAX` bytes is
//! read through once, in 1 MiB reads whose bytes are dropped (the kernel keeps them);
//! `posix_fadvise(WILLNEED)` was measured to do nothing here. Reading every file
//! through first cost a walk in the page cache twice its time.
use std::fs::File;
use std::io;

use super::check::{u64_at, Check};
use crate::fileio::{read_exact_at, read_full_at};

/// The most bytes read at once when the walk goes on sequentially, and the fewest pages.
const WINDOW: usize = 256 << 10;
const FIRST_WINDOW_PAGES: usize = 4;
/// Pages read alone before the file may be read through (see above), and up to what size.
const ALONE_BEFORE_WARMING: u64 = 256;
const WARM_MAX: u64 = 4 << 30;

/// Pages of one file of `psize`-byte pages, read as described above.
pub(crate) struct PageReader {
    pub(crate) file: File,
    psize: usize,
    window: Vec<u8>,
    /// The first page in `window`, and how many whole pages it holds.
    first: u64,
    held: u64,
    /// The page read last (`u64::MAX`: none yet), and the next window's size in pages.
    last: u64,
    ramp: usize,
    /// Pages asked for, pages read alone, and whether the file was read through.
    asked: u64,
    alone: u64,
    warmed: bool,
}

impl PageReader {
    pub(crate) fn new(file: File, psize: usize) -> Self {
        PageReader {
            file,
            psize,
            window: Vec::new(),
            first: 0,
            held: 0,
            last: u64::MAX,
            ramp: FIRST_WINDOW_PAGES,
            asked: 0,
            alone: 0,
            warmed: false,
        }
    }

    /// Page `pgno`'s bytes (a copy: the caller may read others while it holds one).
    pub(crate) fn page(&mut self, pgno: u64) -> io::Result<Vec<u8>> {
        let psize = self.psize as u64;
        let sequential = self.last != u64::MAX && pgno == self.last.wrapping_add(1);
        self.last = pgno;
        self.asked += 1;
        if !(self.first..self.first + self.held).contains(&pgno) {
            if !sequential {
                self.alone += 1;
                self.ramp = FIRST_WINDOW_PAGES;
                if !self.warmed
                    && self.alone >= ALONE_BEFORE_WARMING
                    && self.alone * 8 >= self.asked
                {
                    self.warm();
                }
                let mut buf = vec![0u8; self.psize];
                read_exact_at(&self.file, &mut buf, pgno * psize)?;
                return Ok(buf);
            }
            self.window.resize(self.ramp * self.psize, 0);
            self.ramp = (self.ramp * 4).min((WINDOW / self.psize).max(FIRST_WINDOW_PAGES));
            let got = read_full_at(&self.file, &mut self.window, pgno * psize)?;
            self.first = pgno;
            self.held = got as u64 / psize;
            if self.held == 0 {
                return Err(io::ErrorKind::UnexpectedEof.into());
            }
        }
        let at = ((pgno - self.first) * psize) as usize;
        Ok(self.window[at..at + self.psize].to_vec())
    }

    /// Page `pgno`, read and checked to be that page (its header's number), or what is
    /// wrong with it (one clause).
    pub(crate) fn numbered(&mut self, pgno: u64) -> Check<Vec<u8>> {
        let page = self
            .page(pgno)
            .map_err(|e| format!("page {pgno} cannot be read ({e})"))?;
        let said = u64_at(&page, 0)?;
        if said != pgno {
            return Err(format!("page {pgno} says it is page {said}"));
        }
        Ok(page)
    }

    /// Reads the file through once (see above). Failures are ignored: only a speed-up.
    fn warm(&mut self) {
        self.warmed = true;
        let size = self.file.metadata().map(|m| m.len()).unwrap_or(u64::MAX);
        if size > WARM_MAX {
            return;
        }
        let mut buf = vec![0u8; 1 << 20];
        let mut at = 0u64;
        while let Ok(n) = read_full_at(&self.file, &mut buf, at) {
            if n == 0 {
                break;
            }
            at += n as u64;
        }
    }
}
