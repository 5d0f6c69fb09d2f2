"""Durable file-system steps: fsync of a store and its directory, atomic placement."""

from __future__ import annotations

import contextlib
import ctypes
import ctypes.util
import errno
import functools
import os
import shutil
import signal
import stat
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

_RENAME_EXCHANGE = 2
_AT_FDCWD = -100
_SYNC_FILE_RANGE_WRITE = 2
# A copy's step: its write-back is started after each (copy_file_written_back).
_COPY_STEP = 16 << 20

# Fault injection for the kill -9 harness (statemigrate.testing.killpoints): the process
# SIGKILLs itself when it reaches the named step, so that steps too short to hit with
# a timer (between sync and rename, between the two renames of a swap) are tested.
CRASH_ENV = "STATEMIGRATE_CRASH_AT"
NO_EXCHANGE_ENV = "STATEMIGRATE_NO_RENAME_EXCHANGE"
# ``STEP:FILE``: the first time the process reaches STEP it creates FILE and waits until
# the test removes it, so that a signal is sent while a step is certainly in flight.
HOLD_ENV = "STATEMIGRATE_HOLD_AT"
_HOLD_LIMIT = 300.0  # seconds: a hang guard only; a test removes the file in milliseconds
_held: set[str] = set()


def crash_point(name: str) -> None:
    """At a named step (tests only): SIGKILL this process if ``$STATEMIGRATE_CRASH_AT``
    names it; hold it once, until a file is removed, if ``$STATEMIGRATE_HOLD_AT`` does."""
    if os.environ.get(CRASH_ENV) == name:
        os.kill(os.getpid(), signal.SIGKILL)
    step, _, path = os.environ.get(HOLD_ENV, "").partition(":")
    if step == name and name not in _held:
        _held.add(name)
        _hold(Path(path))


def _hold(marker: Path) -> None:
    marker.touch()
    deadline = time.monotonic() + _HOLD_LIMIT
    while marker.exists() and time.monotonic() < deadline:
        time.sleep(0.005)  # a signal's handler runs here, as it would inside the step


def fsync_tree(path: Path) -> None:
    """fsync a file, or every file and directory below a directory, then its parent."""
    if path.is_dir():
        for root, _dirs, files in os.walk(path):
            for name in files:
                _fsync_file(Path(root) / name)
            _fsync_dir(Path(root))
    elif path.exists():
        _fsync_file(path)
    _fsync_dir(path.parent)


