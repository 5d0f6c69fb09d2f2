"""LMDB's file: the structural check before LMDB maps it, the map size a compacting copy
keeps (the meta pages, read without LMDB), and opening it read-only. Used by
:mod:`statemigrate.engines.lmdb`.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import SourceError
from ...model import TableInfo


def data_file(path: Path) -> Path:
    """The file holding an environment's pages: ``data.mdb`` in a directory store, the
    store itself in a single-file one (``MDB_NOSUBDIR``, py-lmdb's ``subdir=False``)."""
    return path / "data.mdb" if path.is_dir() else path


def lock_file(path: Path) -> Path:
    """LMDB's lock file: ``lock.mdb`` in a directory store, ``PATH-lock`` beside a single
    file (what ``mdb_env_open`` names with and without ``MDB_NOSUBDIR``)."""
    return path / "lock.mdb" if path.is_dir() else Path(str(path) + "-lock")


def is_single_file(path: Path) -> bool:
    """Whether ``path`` is a single-file LMDB environment: a regular file whose first
    page is an LMDB meta page (the magic, read without LMDB). Changes nothing."""
    if not path.is_file():
        return False
    try:
        with open(path, "rb") as f:
            head = f.read(_META_AT + 4)
    except OSError:
        return False
    return len(head) == _META_AT + 4 and struct.unpack_from("<I", head, _META_AT)[0] == _MAGIC


def check_data_file(data: Path, store: Path | None = None) -> None:
    """Refuse a damaged ``data.mdb`` (or single-file environment) before LMDB maps it.

    LMDB trusts the file: reading a page past the end of a file cut short, or a value
    whose damaged size runs past the end, is a SIGBUS that kills the interpreter. The
    native walk (``_native.lmdb_check``) reads the meta pages, then visits every page
    the newest one reaches and checks each link and size LMDB would follow, with plain
    reads. A file is truncated only when a page the trees reach lies past its end: the
    meta's last page may, when LMDB allocated it and never wrote it.
    """
    from ... import _native

    problem = _native.lmdb_check(str(data))
    if problem is None:
        return
    # A directory store is named with its data.mdb; a single file is the store itself.
    where, what = (data.parent, "data.mdb ") if store is None else (store, "")
    if problem.startswith(("has no valid meta page", "is too short")):
        raise SourceError(f"{where}: not an LMDB store ({what}{problem})")
    if problem.startswith(("cannot be read", "is truncated")):
        raise SourceError(f"{where}: {what}{problem}")
    raise SourceError(f"{where}: {what}is damaged ({problem})")


# LMDB's meta pages (0.9, 64-bit little-endian): after the 16-byte page header, the
# magic and version (u32 each), the fixed address, the map size, the free and main
# databases' records (48 bytes each, the first holding the page size), the last page
# and the transaction id.
_META = struct.Struct("<IIQQI44x48xQQ")
_META_AT, _MAGIC = 16, 0xBEEFC0DE


def _meta_pages(read: Callable[[int, int], bytes]) -> list[tuple[int, int, int]]:
    """``(offset of the map size, map size, txnid)`` of both meta pages, or [] if unreadable."""
    head = read(_META.size, _META_AT)
    if len(head) < _META.size:
        return []
    magic, _v, _a, map_size, page_size, _last, txnid = _META.unpack(head)
    other = read(_META.size, page_size + _META_AT) if magic == _MAGIC and page_size else b""
    if len(other) < _META.size or _META.unpack(other)[0] != _MAGIC:
        return []
    second = _META.unpack(other)
    return [(_META_AT + 16, map_size, txnid), (page_size + _META_AT + 16, second[3], second[6])]


def keep_map_size(source: Path, fd: int) -> None:
    """Give a compacting copy (open at ``fd``) the map size its source's newest meta records.

    ``mdb_env_copy`` writes the map size of the environment it copies from, which
    py-lmdb opens with its own (the data's size at least); ``mdb_copy`` keeps the file's.
    An app that opens the copy without setting a map size gets the source's, as it did.
    """
    with open(source, "rb") as f:
        metas = _meta_pages(lambda n, at: os.pread(f.fileno(), n, at))
    copied = _meta_pages(lambda n, at: os.pread(fd, n, at))
    if not metas or not copied:
        return
    wanted = max(metas, key=lambda m: m[2])[1]
    for at, size, _txnid in copied:
        if size < wanted:
            os.pwrite(fd, struct.pack("<Q", wanted), at)


def open_ro(path: Path, lmdb: Any, lock: bool, max_dbs: int = 0, subdir: bool = True) -> Any:
    """The environment at ``path``, read-only, never created (a single file: ``subdir``
    False; read-only, LMDB opens it ``O_RDONLY`` and makes no lock file without ``lock``)."""
    return lmdb.open(
        str(path), subdir=subdir, readonly=True, lock=lock, max_dbs=max_dbs, create=False
    )


def count_dbs(path: Path, lmdb: Any, lock: bool, subdir: bool = True) -> int:
    """How many named databases the environment holds at most (its main database's
    entries: in an unnamed database holding records, those count too)."""
    env = open_ro(path, lmdb, lock, subdir=subdir)
    try:
        entries = int(env.stat()["entries"])
        if entries <= _FEW_DBS:
            return entries
        # An unnamed database holding records (a Postfix map): only a key whose value
        # has the size of LMDB's database record may name a database (max_dbs sizes
        # LMDB's per-database arrays, allocated at open).
        with env.begin(buffers=True) as txn:
            return sum(
                1
                for key, value in txn.cursor()
                if len(value) == SUBDB_RECORD_BYTES and b"\x00" not in bytes(key)
            )
    finally:
        env.close()


_FEW_DBS = 256
# A named database's entry in the unnamed database is LMDB's MDB_db record: 48 bytes
# on every 64-bit build (and the node flagged F_SUBDATA, which py-lmdb does not show).
SUBDB_RECORD_BYTES = 48


def walked_digests(
    data: Path, txnid: int, tables: list[TableInfo]
) -> list[tuple[int, int, int]] | None:
    """The tables' ``(count, sum, payload bytes)`` in transaction ``txnid``'s snapshot of
    ``data`` (a ``data.mdb``), by the native page walk; None where the walk declines."""
    from ... import _native

    wanted = [(t.name.encode("utf-8"), t.versioned) for t in tables]
    try:
        found = _native.lmdb_digests(str(data), txnid, wanted)
    except ValueError:
        return None
    return [(int(c), int(s), int(n)) for c, s, n in found]
