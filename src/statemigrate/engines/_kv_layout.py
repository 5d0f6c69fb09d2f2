"""A ``[kv]`` prefix layout over the raw (key, value) pairs of one namespace.

Engine-independent: an engine gives the pairs of its namespace (RocksDB's column
family; LMDB's database and fjall's partition next) and this module tells tables
apart, strips and adds prefixes, and encodes versions as the layout says
(:class:`statemigrate.layout.KvPrefix`). A table's records are one range of the
namespace, ``prefix ‖ after`` up to the prefix's end, read as a stream: nothing is
buffered. The tables are found by skipping from one prefix to the next (one seek per
table, and one per record that no table of the layout claims).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass

from ..errors import SourceError
from ..layout import KvPrefix
from ..model import Batch, Record, TableInfo

__all__ = [
    "Found",
    "decode_records",
    "encode_batch",
    "find_tables",
    "parse_name",
    "prefix_end",
    "shown_key",
]

_WIDTH = 8


def prefix_end(prefix: bytes) -> bytes | None:
    """The first key after every key that starts with ``prefix`` (None: no such key)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def shown_key(key: bytes) -> str:
    """A stored key for a message: its repr, cut at 64 bytes."""
    return repr(key[:64]) + ("…" if len(key) > 64 else "")


def parse_name(spec: KvPrefix, stored: bytes) -> str | None:
    """The table a stored key belongs to, or None when no table of the layout can claim it.

    The name runs from the head to the first separator; a name that is empty, not
    UTF-8, or holds the separator's first character is none this layout writes.
    """
    head = spec.head.encode("utf-8")
    if not stored.startswith(head):
        return None
    rest = stored[len(head) :]
    end = rest.find(spec.separator.encode("utf-8"))
    if end <= 0:
        return None
    try:
        name = rest[:end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\x00" in name or spec.name_problem(name) or len(rest[:end]) > 255:
        return None
    return name


def _split_version(spec: KvPrefix, value: bytes) -> tuple[bytes, int] | None:
    if len(value) < _WIDTH:
        return None
    enc = spec.version
    if enc.startswith("prefix-"):
        raw, rest = value[:_WIDTH], value[_WIDTH:]
    else:
        raw, rest = value[-_WIDTH:], value[:-_WIDTH]
    return rest, int.from_bytes(raw, "big" if enc.endswith("be") else "little")


def _join_version(spec: KvPrefix, value: bytes, version: int) -> bytes:
    raw = version.to_bytes(_WIDTH, "big" if spec.version.endswith("be") else "little")
    return raw + value if spec.version.startswith("prefix-") else value + raw


def decode_records(
    spec: KvPrefix, table: TableInfo, pairs: Iterable[tuple[bytes, bytes]], where: str
) -> Iterator[Record]:
    """The table's records from the namespace's pairs, starting at its prefix (or after).

    Stops at the first key outside the table's prefix.

    Raises:
        SourceError: a versioned table's value shorter than its version (exit 4).
    """
    prefix = spec.table_prefix(table.name)
    cut = len(prefix)
    if not table.versioned:
        for key, value in pairs:
            if not key.startswith(prefix):
                return
            yield key[cut:], value
        return
    for key, value in pairs:
        if not key.startswith(prefix):
            return
        split = _split_version(spec, value)
        if split is None:
            raise SourceError(
                f"{where}: the value of key {shown_key(key[cut:])} is {len(value)} bytes, "
                f"shorter than its {_WIDTH}-byte version ({spec.version})",
                hint="a table the layout lists as versioned must carry a version in every value",
            )
        yield key[cut:], split[0], split[1]


def encode_batch(spec: KvPrefix, table: TableInfo, batch: Batch) -> list[tuple[bytes, bytes]]:
    """The stored pairs of a batch of ``table``: prefixed keys, versions encoded."""
    prefix = spec.table_prefix(table.name)
    if table.versioned:
        return [(prefix + r[0], _join_version(spec, r[1], r[2])) for r in batch]
    return [(prefix + r[0], r[1]) for r in batch]


@dataclass
class Found:
    """What a walk over a namespace found: the tables, and records no table claims."""

    names: list[str]
    foreign: int = 0
    first_foreign: bytes | None = None


def find_tables(
    spec: KvPrefix,
    seek: Callable[[bytes], bytes | None],
    count: Callable[[bytes, bytes | None], int],
    stop_at_foreign: bool,
) -> Found:
    """The tables of a namespace, found by skipping from one prefix to the next.

    Args:
        spec: the layout.
        seek: the first stored key at or after the key given, or None at the end.
        count: the number of stored keys from the first key up to the second (None:
            the end), for the records of a table that the layout's ``tables`` leaves out.
        stop_at_foreign: return at the first record no table claims (it will be refused).

    Returns:
        The names in byte order, and the records no table of the layout claims.
    """
    found = Found([])
    position = b""
    while True:
        key = seek(position)
        if key is None:
            return found
        name = parse_name(spec, key)
        if name is not None and (spec.tables is None or name in spec.tables):
            found.names.append(name)
            end = prefix_end(spec.table_prefix(name))
            if end is None:
                return found
            position = end
            continue
        if found.first_foreign is None:
            found.first_foreign = key
        if stop_at_foreign:
            found.foreign += 1
            return found
        if name is None:
            found.foreign += 1
            position = key + b"\x00"
            continue
        start = spec.table_prefix(name)
        after = prefix_end(start)
        found.foreign += count(start, after)
        if after is None:
            return found
        position = after
