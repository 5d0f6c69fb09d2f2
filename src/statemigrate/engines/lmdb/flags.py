"""LMDB databases with flags (``MDB_DUPSORT``, ``INTEGERKEY`` …) in the state model.

A database's flags change what its records are and how LMDB orders them, so a flagged
database is read through an order-preserving codec (its records come out of LMDB's
cursor already in the model's byte order) and its flags travel in the table's meta
(``TableInfo.meta["lmdb"] = {"flags": [...]}``, the metadata's ``table:<name>``), so
that a conversion back to LMDB opens the database with them again:

- ``dupsort`` (with ``dupfixed``): a multimap table, as redb's multimap tables are (one
  representation, DESIGN.md): state key = the key escaped (each ``00`` as ``00 ff``) ‖
  ``00 00`` ‖ the value, state value empty. LMDB orders by key, then value: so does the
  encoding (the escaped key sorts as the key, its end before any longer key).
- ``integerkey`` (``integerdup`` for a dupsort database's values): native unsigned
  integers of 4 or 8 bytes (LMDB's ``unsigned int`` or ``size_t``), ordered as numbers:
  carried big-endian, which orders them as bytes.
- ``reverse_key``: keys compared from their last byte: carried reversed.

``MDB_REVERSEDUP`` is refused: py-lmdb cannot open a database with it, so it could not
be written back.
"""

from __future__ import annotations

import struct
import sys
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from ...errors import DestinationError, SourceError

# py-lmdb's names of the flags it opens a database with, in a fixed order.
FLAG_NAMES = ("reverse_key", "dupsort", "integerkey", "integerdup", "dupfixed")
# MDB_db's md_flags (bytes 4..6 of a named database's record in the unnamed one).
MDB_REVERSEDUP = 0x40
META_KEY = "lmdb"
_NATIVE = sys.byteorder


def db_flags(db: Any, txn: Any) -> list[str]:
    """The flags a named database was created with (py-lmdb's names), set ones only."""
    found = db.flags(txn)
    return [name for name in FLAG_NAMES if found.get(name)]


def refuse_unreadable(name: str, record: bytes, where: object) -> None:
    """Refuse (exit 4) a database whose flags py-lmdb cannot reopen it with.

    Args:
        name: the database's name.
        record: its ``MDB_db`` record (the value of its name in the unnamed database).
        where: the store, for the message.
    """
    if len(record) >= 6 and struct.unpack_from("<H", record, 4)[0] & MDB_REVERSEDUP:
        raise SourceError(
            f"{where}: named database {name!r} is REVERSEDUP (its duplicates compared from "
            "their last byte): py-lmdb cannot open a database with that flag, so it could "
            "not be written back; not supported"
        )


def table_meta(flags: Iterable[str]) -> dict[str, Any]:
    """A table's meta for a database with ``flags`` (empty for none)."""
    flags = [f for f in FLAG_NAMES if f in set(flags)]
    return {META_KEY: {"flags": flags}} if flags else {}


def flags_of(meta: Mapping[str, Any] | None, where: object = "") -> list[str]:
    """The LMDB flags a table's meta records (``[]``: a plain database).

    A redb multimap table of ``&[u8]`` keys and values, which has this very
    representation, is a DUPSORT database.

    Raises:
        DestinationError: flags this engine does not know (exit 5).
    """
    fact = (meta or {}).get(META_KEY)
    if not isinstance(fact, Mapping):
        return ["dupsort"] if _bytes_multimap((meta or {}).get("redb")) else []
    flags = fact.get("flags") or []
    unknown = [f for f in flags if f not in FLAG_NAMES]
    if unknown or not isinstance(flags, list):
        raise DestinationError(f"{where}: unknown LMDB database flags {unknown or flags!r}")
    return [f for f in FLAG_NAMES if f in flags]


def _bytes_multimap(redb: Any) -> bool:
    """Whether redb's facts are a multimap table of ``&[u8]`` keys and values."""
    if not isinstance(redb, Mapping) or not redb.get("multimap"):
        return False
    types = [redb.get("key"), redb.get("value")]
    return all(isinstance(t, Mapping) and t.get("name") == "&[u8]" for t in types)


