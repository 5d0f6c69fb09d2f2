"""Permissions: nothing the tool creates is readable by more accounts than its source.

A private store (``chmod 600``) must not become a world-readable destination, backup,
``.partial`` or side file. The drivers (SQLite, RocksDB, LMDB, redb, HelixDB) create
their own files with the process umask, so a ``chmod`` afterwards would leave a window
in which another account could open them. Instead :func:`no_wider_than` narrows the
process umask for the duration of a verb, so every file and directory is created no
wider than the store it comes from, from its first byte.

``os.umask`` is process-wide: the library sets it around a whole verb (``convert``,
``upgrade``, ``downgrade``, ``stamp``) and restores it afterwards. The command line is
one process, one verb; a program that runs verbs on several threads at once shares
one umask between them (each verb only ever narrows it, never widens it).

On Windows the mode bits mean little and nothing here changes anything.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path

from .errors import DestinationError

_POSIX = os.name == "posix"
_ACCESS = 0o777
# The owner's own bits give nobody else access, and the tool must be able to write
# and search what it creates (a 0400 source would otherwise give a 0500 directory
# that the driver cannot create its files in).
_OWNER = 0o700

__all__ = ["creation_umask", "keep_owner", "mode_of_store", "narrowest", "no_wider_than"]


def mode_of_store(path: str | os.PathLike[str]) -> int | None:
    """The permission bits of a store, or None when it does not exist.

    A directory store's mode is the narrowest of the directory and everything below
    it (the data files of a 0755 directory may well be 0600).

    Args:
        path: the store's file or directory.

    Returns:
        The permission bits (``0o777`` part), or None when ``path`` cannot be seen.
    """
    try:
        st = os.stat(path)
    except OSError:
        return None
    mode = stat.S_IMODE(st.st_mode) & _ACCESS
    if stat.S_ISDIR(st.st_mode):
        for root, dirs, files in os.walk(path):
            for name in (*dirs, *files):
                try:
                    mode &= os.stat(os.path.join(root, name)).st_mode
                except OSError:  # a dangling link, a file removed meanwhile
                    continue
    return mode


def narrowest(modes: Iterable[int]) -> int:
    """The permission bits every one of ``modes`` grants (``0o777`` for none)."""
    out = _ACCESS
    for mode in modes:
        out &= mode
    return out


def creation_umask(mode: int) -> int:
    """The umask under which nothing created is wider than a store of ``mode``.

    For group and others: read and write as ``mode`` grants them, and search (x)
    where read is granted, so that directories stay usable to whoever may read the
    files (0600 gives 0o077: files 0600, directories 0700; 0640 gives 0o027). The
    owner keeps every bit.

    Args:
        mode: the store's permission bits.

    Returns:
        A umask (the bits to clear).
    """
    allowed = _OWNER
    for shift in (3, 0):
        bits = (mode >> shift) & 0o7
        grant = bits & 0o6
        if bits & 0o4:
            grant |= 0o1
        allowed |= grant << shift
    return _ACCESS & ~allowed


@contextmanager
def no_wider_than(*paths: str | os.PathLike[str] | None) -> Iterator[None]:
    """Create nothing wider than the narrowest of the stores at ``paths`` inside the block.

    Narrows the process umask (it never widens it: the current umask's bits are kept)
    and restores the previous one on exit. Paths that are None or do not exist are
    ignored; with none left, nothing changes. A no-op on Windows.

    Args:
        paths: the stores the created files come from or replace (source, the
            destination an ``--overwrite`` replaces, the store an upgrade backs up).
    """
    modes = [m for m in (mode_of_store(p) for p in paths if p is not None) if m is not None]
    if not _POSIX or not modes:
        yield
        return
    wanted = creation_umask(narrowest(modes))
    # Reading the umask means setting it: set a narrow one first, so that a file made
    # meanwhile on another thread is never wider than either value.
    previous = os.umask(wanted | 0o077)
    os.umask(previous | wanted)
    try:
        yield
    finally:
        os.umask(previous)


def keep_owner(built: Path, replaced: Path) -> None:
    """Give ``built`` (a file or a whole directory tree) the owner and group of ``replaced``.

    Called before an ``--overwrite`` puts a new store in place of an old one, so that the
    app that owned the old store can still open the new one. Only root can give files
    away; another user can still give them a group it belongs to (tried, never forced).
    Nothing happens when ``replaced`` does not exist, on Windows, or when nothing differs.

    Args:
        built: the new store, not yet in place.
        replaced: the store it will replace.

    Raises:
        DestinationError: running as root, the file system refused the change (exit 5);
            the new store is not put in place.
    """
    if not _POSIX:
        return
    try:
        st = os.stat(replaced)
    except OSError:
        return
    root = os.geteuid() == 0
    uid = st.st_uid if root else -1
    gid = st.st_gid
    for path in _tree(built):
        here = os.lstat(path)
        if (uid in (-1, here.st_uid)) and gid == here.st_gid:
            continue
        try:
            os.chown(path, uid, gid, follow_symlinks=False)
        except OSError as exc:
            if root:
                raise DestinationError(
                    f"{path}: cannot give the new store the owner of {replaced} "
                    f"({exc.strerror or exc})",
                    hint="the destination was not put in place",
                ) from exc
            return  # not a member of that group: the new store keeps this user's group


def _tree(path: Path) -> Iterator[Path]:
    """``path`` and, for a directory, everything below it (links not followed)."""
    yield path
    if path.is_dir() and not path.is_symlink():
        for root, dirs, files in os.walk(path):
            for name in (*dirs, *files):
                yield Path(root) / name
