//! Records of a custom-order table put into byte order with bounded memory:
//! sorted runs of at most `RUN_BYTES` spill to temporary files, then merge.
use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::fs::File;
use std::io::{BufReader, BufWriter, Read, Write};

use super::errors::NErr;

const RUN_BYTES: usize = 64 << 20;

/// The run size: `RUN_BYTES`, or `STATEMIGRATE_REDB_SORT_RUN_BYTES` (tests make it tiny).
fn run_bytes() -> usize {
    std::env::var("STATEMIGRATE_REDB_SORT_RUN_BYTES")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(RUN_BYTES)
}

pub type Pair = (Vec<u8>, Vec<u8>);

/// The next pair of a run in the merge: (key, run index, value).
type Head = (Vec<u8>, usize, Vec<u8>);

fn io(e: std::io::Error) -> NErr {
    NErr::Io(format!("spilling a sort run: {e}"))
}

struct Run {
    r: BufReader<File>,
}

impl Run {
    fn next(&mut self) -> Result<Option<Pair>, NErr> {
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
}

impl Sorter {
    pub fn new() -> Self {
        Sorter {
            buf: Vec::new(),
            bytes: 0,
            runs: Vec::new(),
            heap: BinaryHeap::new(),
            mem: Vec::new().into_iter(),
            merging: false,
            run_bytes: run_bytes(),
        }
    }

    pub fn push(&mut self, k: &[u8], v: &[u8]) -> Result<(), NErr> {
        self.bytes += k.len() + v.len() + 48;
        self.buf.push((k.to_vec(), v.to_vec()));
        if self.bytes >= self.run_bytes {
            self.spill()?;
        }
        Ok(())
    }

    fn spill(&mut self) -> Result<(), NErr> {
        self.buf.sort_unstable_by(|a, b| a.0.cmp(&b.0));
        let f = tempfile::tempfile().map_err(io)?;
        let mut w = BufWriter::new(f);
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
            r: BufReader::new(f),
        });
        self.bytes = 0;
        Ok(())
    }

    /// Stop collecting and start yielding.
    pub fn finish(&mut self) -> Result<(), NErr> {
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

    pub fn next(&mut self) -> Result<Option<Pair>, NErr> {
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