def open_kwargs(flags: Iterable[str]) -> dict[str, bool]:
    """py-lmdb's ``open_db`` keyword arguments for ``flags``."""
    return {f: True for f in flags}


def _escape(key: bytes) -> bytes:
    return key.replace(b"\x00", b"\x00\xff") + b"\x00\x00"


def _unescape(data: bytes) -> tuple[bytes, bytes]:
    """(key, the rest) of an escaped key and what follows its ``00 00`` end."""
    out = bytearray()
    i = 0
    while True:
        j = data.find(b"\x00", i)
        if j < 0 or j + 1 >= len(data):
            raise ValueError("no end of the escaped key")
        out += data[i:j]
        if data[j + 1] == 0:
            return bytes(out), data[j + 2 :]
        if data[j + 1] != 0xFF:
            raise ValueError("a NUL not escaped")
        out.append(0)
        i = j + 2


def _int_swap(data: bytes, where: str) -> bytes:
    """Native <-> big-endian of a 4- or 8-byte unsigned integer (its own inverse)."""
    if len(data) not in (4, 8):
        raise ValueError(f"{where} of {len(data)} bytes is no 4- or 8-byte integer")
    return data[::-1] if _NATIVE == "little" else data


class Codec:
    """Between a flagged database's (key, value) pairs and the model's records."""

    def __init__(self, flags: Iterable[str]):
        flags = set(flags)
        self.flags = [f for f in FLAG_NAMES if f in flags]
        self.dupsort = "dupsort" in flags
        self.integerkey = "integerkey" in flags
        self.integerdup = "integerdup" in flags
        self.reverse_key = "reverse_key" in flags

    def _key_out(self, key: bytes) -> bytes:
        if self.integerkey:
            return _int_swap(key, "an INTEGERKEY key")
        if self.reverse_key:
            return key[::-1]
        return key

    _key_in = _key_out  # each transform is its own inverse

    def _dup_out(self, value: bytes) -> bytes:
        return _int_swap(value, "an INTEGERDUP value") if self.integerdup else value

    _dup_in = _dup_out

    def to_model(self, key: bytes, value: bytes) -> tuple[bytes, bytes]:
        """The model's record of a stored pair."""
        if self.dupsort:
            return _escape(self._key_out(key)) + self._dup_out(value), b""
        return self._key_out(key), value

    def from_model(self, key: bytes, value: bytes) -> tuple[bytes, bytes]:
        """The stored pair of a model's record.

        Raises:
            ValueError: a key that is no record of such a database.
        """
        if self.dupsort:
            if value:
                raise ValueError("a multimap record's value must be empty")
            stored, dup = _unescape(key)
            return self._key_in(stored), self._dup_in(dup)
        return self._key_in(key), value

    def pairs(self, cursor_items: Iterable[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
        """The model's records of a cursor's pairs (in LMDB's order: the model's)."""
        for key, value in cursor_items:
            yield self.to_model(bytes(key), bytes(value))

    def seek(self, cur: Any, start: bytes) -> bool:
        """Put ``cur`` at the first stored pair whose model key is ``start`` or after."""
        try:
            key: bytes | None = self.from_model(start, b"")[0]
        except ValueError:  # a bound that is no record's key (a prefix of one)
            key = self._lower_bound(start)
        more = cur.first() if key is None else cur.set_range(key)
        while more and self.to_model(bytes(cur.key()), bytes(cur.value()))[0] < start:
            more = cur.next()
        return bool(more)

    def _lower_bound(self, start: bytes) -> bytes | None:
        """A stored key at or before every pair whose model key is ``start`` or after
        (None: from the first), for a bound that is no record's key."""
        if self.integerkey or self.reverse_key:
            return None
        if not self.dupsort:
            return start
        cut = start.find(b"\x00\x00")
        head = start if cut < 0 else start[:cut]
        return head.replace(b"\x00\xff", b"\x00").rstrip(b"\x00")


def encode_error(where: str, exc: ValueError) -> DestinationError:
    """A record that the database's flags cannot hold (exit 5)."""
    return DestinationError(f"{where}: {exc}")
