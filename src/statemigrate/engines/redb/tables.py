"""How redb tables map to the state model, and how each is written back (:class:`Target`).

A table records the file format it was read from and its stored redb types, so that a
new redb destination is written as the source was, in the format :func:`choose_format`
picks.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Any

from ...errors import DestinationError
from ...model import TableInfo, TableKind, shown_name
from ..base import META_TABLE_PREFIX
from .header import DEFAULT_FORMAT, WRITABLE_FORMATS

if TYPE_CHECKING:
    from .options import RedbOptions

# How a native table kind maps to the state model.
_TYPED = ("typed", "custom")
_BYTES = {"name": "&[u8]", "class": "Internal", "width": None}
# Unless written back exactly, the writer spells it as its own redb version does
# (Internal3 in format 3).
_VERSIONED = {"name": "(u64,&[u8])", "class": "Internal", "width": None}


def table_info(desc: Mapping[str, Any], fmt: int) -> TableInfo:
    """The state-model table of a native table description from a file of format ``fmt``.

    Every table records the file format (``meta["redb"]["format"]`` for typed tables,
    ``meta["redb_file"]["format"]`` for default-layout ones) and its stored types
    (a versioned table's value type is spelt differently by each redb version), so
    that a redb destination can be written back as the source was.
    """
    kind = desc["kind"]
    if kind in ("plain", "versioned"):
        fact: dict[str, Any] = {"format": fmt}
        if kind == "versioned":
            fact["value"] = dict(desc["value"])
            return TableInfo(desc["name"], TableKind.VERSIONED, {"redb_file": fact})
        return TableInfo(desc["name"], TableKind.PLAIN, {"redb_file": fact})
    meta = {
        "redb": {
            "multimap": bool(desc["multimap"]),
            "key": dict(desc["key"]),
            "value": dict(desc["value"]),
            # "custom": a user-defined type; records are in key byte order, not redb's.
            "order": "custom" if kind == "custom" else "redb",
            "format": fmt,
        }
    }
    return TableInfo(desc["name"], TableKind.PLAIN, meta)


def _lmdb_dupsort(meta: Mapping[str, Any] | None) -> bool:
    """Whether a table is an LMDB ``DUPSORT`` database whose keys and values LMDB orders as
    bytes (no ``INTEGERKEY``, ``INTEGERDUP`` or ``REVERSEKEY``): redb's multimap table of
    ``&[u8]`` keys and values orders them alike, and the state model has one
    representation for both (DESIGN.md), so it is written as one."""
    fact = (meta or {}).get("lmdb")
    flags = fact.get("flags") if isinstance(fact, Mapping) else None
    return isinstance(flags, list) and "dupsort" in flags and set(flags) <= {"dupsort", "dupfixed"}


def recorded_format(meta: Mapping[str, Any] | None) -> int | None:
    """The redb file format a table was read from, as its meta records it (None: not from redb)."""
    for key in ("redb", "redb_file"):
        fact = (meta or {}).get(key)
        if isinstance(fact, Mapping):
            fmt = fact.get("format")
            if isinstance(fmt, int) and not isinstance(fmt, bool):
                return fmt
    return None


def _written_by_redb2(meta: Mapping[str, Any]) -> bool:
    """Whether a table of a format-3 file has redb 2.6's spelling (old tuple layout)."""
    fact = meta.get("redb") or meta.get("redb_file") or {}
    types = [fact.get("key"), fact.get("value")]
    return any(
        isinstance(t, Mapping) and t.get("legacy") is True and t.get("class") == "Internal"
        for t in types
    )


def respelt(meta: Mapping[str, Any]) -> bool:
    """Whether a writer asked for a file format may spell one of the table's types anew,
    so that a byte copy of the file would not be what it writes: a type in redb 2.x's own
    layout (``legacy``), a classification newer than ``Internal`` (redb 3.x's
    ``Internal2``, 4.x's ``Internal3``), or any composite (tuple, array, ``Option``,
    ``Vec``). Scalars and user-defined types are spelt alike by every redb version."""
    fact = meta.get("redb") or meta.get("redb_file") or {}
    types = [t for t in (fact.get("key"), fact.get("value")) if isinstance(t, Mapping)]
    return any(
        t.get("legacy") is True
        or t.get("class") not in ("Internal", "UserDefined")
        or _composite(str(t.get("name", "")))
        for t in types
    )


def _composite(name: str) -> bool:
    """A tuple, array, ``Option`` or ``Vec`` (not ``()`` or ``&[u8]``), by its type name."""
    return name not in ("()", "&[u8]") and any(c in name for c in "([<")


def choose_format(explicit: int | None, metas: Iterable[Mapping[str, Any]]) -> tuple[int, bool]:
    """The file format a new redb destination gets, and whether redb 2.6 writes it.

    An explicit ``redb_format`` wins (the types are then re-spelt for it). Otherwise
    the format the tables' meta records (written back as it was read), or the newest
    when nothing was recorded (the data did not come from redb).

    Raises:
        DestinationError: the data came from a format-1 file (redb 1.x), which this
            engine cannot write, and no format was asked for.
    """
    metas = [m for m in metas if m]
    if explicit is not None:
        return explicit, False
    formats = {f for f in (recorded_format(m) for m in metas) if f is not None}
    if not formats:
        return DEFAULT_FORMAT, False
    if formats - set(WRITABLE_FORMATS):
        raise DestinationError(
            "the data was read from a redb file of format 1 (redb 1.x), which no redb "
            "version this engine writes can open as it was",
            hint="pass --redb-format 2 (redb 2.x) or 3 (redb 3.x and 4.x) to convert it on purpose",
        )
    fmt = max(formats)
    redb2 = fmt == 3 and any(recorded_format(m) == 3 and _written_by_redb2(m) for m in metas)
    return fmt, redb2


class _Target:
    """How tables are written to one redb destination: its format and redb version.

    Args:
        module: the native binding.
        fmt: the file format written (2 or 3).
        redb2: written through redb 2.6 (format 2, or format 3 as redb 2.6 writes it).
        options: the destination options (``redb_format``, ``bytewise_key_types``).
    """

    def __init__(self, module: Any, fmt: int, redb2: bool, options: RedbOptions) -> None:
        self.module = module
        self.format = fmt
        self.redb2 = redb2
        self.explicit: int | None = options.redb_format
        self.bytewise = sorted(set(options.bytewise_key_types))

    def exact(self, meta: Mapping[str, Any] | None) -> bool:
        """Whether a table is written back with its recorded types as they are."""
        return self.explicit is None and recorded_format(meta) == self.format

    def describe(self, table: TableInfo) -> tuple[str, dict[str, Any]]:
        """The native kind (``plain``, ``versioned``, ``typed``, ``custom``) and description."""
        redb = table.meta.get("redb") if table.meta else None
        if not redb and not table.versioned and _lmdb_dupsort(table.meta):
            redb = {"multimap": True, "key": _BYTES, "value": _BYTES}
        if not redb or table.versioned:
            return ("versioned" if table.versioned else "plain"), self._default_layout(table)
        desc = {
            "name": table.name,
            "multimap": bool(redb.get("multimap", False)),
            "key": dict(redb["key"]),
            "value": dict(redb["value"]),
            "exact": self.exact(table.meta),
            "bytewise": self.bytewise,
        }
        return str(self.module.redb_table_kind(desc, self.format, self.redb2)), desc

    def _default_layout(self, table: TableInfo) -> dict[str, Any]:
        """A plain or versioned table's description; a versioned one keeps its recorded spelling."""
        value = _BYTES
        exact = False
        if table.versioned:
            value = _VERSIONED
            fact = (table.meta or {}).get("redb_file")
            recorded = fact.get("value") if isinstance(fact, Mapping) else None
            if isinstance(recorded, Mapping) and self.exact(table.meta):
                value, exact = dict(recorded), True
        return {
            "name": table.name,
            "multimap": False,
            "key": _BYTES,
            "value": value,
            "exact": exact,
        }

    def problems(self, table: TableInfo) -> list[str]:
        """Why ``table`` cannot be written (empty when it can), each naming what would allow it."""
        name = shown_name(table.name)
        if table.versioned and table.meta and table.meta.get("redb"):
            return [f"table {name}: a typed redb table cannot be versioned"]
        kind, desc = self.describe(table)
        if kind == "plain":
            return []
        found = self.module.redb_table_problems(desc, self.format, self.redb2)
        return [f"table {name}: {part} type {ty!r} {why}" for part, ty, why in found]

    def check(
        self, tables: Iterable[TableInfo], where: str, first: DestinationError | None = None
    ) -> None:
        """Refuse, in one error listing every offending table, tables that cannot be written.

        Args:
            tables: the tables to write.
            where: the destination, for the message.
            first: a refusal of the whole destination, listed first (its hint kept).

        Raises:
            DestinationError: some table cannot be written (exit 5).
        """
        problems = [p for t in tables for p in self.problems(t)]
        if not problems and first is None:
            return
        parts = [first.message] if first else []
        if problems:
            many = len(problems) > 1
            what = "these tables" if many else "this table"
            parts.append(
                f"the redb writer (file format {self.format}) cannot write {what}: "
                + "; ".join(problems)
            )
        raise DestinationError(
            f"{where}: " + "; and ".join(parts), hint=first.cli_hint if first else None
        )


def _table_facts(metadata: Mapping[str, bytes | None]) -> list[dict[str, Any]]:
    """The tables' meta among metadata updates (``table:<name>`` entries, JSON)."""
    out = []
    for key, raw in metadata.items():
        if key.startswith(META_TABLE_PREFIX) and raw:
            try:
                fact = json.loads(raw)
            except ValueError:
                continue
            if isinstance(fact, dict):
                out.append(fact)
    return out


def _meta_updates(metadata: Mapping[str, bytes | None] | None) -> list[tuple[str, bytes | None]]:
    return [(k, None if v is None else bytes(v)) for k, v in (metadata or {}).items()]
