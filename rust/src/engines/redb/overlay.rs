//! A copy-on-write view of a source file, so that redb can open it "for writing"
//! (redb 1.x and 2.x have no read-only open; redb 4.x refuses to open a file that
//! needs repair read-only) without a single byte of the file changing: every write
//! redb makes (the repair, the recovery flag, the clean-shutdown header) lands in
//! memory and is dropped with the reader.
use std::collections::BTreeMap;
use std::fs::File;
use std::io;
use std::path::Path;
use std::sync::Mutex;

use crate::fileio::{read_exact_at, try_lock_shared};

const CHUNK: u64 = 4096;

/// The parts of the `len` bytes at `offset` that lie in one chunk each, in order: (the
/// chunk's index, where the part starts in the chunk, where it starts in the range, its
/// length).
fn spans(offset: u64, len: usize) -> impl Iterator<Item = (u64, usize, usize, usize)> {
    let mut pos = 0usize;
    std::iter::from_fn(move || {
        if pos >= len {
            return None;
        }
        let abs = offset + pos as u64;
        let within = (abs % CHUNK) as usize;
        let n = (CHUNK as usize - within).min(len - pos);
        let span = (abs / CHUNK, within, pos, n);
        pos += n;
        Some(span)
    })
}

#[derive(Debug)]
pub struct Overlay {
    file: File,
    state: Mutex<State>,
}

#[derive(Debug)]
struct State {
    len: u64,
    base_len: u64,
    chunks: BTreeMap<u64, Vec<u8>>,
}

impl Overlay {
    /// Open `path` read-only and take a shared lock on it, which fails at once
    /// while a redb process holds it for writing (every redb version locks its file
    /// exclusively), so a store in use is reported busy rather than read torn.
    pub fn open(path: &Path) -> io::Result<Self> {
        let file = File::open(path)?;
        try_lock_shared(&file)?;
        let base_len = file.metadata()?.len();
        Ok(Overlay {
            file,
            state: Mutex::new(State {
                len: base_len,
                base_len,
                chunks: BTreeMap::new(),
            }),
        })
    }

    fn base_chunk(&self, st: &State, idx: u64) -> io::Result<Vec<u8>> {
        let mut buf = vec![0u8; CHUNK as usize];
        let start = idx * CHUNK;
        if start < st.base_len {
            let n = ((st.base_len - start).min(CHUNK)) as usize;
            read_exact_at(&self.file, &mut buf[..n], start)?;
        }
        Ok(buf)
    }

    pub fn len(&self) -> io::Result<u64> {
        Ok(self.state.lock().unwrap().len)
    }

    pub fn read_into(&self, offset: u64, out: &mut [u8]) -> io::Result<()> {
        let st = self.state.lock().unwrap();
        if offset + out.len() as u64 > st.len {
            return Err(io::Error::new(
                io::ErrorKind::UnexpectedEof,
                "read past the end of the file",
            ));
        }
        for (idx, within, pos, n) in spans(offset, out.len()) {
            let abs = offset + pos as u64;
            if let Some(c) = st.chunks.get(&idx) {
                out[pos..pos + n].copy_from_slice(&c[within..within + n]);
            } else if abs < st.base_len {
                let m = n.min((st.base_len - abs) as usize);
                read_exact_at(&self.file, &mut out[pos..pos + m], abs)?;
                out[pos + m..pos + n].fill(0);
            } else {
                out[pos..pos + n].fill(0);
            }
        }
        Ok(())
    }

    pub fn set_len(&self, len: u64) -> io::Result<()> {
        let mut st = self.state.lock().unwrap();
        if len < st.len {
            // Bytes past the new end must read as zero if the file grows again.
            let first = len / CHUNK;
            let keep: Vec<u64> = st.chunks.range(first..).map(|(k, _)| *k).collect();
            for k in keep {
                if k * CHUNK >= len {
                    st.chunks.remove(&k);
                } else {
                    let cut = (len - k * CHUNK) as usize;
                    st.chunks.get_mut(&k).unwrap()[cut..].fill(0);
                }
            }
            if len < st.base_len {
                // Later reads of the dropped tail must not see the file's bytes.
                let idx = len / CHUNK;
                if !len.is_multiple_of(CHUNK) && !st.chunks.contains_key(&idx) {
                    let mut c = self.base_chunk(&st, idx)?;
                    c[(len % CHUNK) as usize..].fill(0);
                    st.chunks.insert(idx, c);
                }
                st.base_len = len;
            }
        }
        st.len = len;
        Ok(())
    }

    pub fn write(&self, offset: u64, data: &[u8]) -> io::Result<()> {
        let mut st = self.state.lock().unwrap();
        for (idx, within, pos, n) in spans(offset, data.len()) {
            if !st.chunks.contains_key(&idx) {
                let c = self.base_chunk(&st, idx)?;
                st.chunks.insert(idx, c);
            }
            st.chunks.get_mut(&idx).unwrap()[within..within + n]
                .copy_from_slice(&data[pos..pos + n]);
        }
        let end = offset + data.len() as u64;
        if end > st.len {
            st.len = end;
        }
        Ok(())
    }
}
