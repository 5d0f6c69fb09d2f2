"""Who holds a store: POSIX record locks probed without taking or waiting for them."""

from __future__ import annotations

import fcntl
import os
import struct
from pathlib import Path


def fcntl_holder(path: Path) -> int | None:
    """The pid of another process holding a write lock on ``path``, or None.

    Uses ``F_GETLK`` on a read-only descriptor, so it neither blocks nor changes the
    file. A lock held by this very process is not reported (POSIX locks are per
    process), and closing the descriptor does not release locks of other processes.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return None
    try:
        # struct flock on Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid
        query = struct.pack("hhqqi", fcntl.F_RDLCK, os.SEEK_SET, 0, 0, 0)
        try:
            answer = fcntl.fcntl(fd, fcntl.F_GETLK, query + b"\0" * 4)
        except OSError:
            return None
        l_type, _whence, _start, _len, pid = struct.unpack(
            "hhqqi", answer[: struct.calcsize("hhqqi")]
        )
        if l_type == fcntl.F_UNLCK:
            return None
        return pid or -1
    finally:
        os.close(fd)


def busy_message(path: Path, pid: int | None) -> str:
    """The contract's one line for a store held by another process."""
    who = f"pid {pid}" if pid and pid > 0 else "pid unknown"
    return f"{path}: store is in use by another process ({who})"


def flock_held(path: Path) -> bool:
    """Whether another open file holds an exclusive ``flock`` on ``path`` (redb's lock).

    Takes a shared flock without waiting and drops it at once; changes nothing.
    """
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops our shared lock
    return False


def store_holder(paths: list[Path]) -> int | None:
    """The pid of a process holding any file of a store (fcntl or flock), -1 if unknown, or None.

    Looks at every file of the given files and directories (not recursively below a
    directory's subdirectories): SQLite locks the database and its ``-shm``, RocksDB its
    ``LOCK``, LMDB its ``lock.mdb``, redb its file (flock).
    """
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(c for c in p.iterdir() if c.is_file())
        elif p.is_file():
            files.append(p)
    for f in files:
        pid = fcntl_holder(f)
        if pid is not None:
            return pid
        if flock_held(f):
            return -1
    return None
