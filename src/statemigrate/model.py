"""The state model (DESIGN.md, "The state model"): tables of byte keys in byte order.

A record is a tuple: ``(key, value)`` in a plain table, ``(key, value, version)`` in
a versioned one. Batches are plain Python lists of such tuples so that the native
digest and the engines' bulk calls take them without conversion.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from .errors import SourceError, UsageError

Record = tuple[bytes, bytes] | tuple[bytes, bytes, int]
Batch = list  # list[Record]

METADATA_TABLE = "__statemigrate__"
MAX_VERSION = 2**64 - 1
MAX_TABLE_NAME_BYTES = 255
# Tables an upgrade builds aside while a revision runs (DESIGN.md: reserved names).
TMP_TABLE_PREFIX = "__sm_tmp__"
# Metadata entries an unfinished upgrade leaves: its journal once the revision
# committed, the private tables it created before that (statemigrate.schema.journal).
UPGRADE_ENTRIES = ("upgrade_journal", "upgrade_pending")
# Keys of the store metadata (the ``__statemigrate__`` table of each engine).
META_SCHEMA = "schema"
META_REVISION = "revision"  # JSON list of revision ids
META_CHECKPOINT = "checkpoint"  # JSON, only while a conversion runs: the table in progress
META_CHECKPOINT_SOURCE = "checkpoint_source"  # JSON: the source's fingerprint, written once
META_CHECKPOINT_DONE = "checkpoint_done:"  # + table name: JSON digest of a table copied whole
META_TABLE_PREFIX = "table:"  # + table name: JSON of TableInfo.meta
# + table name: b"versioned", where the layout cannot show a table's kind (DESIGN.md);
# engine-private (see engines.access.StoreFacts.private_metadata).
META_KIND_PREFIX = "kind:"


# How large a batch grows: records, and payload bytes (keys plus values; the record
# that reaches the limit is the batch's last). One definition for every reader.
BATCH_RECORDS = 10_000
BATCH_BYTES = 8 << 20
# Key-value engines store a versioned record as one value: the version as 8 bytes,
# big-endian, then the value (DESIGN.md, "Layouts"). ``take_batch`` decodes it natively
# with this mode.
VERSION_BYTES = 8
VERSION_PREFIX_DECODE = "be_version_prefix"


class TableKind(str, enum.Enum):
    """Whether a table's records carry a version."""

    PLAIN = "plain"
    VERSIONED = "versioned"


@dataclass(frozen=True)
class TableInfo:
    """A table of the state model.

    Attributes:
        name: 1-255 bytes of UTF-8 without NUL.
        kind: plain or versioned.
        meta: engine-specific facts that a conversion carries (for example the redb
            key and value types); stored in the store's metadata, never in records.
    """

    name: str
    kind: TableKind = TableKind.PLAIN
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def versioned(self) -> bool:
        """True when the table's records carry a version."""
        return self.kind is TableKind.VERSIONED


# The facts of TableInfo.meta that change what a table's records mean to the app, so
# that a store which lost one does not verify as equal even where its records do: a
# multimap table (LMDB's DUPSORT database, redb's multimap table: one representation),
# LMDB's other database flags (INTEGERKEY …) and redb's key and value type names (an
# app's ``TableDefinition<u64, &str>`` does not open a table of ``&[u8]``). A DUPSORT
# database read as a plain one gives the app other keys' values. The type names are
# compared, not their spelling (redb 2's and 3's tuple layouts, the file format): those
# change on purpose with ``--redb-format``.
_BYTES_TYPES = ("&[u8]", "&[u8]")


def _physical(t: TableInfo) -> tuple[bool, tuple[str, ...], tuple[str, str]]:
    """(multimap, LMDB's other flags, redb's key and value type names) of a table, from
    its meta; a table that never was redb's has redb's byte types."""
    meta = t.meta or {}
    lmdb = meta.get("lmdb")
    flags = [str(f) for f in lmdb.get("flags", [])] if isinstance(lmdb, dict) else []
    redb = meta.get("redb")
    multimap = "dupsort" in flags or (isinstance(redb, dict) and bool(redb.get("multimap")))
    types = _BYTES_TYPES
    if isinstance(redb, dict):
        names = [
            x.get("name") if isinstance(x, dict) else None
            for x in (redb.get("key"), redb.get("value"))
        ]
        types = (str(names[0] or "&[u8]"), str(names[1] or "&[u8]"))
    return multimap, tuple(sorted(f for f in flags if f != "dupsort")), types


