//! The project's one external sort: (key, value) pairs put into key byte order with
//! bounded memory. Sorted runs of at most `run_bytes` spill to anonymous temporary
//! files (in a given directory, or the system's), then a k-way merge yields them.
//! Serves redb's custom-order tables and, through `py_sort`, `op.rekey`.
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};
use std::path::PathBuf;

/// The default run size: 64 MiB of keys and values (plus 48 bytes per pair).
pub const RUN_BYTES: usize = 64 << 20;

/// The run size when the caller names none: `RUN_BYTES`, or
/// `$STATEMIGRATE_SORT_RUN_BYTES` (tests make runs tiny so that they spill).
pub fn default_run_bytes() -> usize {
    std::env::var("STATEMIGRATE_SORT_RUN_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RUN_BYTES)
}

pub type Pair = (Vec<u8>, Vec<u8>);

/// The next pair of a run in the merge: (key, run index, value).
type Head = (Vec<u8>, usize, Vec<u8>);

/// A run could not be written or read back (a full disk, an I/O error).
#[derive(Debug)]
pub struct SortError {
    pub message: String,
    /// The OS error number, when the OS gave one (ENOSPC …).
    pub errno: Option<i32>,
}

fn io(e: std::io::Error) -> SortError {
    let errno = e.raw_os_error();
    let text = e.to_string();
    // Python shows the number itself ("[Errno 28] ..."): not twice.
    let text = match errno {
        Some(n) => text
            .trim_end_matches(&format!(" (os error {n})"))
            .to_string(),
        None => text,
    };
    SortError {
        message: format!("spilling a sort run: {text}"),
        errno,
    }
}

struct Run {
    r: BufReader<File>,
}

impl Run {
    fn next(&mut self) -> Result<Option<Pair>, SortError> {
        let mut len = [0u8; 8];
        match self.r.read_exact(&mut len) {
            Ok(()) => {}
            Err(e) if e.kind() == std::io::ErrorKind::UnexpectedEof => return Ok(None),
            Err(e) => return Err(io(e)),
        }
        let mut k = vec![0u8; u64::from_le_bytes(len) as usize];
        self.r.read_exact(&mut k).map_err(io)?;
        self.r.read_exact(&mut len).map_err(io)?;
        let mut v = vec![0u8; u64::from_le_bytes(len) as usize];
        self.r.read_exact(&mut v).map_err(io)?;
        Ok(Some((k, v)))
    }
}

/// Collects pairs, then yields them in key byte order.
pub struct Sorter {
    buf: Vec<Pair>,
    bytes: usize,
    runs: Vec<Run>,
    heap: BinaryHeap<Reverse<Head>>,
    mem: std::vec::IntoIter<Pair>,
    merging: bool,
    run_bytes: usize,
    dir: Option<PathBuf>,
    /// `dir` is made (owner only) by the first spill; a sort that never spills makes none.
    make_dir: bool,
}

impl Sorter {
    /// A sorter spilling runs of `run_bytes` into `dir` (the system's temporary
    /// directory when None). The run files have no name: they go with the sorter.
    pub fn new(run_bytes: usize, dir: Option<PathBuf>) -> Self {
        Sorter {
            buf: Vec::new(),
            bytes: 0,
            runs: Vec::new(),
            heap: BinaryHeap::new(),
            mem: Vec::new().into_iter(),
            merging: false,
            run_bytes,
            dir,
            make_dir: false,
        }
    }

    /// As [`Sorter::new`], but `dir` does not exist yet: the first spill creates it,
    /// readable by its owner only, and refuses a path that exists by then.
    pub fn new_in_new_dir(run_bytes: usize, dir: PathBuf) -> Self {
        Sorter {
            make_dir: true,
            ..Sorter::new(run_bytes, Some(dir))
        }
    }

    pub fn push(&mut self, k: &[u8], v: &[u8]) -> Result<(), SortError> {
        self.add(k.to_vec(), v.to_vec());
        if self.is_full() {
            self.spill()?;
        }
        Ok(())
    }

    /// Collect one pair without spilling (the caller spills when `is_full`).
    pub fn add(&mut self, k: Vec<u8>, v: Vec<u8>) {
        self.bytes += k.len() + v.len() + 48;
        self.buf.push((k, v));
    }

    /// How many runs were written so far.
    pub fn spilled_runs(&self) -> usize {
        self.runs.len()
    }

    /// Whether the collected pairs reached the run size.
    pub fn is_full(&self) -> bool {
        self.bytes >= self.run_bytes
    }

    /// Sort the collected pairs and write them as one run.
    pub fn spill(&mut self) -> Result<(), SortError> {
        self.buf.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        if self.make_dir {
            if let Some(dir) = &self.dir {
                let mut builder = std::fs::DirBuilder::new();
                #[cfg(unix)]
                std::os::unix::fs::DirBuilderExt::mode(&mut builder, 0o700);
                builder.create(dir).map_err(io)?; // an existing path is refused
            }
            self.make_dir = false;
        }
        let f = match &self.dir {
            Some(dir) => tempfile::tempfile_in(dir),
            None => tempfile::tempfile(),
        }
        .map_err(io)?;
        let mut w = BufWriter::with_capacity(1 << 20, f);
        for (k, v) in self.buf.drain(..) {
            w.write_all(&(k.len() as u64).to_le_bytes()).map_err(io)?;
            w.write_all(&k).map_err(io)?;
            w.write_all(&(v.len() as u64).to_le_bytes()).map_err(io)?;
            w.write_all(&v).map_err(io)?;
        }
        let mut f = w.into_inner().map_err(|e| io(e.into_error()))?;
        use std::io::Seek;
        f.seek(std::io::SeekFrom::Start(0)).map_err(io)?;
        self.runs.push(Run {
            r: BufReader::with_capacity(256 << 10, f),
        });
        self.bytes = 0;
        Ok(())
    }

    /// Stop collecting and start yielding.
    pub fn finish(&mut self) -> Result<(), SortError> {
        if self.runs.is_empty() {
            self.buf.sort_unstable_by(|a, b| a.0.cmp(&b.0));
            self.mem = std::mem::take(&mut self.buf).into_iter();
            return Ok(());
        }
        if !self.buf.is_empty() {
            self.spill()?;
        }
        self.merging = true;
        for i in 0..self.runs.len() {
            if let Some((k, v)) = self.runs[i].next()? {
                self.heap.push(Reverse((k, i, v)));
            }
        }
        Ok(())
    }

    pub fn next(&mut self) -> Result<Option<Pair>, SortError> {
        if !self.merging {
            return Ok(self.mem.next());
        }
        let Some(Reverse((k, i, v))) = self.heap.pop() else {
            return Ok(None);
        };
        if let Some((k2, v2)) = self.runs[i].next()? {
            self.heap.push(Reverse((k2, i, v2)));
        }
        Ok(Some((k, v)))
    }
}