def _fsync_file(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: Path) -> None:
    if not hasattr(os, "O_DIRECTORY"):
        return  # Windows opens no directory to sync it; NTFS journals the rename itself
    fd = os.open(path or Path("."), os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


@functools.cache
def _libc_function(name: str) -> Any:
    """The C library's function ``name`` (errno kept for ``ctypes.get_errno``), or None."""
    libc_name = ctypes.util.find_library("c")
    if libc_name is None:
        return None
    return getattr(ctypes.CDLL(libc_name, use_errno=True), name, None)


def copy_file_written_back(src: Path, dst: Path) -> None:
    """Copy ``src``'s bytes to the new file ``dst`` (created as ``open(dst, "wb")`` does),
    starting the copy's write-back to the disk as it goes, so that the fsync after it
    waits for little: on Linux, ``copy_file_range`` in 16 MiB steps, each handed to
    ``sync_file_range(SYNC_FILE_RANGE_WRITE)``, which starts writing without waiting.
    Only the source's data is copied: its holes (a redb file's never-written gaps) stay
    holes in the copy, which reads the same and takes no more disk than the source.
    Elsewhere, or where the file system cannot (``copy_file_range`` refused), the rest
    is copied as ``shutil.copyfile`` does and the fsync waits for all of it.

    Raises:
        OSError: as ``shutil.copyfile`` does (a full disk, an unreadable source …).
    """
    if _libc_function("sync_file_range") is None or not hasattr(os, "copy_file_range"):
        shutil.copyfile(src, dst)
        return
    with open(src, "rb") as fin, open(dst, "wb") as fout:
        i, o = fin.fileno(), fout.fileno()
        size = os.fstat(i).st_size
        for start, end in _data_regions(i, size):
            os.lseek(i, start, os.SEEK_SET)
            os.lseek(o, start, os.SEEK_SET)
            copy_fd_written_back(i, o, end - start)
        os.ftruncate(o, size)  # the length, past a last hole


def _data_regions(fd: int, size: int) -> Iterator[tuple[int, int]]:
    """The ``(start, end)`` of each run of data in the open file's first ``size`` bytes
    (``SEEK_DATA``/``SEEK_HOLE``); the whole file where the system cannot tell."""
    seek_data, seek_hole = getattr(os, "SEEK_DATA", None), getattr(os, "SEEK_HOLE", None)
    if seek_data is None or seek_hole is None:
        yield 0, size
        return
    pos = 0
    while pos < size:
        try:
            data = os.lseek(fd, pos, seek_data)
            hole = min(os.lseek(fd, data, seek_hole), size)
        except OSError as exc:
            if exc.errno == errno.ENXIO:
                return  # no data after pos: the rest is a hole
            yield pos, size  # the file system cannot tell: all of it
            return
        if data >= size:
            return
        yield data, hole
        pos = hole


def copy_fd_written_back(i: int, o: int, length: int | None = None) -> None:
    """Copy the rest of the open file ``i`` (its next ``length`` bytes, when given) to the
    open file ``o``, each from its offset, as :func:`copy_file_written_back` does (its
    write-back started where Linux can).

    Raises:
        OSError: a failed read or write (a full disk …).
    """
    start = _libc_function("sync_file_range")
    base = os.lseek(o, 0, os.SEEK_CUR)
    done = 0

    def step(most: int) -> int:
        """The next step's bytes: ``most``, or what is left of ``length`` if less (0: done)."""
        return most if length is None else min(most, length - done)

    while start is not None and hasattr(os, "copy_file_range") and step(1):
        try:
            n = os.copy_file_range(i, o, step(_COPY_STEP))
        except OSError as exc:
            if exc.errno not in (errno.EXDEV, errno.ENOSYS, errno.EINVAL, errno.EOPNOTSUPP):
                raise
            n = 0
        if n == 0:
            # The end, or a file system whose copy_file_range gives nothing (some
            # answer 0 before the end): the rest, if any, by reads and writes from
            # where the steps left both offsets.
            break
        # Only starts the write-back: its errors are the fsync's to report.
        start(o, ctypes.c_int64(base + done), ctypes.c_int64(n), _SYNC_FILE_RANGE_WRITE)
        done += n
    while step(1) and (chunk := os.read(i, step(1 << 20))):
        view = memoryview(chunk)
        while view:
            view = view[os.write(o, view) :]
        done += len(chunk)


def _exchange(a: Path, b: Path) -> bool:
    """Atomically swap two paths (Linux renameat2 RENAME_EXCHANGE); False if unsupported."""
    if os.environ.get(NO_EXCHANGE_ENV):  # tests of the rename-aside fallback
        return False
    fn = _libc_function("renameat2")
    if fn is None:
        return False
    res = fn(_AT_FDCWD, os.fsencode(a), _AT_FDCWD, os.fsencode(b), _RENAME_EXCHANGE)
    if res == 0:
        return True
    err = ctypes.get_errno()
    if err in (errno.EINVAL, errno.ENOSYS, errno.EOPNOTSUPP):
        return False
    raise OSError(err, os.strerror(err), str(a))


def place(built: Path, final: Path) -> None:
    """Put the finished store ``built`` at ``final``.

    A new path is a plain rename. An existing ``final`` (``--overwrite``) is swapped
    with the new store in one atomic step where the file system can, so ``final``
    always holds either the complete old store or the complete new one; the old one
    is removed only after the swap is on disk. Where the file system cannot swap, a
    file still replaces a file in one rename; an old directory is renamed aside first
    and put back by :func:`recover_placement` if the process dies before the new one is
    in place (the only window where ``final`` is briefly absent).
    """
    if not (final.exists() or final.is_symlink()):
        os.rename(built, final)
        crash_point("place:new")
        _fsync_dir(final.parent)
        return
    swap, aside = _swap_path(final), _aside_path(final)
    os.rename(built, swap)
    crash_point("place:swap")
    if _exchange(swap, final):
        crash_point("place:exchanged")
        _fsync_dir(final.parent)
        remove_path(swap)  # the old store
        return
    if not swap.is_dir() and not final.is_dir():
        os.replace(swap, final)  # a file replaces a file in one step (Windows too)
        _fsync_dir(final.parent)
        return
    # Directories cannot be swapped here: for a moment the old one stands aside
    # (recover_placement puts it back if the process dies then).
    os.rename(final, aside)
    crash_point("place:aside")
    os.rename(swap, final)
    crash_point("place:renamed")
    _fsync_dir(final.parent)
    remove_path(aside)


def recover_placement(final: Path) -> None:
    """Undo what a placement killed half-way left: restore the old store, drop leftovers."""
    swap, aside = _swap_path(final), _aside_path(final)
    if (aside.exists() or aside.is_symlink()) and not (final.exists() or final.is_symlink()):
        os.rename(aside, final)
        _fsync_dir(final.parent)
    remove_path(aside)
    remove_path(swap)


def _swap_path(final: Path) -> Path:
    return final.with_name(final.name + ".swap")


def _aside_path(final: Path) -> Path:
    return final.with_name(final.name + ".replaced")


def lexists(path: Path) -> bool:
    """Whether anything is at ``path``, a dangling symbolic link included."""
    return os.path.lexists(path)


def is_within(inner: Path, outer: Path) -> bool:
    """Whether ``inner`` is ``outer`` or lies below it, whatever the spelling.

    Symbolic links and ``..`` are resolved in every component, as the kernel resolves
    them (``os.path.realpath``); where ``outer`` exists, ``inner`` and each of its
    parents is also compared with it by device and inode, which sees hard links and
    bind mounts. Neither path needs to exist.

    Args:
        inner: the path that may lie inside.
        outer: the path that may contain it (a file contains only itself).

    Returns:
        True when ``inner`` names ``outer`` or something below it.
    """
    target = Path(os.path.realpath(outer))
    try:
        outer_st: os.stat_result | None = os.stat(outer)
    except (OSError, ValueError):
        outer_st = None
    here = Path(os.path.realpath(inner))
    for p in (here, *here.parents):
        if p == target:
            return True
        if outer_st is not None:
            with contextlib.suppress(OSError, ValueError):
                if os.path.samestat(os.stat(p), outer_st):
                    return True
    return False


def kind_of(path: Path, follow: bool = True) -> str:
    """What is at ``path`` in a few words: "a regular file", "a FIFO", "a symbolic link" …

    Raises:
        OSError: ``path`` cannot be looked at (missing, a symbolic link loop …).
    """
    return kind_of_mode((os.stat if follow else os.lstat)(path).st_mode)


_KINDS = (
    (stat.S_ISREG, "a regular file"),
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISLNK, "a symbolic link"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISSOCK, "a socket"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
)


def kind_of_mode(mode: int) -> str:
    """:func:`kind_of` for a mode already read (``st_mode``)."""
    return next((name for test, name in _KINDS if test(mode)), "a special file")


def process_gone(pid: int) -> bool:
    """Whether no process has ``pid``; never known on Windows (False there, where
    ``os.kill(pid, 0)`` would send CTRL_C_EVENT). A pid alive under another account,
    or reused, counts as not gone."""
    if os.name != "posix":
        return False
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    except OSError:
        return False  # alive under another account
    return False


def remove_path(path: Path) -> None:
    """Remove a file or a directory tree if it exists."""
    if path.is_dir() and not path.is_symlink():
        shutil.rmtree(path)
    elif path.exists() or path.is_symlink():
        path.unlink()


def store_size(path: Path) -> int:
    """Bytes of a file, or of every file below a directory."""
    if path.is_dir():
        return sum((Path(r) / f).stat().st_size for r, _d, fs in os.walk(path) for f in fs)
    return path.stat().st_size if path.exists() else 0
