"""Private read copies, for engines whose driver cannot open a store without writing to it.

RocksDB (rocksdict writes its config file and an info ``LOG`` into the directory it
opens), Turso (no read-only open: it creates a ``-wal`` and may checkpoint into the
file) and HelixDB (its reader writes manifests) read a private image of the store in a
directory under ``TMPDIR``: ``statemigrate-<engine>-ro-<pid>-<random>``, mode 0700, so
the source never changes. The image is made of hard links where the file system allows
(nothing is copied, and files the app deletes meanwhile stay readable), else of
symbolic links or copies as the engine says. A reader killed mid-read (kill -9) leaves
its directory; the next one removes those whose process is gone.

Every copy, image and backup of a directory store goes through :func:`replicate`
(:func:`store_files` walks it, :func:`copy_file` copies one of its files), which never
follows a link out of the store: see :func:`store_files` for the rule.

This module is public for engine authors: a third-party engine (the TurboKV plugin is
one) makes its private images and copies with it, as the bundled engines do.
"""

from __future__ import annotations

import contextlib
import errno
import os
import shutil
import stat
import tempfile
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from ..errors import SourceError
from ..fsutil import copy_fd_written_back, is_within, kind_of, process_gone

PREFIX = "statemigrate-"
_INFIX = "-ro-"


def _owner_pid(name: str) -> int | None:
    """The pid a private directory's name carries, or None (not one of ours, or older)."""
    if not name.startswith(PREFIX) or _INFIX not in name:
        return None
    pid, sep, _ = name.split(_INFIX, 1)[1].partition("-")
    return int(pid) if sep and pid.isdigit() else None


def sweep() -> None:
    """Remove the private directories of readers that were killed (their pid is gone).

    Only directories named with a pid are removed; they hold links and the drivers'
    own files, and removing a link never touches its target.
    """
    for old in Path(tempfile.gettempdir()).glob(PREFIX + "*" + _INFIX + "*"):
        pid = _owner_pid(old.name)
        # Still running (or the pid reused), or not known (Windows): leave it.
        if pid is None or pid == os.getpid() or not process_gone(pid):
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


_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)
_DIR_FDS = os.open in os.supports_dir_fd and os.link in os.supports_dir_fd
_OUT = "a symbolic link out of the store; statemigrate does not follow links out of a store"

# How replicate puts a file at the destination: ``copy``; ``link`` (a hard link, else a
# copy); ``link-or-symlink`` (a hard link, else a symbolic link to the store's file, for
# a driver that only reads it); ``skip``.
Way = Literal["copy", "link", "link-or-symlink", "skip"]
# Copies the rest of an open file (source descriptor, destination descriptor).
CopyBytes = Callable[[int, int], None]


@dataclass(frozen=True)
class StoreFile:
    """A regular file of a directory store, as :func:`store_files` found it."""

    rel: Path  # its name in the directory walked (a link's own name)
    real: Path  # what is read, relative to the store: itself, or an in-store link's target
    size: int


def store_files(store: Path, within: Path | None = None) -> tuple[list[Path], list[StoreFile]]:
    """The directories and files of the directory store ``store``, no link followed.

    The rule: the store is walked with ``lstat``, nothing is followed. A regular file or
    a directory is the store's. A symbolic link whose target, resolved, is a regular
    file inside the same store (:func:`fsutil.is_within`) is that file under the link's
    name (C8: table files moved within the store and linked back). Any other link (out
    of the store, to a directory, to nothing), a FIFO, a socket or a device is refused:
    a root installer must never read, through a store a user owns, a file that user
    cannot read.

    Args:
        store: the directory walked.
        within: the store it belongs to (default ``store``), which a link may lead into
            (HelixDB reads ``STORE/db``); :attr:`StoreFile.real` is relative to it.

    Raises:
        SourceError: one line naming the first file refused (exit 4).
    """
    dirs: list[Path] = []
    files: list[StoreFile] = []
    top = store if within is None else within
    root = Path(os.path.realpath(top))
    prefix = store.relative_to(top)

    def walk(rel: Path) -> None:
        with os.scandir(store / rel) as it:
            entries = sorted(it, key=lambda e: e.name)
        for entry in entries:
            here = rel / entry.name
            try:
                st = entry.stat(follow_symlinks=False)
            except FileNotFoundError:
                continue  # removed meanwhile (a store's obsolete file): not the store's now
            if stat.S_ISDIR(st.st_mode):
                dirs.append(here)
                walk(here)
            elif stat.S_ISREG(st.st_mode):
                files.append(StoreFile(here, prefix / here, st.st_size))
            elif stat.S_ISLNK(st.st_mode):
                files.append(_linked(store, root, here))
            else:
                what = kind_of(store / here, follow=False)
                raise SourceError(
                    f"{store / here}: {what} inside the store {store}, not a store's file"
                )

    try:
        walk(Path())
    except OSError as exc:
        raise SourceError(f"{store}: cannot be read ({exc.strerror or exc})") from exc
    return dirs, files


