//! A framing check of a RocksDB MANIFEST, before RocksDB reads it.
//!
//! RocksDB's log reader spins forever (100 % CPU, no error) on some damaged MANIFEST
//! tails — found by fuzzing rocksdict 0.3.29: a copy of the last records appended
//! after the end, whose first "header" claims a recyclable record longer than the file.
//! No error is ever raised, so the tool would hang. This check walks the MANIFEST's
//! physical records as `db/log_format.h` lays them out (32 KiB blocks; a 7-byte header
//! of masked CRC32C, length and type, 11 bytes with the log number for the recyclable
//! types; zero-filled block trailers) and confirms every record lies inside its block,
//! carries a known type and its checksum, and that fragments arrive in order. A
//! MANIFEST that fails is refused as damaged before RocksDB sees it.
use pyo3::prelude::*;
use std::fs::File;
use std::io::Read;

const BLOCK: usize = 32 * 1024;
const HEADER: usize = 7;
const RECYCLABLE_HEADER: usize = 11;
const MASK_DELTA: u32 = 0xa282_ead8;
/// Types with this bit may be skipped by a reader that does not know them.
const SAFE_IGNORE: u8 = 0x80;

fn crc32c_table() -> [u32; 256] {
    let mut table = [0u32; 256];
    for (i, slot) in table.iter_mut().enumerate() {
        let mut crc = i as u32;
        for _ in 0..8 {
            crc = if crc & 1 != 0 {
                (crc >> 1) ^ 0x82F6_3B78
            } else {
                crc >> 1
            };
        }
        *slot = crc;
    }
    table
}

fn crc32c(table: &[u32; 256], parts: &[&[u8]]) -> u32 {
    let mut crc = !0u32;
    for part in parts {
        for &b in *part {
            crc = table[((crc ^ b as u32) & 0xff) as usize] ^ (crc >> 8);
        }
    }
    !crc
}

fn unmask(masked: u32) -> u32 {
    let rot = masked.wrapping_sub(MASK_DELTA);
    rot.rotate_left(15)
}

/// Where a logical record stands: outside one, or inside a fragmented one.
#[derive(PartialEq)]
enum State {
    Between,
    Inside,
}

/// One block's physical records; `state` carries a fragmented record across blocks.
fn check_block(
    table: &[u32; 256],
    block: &[u8],
    at: usize,
    state: &mut State,
) -> Result<(), String> {
    let mut pos = 0usize;
    while pos < block.len() {
        if block.len() - pos < HEADER || block[pos..].iter().all(|&b| b == 0) {
            // A zero-filled block trailer, or preallocated space.
            if block[pos..].iter().any(|&b| b != 0) {
                return Err(format!(
                    "bytes at {} fill a block trailer that must be zeros",
                    at + pos
                ));
            }
            return Ok(());
        }
        let kind = block[pos + 6];
        let length = u16::from_le_bytes([block[pos + 4], block[pos + 5]]) as usize;
        let header = if matches!(kind, 5..=8 | 11) {
            RECYCLABLE_HEADER
        } else {
            HEADER
        };
        let end = pos + header + length;
        if end > block.len() {
            return Err(format!(
                "a record of {length} bytes at byte {} runs past its block",
                at + pos
            ));
        }
        let stored = u32::from_le_bytes(block[pos..pos + 4].try_into().unwrap());
        if unmask(stored) != crc32c(table, &[&[kind], &block[pos + HEADER..end]]) {
            return Err(format!(
                "the record at byte {} fails its checksum",
                at + pos
            ));
        }
        *state = match (kind & !SAFE_IGNORE, &*state) {
            (1 | 5 | 9 | 10 | 11, State::Between) => State::Between,
            (2 | 6, State::Between) => State::Inside,
            (3 | 7, State::Inside) => State::Inside,
            (4 | 8, State::Inside) => State::Between,
            _ if kind & SAFE_IGNORE != 0 && *state == State::Between => State::Between,
            _ => {
                return Err(format!(
                    "a record of type {kind} at byte {} is out of place",
                    at + pos
                ))
            }
        };
        pos = end;
    }
    Ok(())
}

/// Every block of the file in turn: memory stays one block whatever the MANIFEST's size.
fn check(path: &str) -> Result<(), String> {
    let mut file = File::open(path).map_err(|e| format!("cannot be read ({e})"))?;
    let table = crc32c_table();
    let mut state = State::Between;
    let mut block = vec![0u8; BLOCK];
    let mut at = 0usize;
    loop {
        let mut filled = 0;
        while filled < BLOCK {
            match file.read(&mut block[filled..]) {
                Ok(0) => break,
                Ok(n) => filled += n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => return Err(format!("cannot be read ({e})")),
            }
        }
        if filled == 0 {
            break;
        }
        check_block(&table, &block[..filled], at, &mut state)?;
        at += filled;
        if filled < BLOCK {
            break;
        }
    }
    if state == State::Inside {
        return Err("its last record is cut short".into());
    }
    Ok(())
}

/// `None` if the MANIFEST at `path` is framed as RocksDB writes it, else what is wrong.
#[pyfunction]
pub fn rocksdb_manifest_check(py: Python<'_>, path: String) -> Option<String> {
    py.detach(|| check(&path).err())
}
