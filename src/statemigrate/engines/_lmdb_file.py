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

from ..errors import SourceError
from ..model import TableInfo


def check_data_file(data: Path) -> None:
    """Refuse a damaged ``data.mdb`` before LMDB maps it.

    LMDB trusts the file: reading a page past the end of a file cut short, or a value
    whose damaged size runs past the end, is a SIGBUS that kills the interpreter. The
    native walk (``_native.lmdb_check``) reads the meta pages, then visits every page
    the newest one reaches and checks each link and size LMDB would follow, with plain
    reads. A file is truncated only when a page the trees reach lies past its end: the
    meta's last page may, when LMDB allocated it and never wrote it.
    """
    from .. import _native

    problem = _native.lmdb_check(str(data))
    if problem is None:
        return
    if problem.startswith(("has no valid meta page", "is too short")):
        raise SourceError(f"{data.parent}: not an LMDB store (data.mdb {problem})")
    if problem.startswith(("cannot be read", "is truncated")):
        raise SourceError(f"{data.parent}: data.mdb {problem}")
    raise SourceError(f"{data.parent}: data.mdb is damaged ({problem})")


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


def open_ro(path: Path, lmdb: Any, lock: bool, max_dbs: int = 0) -> Any:
    """The environment at ``path``, read-only, never created."""
    return lmdb.open(
        str(path), subdir=True, readonly=True, lock=lock, max_dbs=max_dbs, create=False
    )


def count_dbs(path: Path, lmdb: Any, lock: bool) -> int:
    """How many named databases the environment holds (its main database's entries)."""
    env = open_ro(path, lmdb, lock)
    try:
        return int(env.stat()["entries"])
    finally:
        env.close()


def walked_digests(
    data: Path, txnid: int, tables: list[TableInfo]
) -> list[tuple[int, int, int]] | None:
    """The tables' ``(count, sum, payload bytes)`` in transaction ``txnid``'s snapshot of
    ``data`` (a ``data.mdb``), by the native page walk; None where the walk declines."""
    from .. import _native

    wanted = [(t.name.encode("utf-8"), t.versioned) for t in tables]
    try:
        found = _native.lmdb_digests(str(data), txnid, wanted)
    except ValueError:
        return None
    return [(int(c), int(s), int(n)) for c, s, n in found]