def _linked(store: Path, root: Path, rel: Path) -> StoreFile:
    """The in-store file a link inside the store leads to, or its refusal (see store_files)."""
    target = Path(os.path.realpath(store / rel))
    if not is_within(target, root) or target == root:
        raise SourceError(f"{store / rel}: {_OUT}")
    try:
        st = os.lstat(target)
    except OSError:
        st = None
    if st is None or not stat.S_ISREG(st.st_mode):
        what = "nothing" if st is None else kind_of(target, follow=False)
        raise SourceError(
            f"{store / rel}: a symbolic link inside the store to {what}; statemigrate "
            "follows a link only to a file of the same store"
        )
    return StoreFile(rel, target.relative_to(root), st.st_size)


@contextlib.contextmanager
def _opened(store: Path, rel: Path) -> Iterator[tuple[int, int | None, os.stat_result]]:
    """The store's file ``rel`` open for reading, every component opened without following
    a link (``O_NOFOLLOW``) and the file checked regular on its descriptor: a link swapped
    in after :func:`store_files` looked is refused, not followed.

    Yields:
        (the file's descriptor, its directory's descriptor or None, its fstat).
    """
    where = store / rel
    fds: list[int] = []
    try:
        try:
            if _DIR_FDS:
                fds.append(os.open(store, os.O_RDONLY | os.O_DIRECTORY))
                for part in rel.parts[:-1]:
                    flags = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW
                    fds.append(os.open(part, flags, dir_fd=fds[-1]))
                flags = os.O_RDONLY | _NOFOLLOW | getattr(os, "O_NONBLOCK", 0)
                fd = os.open(rel.name, flags, dir_fd=fds[-1])
            else:
                fd = os.open(where, os.O_RDONLY | _NOFOLLOW | getattr(os, "O_BINARY", 0))
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                raise SourceError(f"{where}: {_OUT}") from exc
            raise SourceError(f"{where}: cannot be read ({exc.strerror or exc})") from exc
        fds.append(fd)
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise SourceError(f"{where}: not a regular file inside the store, not a store's file")
        yield fd, (fds[-2] if _DIR_FDS else None), st
    finally:
        for f in reversed(fds):
            os.close(f)


def copy_file(store: Path, rel: Path, dst: Path, copy: CopyBytes | None = None) -> None:
    """Copy the store's file ``rel`` to the new file ``dst``, its mode and times kept,
    without following a link (see :func:`_opened`).

    Raises:
        SourceError: the file is a link or not a regular file (exit 4).
        OSError: reading or writing failed (a full disk …).
    """
    with _opened(store, rel) as (fd, _parent, st):
        _copy_open(fd, st, dst, copy)


_CHUNK = 1 << 20


def same_bytes(a: Path, b: Path, rels: Iterable[Path]) -> bool:
    """Whether each of the files ``rels`` is the same bytes under directory ``a`` as under
    directory ``b``, both read without following a link (see :func:`_opened`).

    A file missing, a link or not a regular file on either side is an answer, False,
    not an error: the caller then checks another way.
    """
    try:
        for rel in rels:
            with _opened(a, rel) as (fa, _pa, sa), _opened(b, rel) as (fb, _pb, sb):
                if sa.st_size != sb.st_size:
                    return False
                if (sa.st_dev, sa.st_ino) == (sb.st_dev, sb.st_ino):
                    continue  # one file, linked twice
                while True:
                    chunk = os.read(fa, _CHUNK)
                    if chunk != os.read(fb, _CHUNK):
                        return False
                    if not chunk:
                        break
    except (SourceError, OSError):
        return False
    return True


