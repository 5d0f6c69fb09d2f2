"""LMDB's lock file: where a process holding an environment shows, and its writer mutex.

Every process with the environment open holds a POSIX read lock on the lock file
(``lock.mdb`` inside a directory store, ``PATH-lock`` beside a single-file one); a
writer also owns the writer mutex inside it, which a second writer would wait for
forever. The mutex's owner is read here without taking it (glibc's robust mutex
layout on Linux).
"""

from __future__ import annotations

import os
import struct
import sys
from pathlib import Path

from ...locks import LockProbe

LOCK_FILE = "lock.mdb"
# A single-file environment (MDB_NOSUBDIR): its lock file is PATH-lock, beside it.
SINGLE_LOCK_SUFFIX = "-lock"

# lock.mdb on Linux: its magic, and the writer mutex (a robust pthread mutex at offset
# 64) whose first word glibc sets to the owner's thread id.
_LOCK_MAGIC = 0xBEEFC0DE
_MUTEX_OFFSET = 64
_FUTEX_TID_MASK = 0x3FFFFFFF
_FUTEX_OWNER_DIED = 0x40000000


def writer_pid(lock_file: Path) -> int | None:
    """The pid holding LMDB's writer mutex, read from ``lock.mdb`` without taking it.

    A second LMDB writer would wait forever for the mutex. Returns None when it is free,
    its owner died (the next writer recovers it), the platform is not Linux (glibc's
    robust mutex layout) or the file is not in the layout known here.
    """
    if not sys.platform.startswith("linux"):
        return None
    try:
        with open(lock_file, "rb") as f:
            head = f.read(128)
    except OSError:
        return None
    if len(head) < 76 or struct.unpack_from("<I", head, 0)[0] != _LOCK_MAGIC:
        return None
    word = struct.unpack_from("<I", head, _MUTEX_OFFSET)[0]
    tid = word & _FUTEX_TID_MASK
    if tid == 0 or word & _FUTEX_OWNER_DIED:
        return None
    try:
        status = Path(f"/proc/{tid}/status").read_text()
    except OSError:
        return None  # the owner is gone: LMDB recovers the mutex
    for line in status.splitlines():
        if line.startswith("Tgid:"):
            pid = int(line.split()[1])
            return None if pid == os.getpid() else pid
    return tid


OPEN_PROBES = (LockProbe(LOCK_FILE, "any"),)
LOCK_PROBES = (LockProbe(LOCK_FILE, writer_pid), *OPEN_PROBES)
SINGLE_OPEN_PROBES = (LockProbe(SINGLE_LOCK_SUFFIX, "any"),)
SINGLE_LOCK_PROBES = (LockProbe(SINGLE_LOCK_SUFFIX, writer_pid), *SINGLE_OPEN_PROBES)


def probes(
    path: Path, *, single: bool | None = None
) -> tuple[tuple[LockProbe, ...], tuple[LockProbe, ...]]:
    """(every probe, the probes of an open environment) for the store at ``path``."""
    single = not path.is_dir() if single is None else single
    return (SINGLE_LOCK_PROBES, SINGLE_OPEN_PROBES) if single else (LOCK_PROBES, OPEN_PROBES)