def facts_differ(xa: TableInfo | None, xb: TableInfo | None) -> str | None:
    """How the physical facts of a table differ between A and B (its two stores), or
    None: the check of ``verify`` and of a convert's read-back."""
    if xa is None or xb is None:
        return None
    (ma, fa, ta), (mb, fb, tb) = _physical(xa), _physical(xb)
    if ma != mb:
        return "table facts differ (a multimap table in {}, a plain one in {})".format(
            *(("A", "B") if ma else ("B", "A"))
        )
    if fa != fb:
        return (
            f"table facts differ (LMDB flags {', '.join(fa) or 'none'} in A, "
            f"{', '.join(fb) or 'none'} in B)"
        )
    if ta != tb:
        return f"table facts differ (redb types {ta[0]} → {ta[1]} in A, {tb[0]} → {tb[1]} in B)"
    return None


def physical_facts(t: TableInfo) -> str | None:
    """The facts of :func:`_physical` that ``t`` carries, for a message, or None."""
    multimap, flags, types = _physical(t)
    shown = ["multimap, as LMDB's DUPSORT and redb's multimap tables"] if multimap else []
    shown += [f"LMDB flags {', '.join(flags)}"] if flags else []
    shown += [f"redb types {types[0]} → {types[1]}"] if types != _BYTES_TYPES else []
    return "; ".join(shown) or None


def table_name_problem(name: str) -> str | None:
    """Why ``name`` cannot be a table of the model, or None when it can.

    The model's rules (DESIGN.md, "The state model"): 1-255 bytes of UTF-8 without NUL,
    not the metadata table's name, not a name reserved for upgrades in progress. An
    engine adds its own rules in :meth:`~statemigrate.engines.base.Engine.table_name_problems`.

    Args:
        name: the name to check.

    Returns:
        The reason, worded to follow the name in a message, or None.
    """
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return "not valid UTF-8"
    if size == 0:
        return "an empty name"
    if size > MAX_TABLE_NAME_BYTES:
        return f"{size} bytes, over the {MAX_TABLE_NAME_BYTES} a table name may have"
    if "\x00" in name:
        return "holds a NUL character"
    if name == METADATA_TABLE:
        return "reserved for statemigrate's metadata"
    if name.startswith(TMP_TABLE_PREFIX):
        return "reserved for upgrades in progress"
    return None


def check_table_name(name: str) -> str:
    """Check a table name against the model's rules (:func:`table_name_problem`).

    Args:
        name: the name to check.

    Returns:
        The name, unchanged.

    Raises:
        UsageError: the name breaks one of the rules.
    """
    problem = table_name_problem(name)
    if problem is not None:
        raise UsageError(f"invalid table name {shown_name(name)}: {problem}")
    return name


def shown_name(name: str, limit: int = 60) -> str:
    """``repr`` of a table name for a message, cut short when it is long."""
    return repr(name) if len(name) <= limit else f"{name[:limit]!r}…"


def check_source_tables(tables: Iterable[TableInfo], meta: Mapping[str, bytes], where: str) -> None:
    """Refuse a source table whose name statemigrate reserves (exit 4), before anything is written.

    A table named like the metadata, or like an upgrade's private tables
    (``__sm_tmp__…``), would be taken for statemigrate's own. In a store an upgrade
    left unfinished, such a table may be that upgrade's: finishing it comes first.

    Args:
        tables: the source tables about to be read.
        meta: the source's metadata.
        where: the source, for the message.

    Raises:
        SourceError: one such table, named.
    """
    for table in tables:
        if table.name == METADATA_TABLE:
            raise SourceError(
                f"{where}: table {shown_name(table.name)} uses the name of statemigrate's "
                "metadata; rename it in the app first"
            )
        if not table.name.startswith(TMP_TABLE_PREFIX):
            continue
        if any(key in meta for key in UPGRADE_ENTRIES):
            raise SourceError(
                f"{where}: an upgrade of this store was interrupted "
                f"(table {shown_name(table.name)} may be one of its private tables)",
                hint="run statemigrate upgrade (or downgrade) on it to finish it first",
            )
        raise SourceError(
            f"{where}: table {shown_name(table.name)} uses a name statemigrate reserves for "
            "upgrades in progress; rename it in the app first",
            hint="if an upgrade of this store was interrupted, run statemigrate upgrade on it first",
        )


def batch_nbytes(batch: Batch) -> int:
    """Payload bytes of a batch (keys plus values)."""
    return sum(len(r[0]) + len(r[1]) for r in batch)


def encode_versioned(batch: Batch) -> list[tuple[bytes, bytes]]:
    """``(key, value, version)`` records as a key-value engine stores them.

    Args:
        batch: versioned records.

    Returns:
        ``(key, u64be(version) + value)`` pairs, in the batch's order.
    """
    return [(k, ver.to_bytes(VERSION_BYTES, "big") + v) for k, v, ver in batch]