def _copy_open(fd: int, st: os.stat_result, dst: Path, copy: CopyBytes | None) -> None:
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW | getattr(os, "O_BINARY", 0)
    out = os.open(dst, flags, 0o600)
    try:
        (copy or copy_fd_written_back)(fd, out)
        os.chmod(out if os.chmod in os.supports_fd else dst, stat.S_IMODE(st.st_mode))
        os.utime(out if os.utime in os.supports_fd else dst, ns=(st.st_atime_ns, st.st_mtime_ns))
    finally:
        os.close(out)


def _hard_link(fd: int, parent: int | None, st: os.stat_result, src: Path, dst: Path) -> bool:
    """A hard link at ``dst`` to the open file; False where the file system refuses one.
    The link made is checked to be that very file (not something swapped in meanwhile)."""
    try:
        if parent is not None:
            os.link(src.name, dst, src_dir_fd=parent, follow_symlinks=False)
        else:
            os.link(src, dst, follow_symlinks=False)
    except OSError:
        return False
    made = os.lstat(dst)
    if not stat.S_ISREG(made.st_mode) or (made.st_dev, made.st_ino) != (st.st_dev, st.st_ino):
        os.unlink(dst)
        raise SourceError(f"{src}: changed while it was read; statemigrate does not follow links")
    return True


def replicate(
    store: Path,
    dest: Path,
    way: Callable[[StoreFile], Way] | None = None,
    copy: Callable[[StoreFile], CopyBytes | None] | None = None,
    order: Callable[[StoreFile], Any] | None = None,
    within: Path | None = None,
) -> None:
    """Put the directory store ``store``'s files at ``dest``, never following a link.

    The store is walked first (:func:`store_files`, whose rule refuses links out of the
    store and special files): a refusal comes before anything is written. Each file is
    then opened without following a link and checked on its descriptor
    (:func:`_opened`); a link inside the store to one of its files gives the link's name
    that file's content. Directories and files keep their modes; copies keep their times.

    Args:
        store: the store directory.
        dest: where its image or copy goes: an existing empty directory, or a new path
            (created, and removed again if anything fails).
        way: how each file is put (:data:`Way`; default ``copy``).
        copy: for a file copied, the function copying its bytes (default: all of them).
        order: a sort key: files taken first get a smaller one (default: walk order).
        within: the store ``store`` belongs to, where links may lead (:func:`store_files`).

    Raises:
        SourceError: a file the rule refuses (exit 4), named.
        OSError: the destination cannot be written (a full disk …).
    """
    dirs, files = store_files(store, within)
    top = store if within is None else within
    made = not os.path.lexists(dest)
    if made:
        dest.mkdir(mode=0o700)
    try:
        for d in dirs:
            (dest / d).mkdir(mode=0o700)
        for f in sorted(files, key=order) if order else files:
            how = way(f) if way else "copy"
            if how == "skip":
                continue
            with _opened(top, f.real) as (fd, parent, st):
                if how != "copy" and _hard_link(fd, parent, st, top / f.real, dest / f.rel):
                    continue
                if how == "link-or-symlink":
                    os.symlink(os.path.abspath(top / f.real), dest / f.rel)
                else:
                    _copy_open(fd, st, dest / f.rel, copy(f) if copy else None)
        for d in reversed(dirs):
            os.chmod(dest / d, stat.S_IMODE(os.lstat(store / d).st_mode))
        if made:
            os.chmod(dest, stat.S_IMODE(os.stat(store).st_mode))
    except BaseException:
        if made:
            shutil.rmtree(dest, ignore_errors=True)
        raise


def remove(directory: Path | None) -> None:
    """Remove a private directory and everything in it (never a link's target)."""
    if directory is not None:
        shutil.rmtree(directory, ignore_errors=True)
