"""Private read copies, for engines whose driver cannot open a store without writing to it.

RocksDB (rocksdict writes its config file and an info ``LOG`` into the directory it
opens), Turso (no read-only open: it creates a ``-wal`` and may checkpoint into the
file) and HelixDB (its reader writes manifests) read a private image of the store in a
directory under ``TMPDIR``: ``statemigrate-<engine>-ro-<pid>-<random>``, mode 0700, so
the source never changes. The image is made of hard links where the file system allows
(nothing is copied, and files the app deletes meanwhile stay readable), else of
symbolic links or copies as the engine says. A reader killed mid-read (kill -9) leaves
its directory; the next one removes those whose process is gone.
"""

from __future__ import annotations

import os
import shutil
import tempfile
from pathlib import Path

PREFIX = "statemigrate-"
_INFIX = "-ro-"


def _owner_pid(name: str) -> int | None:
    """The pid a private directory's name carries, or None (not one of ours, or older)."""
    if not name.startswith(PREFIX) or _INFIX not in name:
        return None
    pid, sep, _ = name.split(_INFIX, 1)[1].partition("-")
    return int(pid) if sep and pid.isdigit() else None


def _alive(pid: int) -> bool:
    if os.name != "posix":
        return True  # os.kill(pid, 0) sends CTRL_C_EVENT on Windows: leave it
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except OSError:
        return True  # alive under another account
    return True  # still running (or the pid was reused): leave it


def sweep() -> None:
    """Remove the private directories of readers that were killed (their pid is gone).

    Only directories named with a pid are removed; they hold links and the drivers'
    own files, and removing a link never touches its target.
    """
    for old in Path(tempfile.gettempdir()).glob(PREFIX + "*" + _INFIX + "*"):
        pid = _owner_pid(old.name)
        if pid is None or pid == os.getpid() or _alive(pid):
            continue
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)


def private_dir(engine: str) -> Path:
    """A new private directory (0700) for a read copy of a store of ``engine``.

    Sweeps the directories killed readers left first (:func:`sweep`).

    Raises:
        OSError: ``TMPDIR`` cannot hold it.
    """
    sweep()
    return Path(tempfile.mkdtemp(prefix=f"{PREFIX}{engine}{_INFIX}{os.getpid()}-"))


def link(src: Path, dst: Path, *, fallback: str = "copy") -> None:
    """Put ``src`` at ``dst``: a hard link where the file system allows, else the fallback.

    Args:
        src: a file of the store (or a directory, which always takes the fallback).
        dst: where it goes in the private directory.
        fallback: ``"copy"`` (the driver may change the file it opens) or ``"symlink"``
            (the driver only reads it; nothing is copied across file systems).

    Raises:
        OSError: neither worked.
    """
    try:
        os.link(src, dst, follow_symlinks=False)
        return
    except OSError:
        pass
    if fallback == "symlink":
        os.symlink(os.path.abspath(src), dst)
    elif src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copy2(src, dst)


def remove(directory: Path | None) -> None:
    """Remove a private directory and everything in it (never a link's target)."""
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
