//! Positional reads and a non-blocking shared lock, on Unix and Windows alike, for
//! the modules that read a store's file themselves (the LMDB page walks, the redb
//! overlay).
use std::fs::File;
use std::io;

/// `buf.len()` bytes at `offset`, or an error (`UnexpectedEof` past the end).
pub(crate) fn read_exact_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<()> {
    if read_full_at(file, buf, offset)? < buf.len() {
        return Err(io::ErrorKind::UnexpectedEof.into());
    }
    Ok(())
}

/// Up to `buf.len()` bytes at `offset` (fewer at the end of the file).
pub(crate) fn read_full_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    let mut got = 0;
    while got < buf.len() {
        match read_at(file, &mut buf[got..], offset + got as u64) {
            Ok(0) => break,
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    Ok(got)
}

#[cfg(unix)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    std::os::unix::fs::FileExt::read_at(file, buf, offset)
}

#[cfg(windows)]
fn read_at(file: &File, buf: &mut [u8], offset: u64) -> io::Result<usize> {
    // Moves the file's cursor, which nothing here uses.
    std::os::windows::fs::FileExt::seek_read(file, buf, offset)
}

/// Take a shared lock on the whole file, failing at once with
/// `io::ErrorKind::WouldBlock` while another process holds it exclusively.
///
/// On Unix this is `flock`, the lock every redb version takes (exclusive) on its
/// file; it is called directly because the standard library's `File::try_lock_shared`
/// is not `flock` on every Unix (Android among them). On Windows it is the standard
/// library's (`LockFileEx` over the whole file), which conflicts with redb's own
/// whole-file lock there.
#[cfg(unix)]
pub(crate) fn try_lock_shared(file: &File) -> io::Result<()> {
    use std::os::unix::io::AsRawFd;
    // SAFETY: `flock` on a descriptor this `File` owns and keeps open.
    let rc = unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_SH | libc::LOCK_NB) };
    if rc != 0 {
        return Err(io::Error::last_os_error()); // EWOULDBLOCK is `WouldBlock`
    }
    Ok(())
}

#[cfg(not(unix))]
pub(crate) fn try_lock_shared(file: &File) -> io::Result<()> {
    file.try_lock_shared().map_err(|e| match e {
        std::fs::TryLockError::WouldBlock => io::ErrorKind::WouldBlock.into(),
        std::fs::TryLockError::Error(e) => e,
    })
}
