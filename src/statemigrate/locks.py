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
        l_type, _whence, _start, _len, pid = struct.unpack("hhqqi", answer[: struct.calcsize("hhqqi")])
        if l_type == fcntl.F_UNLCK:
            return None
        return pid or -1
    finally:
        os.close(fd)


def busy_message(path: Path, pid: int | None) -> str:
    """The contract's one line for a store held by another process."""
    who = f"pid {pid}" if pid and pid > 0 else "pid unknown"
    return f"{path}: store is in use by another process ({who})"
