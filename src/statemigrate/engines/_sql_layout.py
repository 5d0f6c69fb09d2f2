"""A ``[sql]`` layout's reader and writer, written once over the SQL engines.

An engine gives a connection (``conn.execute(sql, params)`` returning rows, apsw or
DB-API alike) and, for writing, its own writer opened on the file (:class:`RawSqlWriter`:
one transaction around a piece of work, finish, sync, backup, close). This module maps
a layout's state tables onto the file's SQL tables (:mod:`statemigrate.layout.sql`):
``one-table`` (a name column), ``table-per-table`` (a map or a template) and
``single-table``; the codecs of the key and value columns; the app's own DDL and file
settings. No engine is named here: a new mode touches no engine.

Codecs (one storage class per column; a row of another class is exit 4 naming the
table and the key, never converted):

- key ``blob``: the bytes; ``text``: the UTF-8 bytes of the text (SQLite's BINARY
  collation compares UTF-8 text as its bytes, so the order is the model's; a file in a
  UTF-16 encoding is refused); ``integer``: a signed 64-bit INTEGER as 8 bytes,
  big-endian with the sign bit flipped (``(n + 2**63).to_bytes(8, "big")``: byte
  order is numeric order);
- value: the same, plus ``real`` (IEEE 754 binary64, 8 bytes big-endian).

Where the metadata lives is the layout's ``metadata``: statemigrate's own
``__statemigrate__`` table (``store``), or nowhere in the store (``none``: the
checkpoint goes to the side file of :mod:`._side_metadata`, the kinds are the layout's
``versioned``, and the records are written ``INSERT OR REPLACE`` so that a resume from
an older checkpoint writes them again).
"""

from __future__ import annotations

import contextlib
import json
import re
import struct
from collections.abc import Callable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any, Protocol

from ..errors import DestinationError, LayoutNotNeeded, SourceError
from ..layout import Layout
from ..layout.sql import CODEC_TYPES, SqlSpec
from ..model import BATCH_RECORDS, META_KIND_PREFIX, METADATA_TABLE, Batch, TableInfo, TableKind
from ._side_metadata import read_side_metadata, write_side_metadata
from ._sql import (
    ALEMBIC_TABLE,
    INTERNAL_TABLES,
    class_checks,
    outside_message,
    quote,
    read_metadata,
    stored_metadata,
    table_names,
    to_signed,
    write_metadata,
)
from .access import Reader, Writer, shown_key, take_batches
from .base import StoreFacts

__all__ = [
    "RawSqlRead",
    "RawSqlWriter",
    "SqlLayoutReader",
    "SqlLayoutWriter",
    "check_sql_tables",
    "decode_integer",
    "encode_integer",
    "guess_sql_layout",
]

_SIGN = 1 << 63
_EXTRA_HEAD = re.compile(
    r"\s*CREATE\s+(UNIQUE\s+)?(INDEX|TRIGGER|VIEW)\s+(IF\s+NOT\s+EXISTS\s+)?", re.IGNORECASE
)


def encode_integer(n: int) -> bytes:
    """A signed 64-bit integer as the model's bytes: big-endian, sign bit flipped."""
    return (n + _SIGN).to_bytes(8, "big")


def decode_integer(b: bytes) -> int:
    """The signed 64-bit integer of :func:`encode_integer`'s 8 bytes."""
    if len(b) != 8:
        raise ValueError(f"an integer key or value is 8 bytes, not {len(b)}")
    return int.from_bytes(b, "big") - _SIGN


_TAGS = {bytes: b"b", str: b"t", int: b"i", float: b"r", type(None): b"n"}
_TAGGED = {ord("b"): "blob", ord("t"): "text", ord("i"): "integer", ord("r"): "real"}


def _to_sql(codec: str, b: bytes) -> Any:
    """The SQL value of the model's bytes ``b`` in ``codec`` (ValueError: not of it)."""
    if codec == "blob":
        return b
    if codec == "any":  # a tag byte, then the bytes of the tagged class's codec
        if b == b"n":
            return None
        if not b or b[0] not in _TAGGED:
            raise ValueError("a value of value_codec 'any' starts with b, t, i, r or n")
        return _to_sql(_TAGGED[b[0]], b[1:])
    if codec == "text":
        return bytes(b).decode("utf-8")
    if codec == "integer":
        return decode_integer(b)
    if len(b) != 8:
        raise ValueError(f"a real value is 8 bytes, not {len(b)}")
    return struct.unpack(">d", b)[0]


def _from_sql(codec: str, v: Any) -> Any:
    """The model's bytes of a SQL value read in ``codec`` (non-bytes: left for the check)."""
    if codec == "integer":
        return encode_integer(v) if type(v) is int else None
    if codec == "real":
        return struct.pack(">d", v) if type(v) is float else None
    if codec == "any":
        tag = _TAGS[type(v)]
        if tag == b"n":
            return tag
        return tag + _from_sql(_TAGGED[tag[0]], v.encode("utf-8") if tag == b"t" else v)
    return v


def _framed(value: bytes, extra: tuple[Any, ...] | list[Any]) -> bytes:
    """The value's bytes and the extra columns' tagged values, each length-prefixed."""
    parts = [len(value).to_bytes(4, "big"), value]
    for v in extra:
        tagged = _from_sql("any", v)
        parts += [len(tagged).to_bytes(4, "big"), tagged]
    return b"".join(parts)


def _unframed(b: bytes, n: int) -> tuple[bytes, list[Any]]:
    """The value's bytes and the extra columns' SQL values of :func:`_framed` bytes."""
    fields, at = [], 0
    for _ in range(n + 1):
        if at + 4 > len(b):
            raise ValueError("the value ends inside its columns' framing")
        size = int.from_bytes(b[at : at + 4], "big")
        if at + 4 + size > len(b):
            raise ValueError("the value ends inside its columns' framing")
        fields.append(bytes(b[at + 4 : at + 4 + size]))
        at += 4 + size
    if at != len(b):
        raise ValueError("bytes after the value's columns")
    return fields[0], [_to_sql("any", f) for f in fields[1:]]


def _select_expr(column: str, codec: str) -> str:
    """The SELECT expression of a column: NULL where a row is of another class (the
    batch then fails and :func:`_outside` names the row)."""
    c = quote(column)
    if codec in ("blob", "any"):
        return c
    cls = {"text": "text", "integer": "integer", "real": "real"}[codec]
    inner = f"CAST({c} AS BLOB)" if codec == "text" else c
    return f"CASE WHEN typeof({c}) = '{cls}' THEN {inner} END"


class RawSqlWriter(Protocol):
    """What a SQL engine's own writer gives a layout's writer."""

    path: Path
    conn: Any
    facts: StoreFacts

    def sql_tx(self, work: Callable[[], None]) -> None:
        """``work`` in one transaction (joining :meth:`transaction`'s)."""

    def finish(self) -> None: ...
    def sync(self) -> None: ...
    def transaction(self) -> AbstractContextManager[None]: ...
    def backup(self, path: Path) -> None: ...
    def close(self) -> None: ...


@dataclass
class RawSqlRead:
    """A SQL engine's read of one snapshot: a connection inside a read transaction.

    Attributes:
        path: the store.
        conn: the connection (its first read already fixed the snapshot).
        facts: the engine's error meanings and locks.
        confirm: called at the end of each table read (read-only media's check).
        close: ends the read and closes the connection.
    """

    path: Path
    conn: Any
    facts: StoreFacts
    confirm: Callable[[], None]
    close: Callable[[], None]
    ints_as_text: bool = False  # bind integers as text, cast in SQL (libSQL's driver)
    paged: bool = False  # read by pages of keys, no cursor kept between them (DB-API drivers)


def _columns(conn: Any, table: str) -> list[tuple[str, str, int, int]]:
    """(name, declared type upper-cased, notnull, position in the primary key)."""
    rows = conn.execute(f"PRAGMA table_info({quote(table)})").fetchall()
    return [(r[1], str(r[2] or "").upper(), int(r[3]), int(r[5])) for r in rows]


class _Mapped:
    """What the layout's reader and writer share: where a state table's rows are."""

    path: Path
    conn: Any
    layout: Layout
    facts: StoreFacts
    ints_as_text: bool = False
    paged: bool = False

    def _mark(self, integer: bool) -> str:
        """A parameter's place: an integer is bound as text and cast where the driver
        would bind a 64-bit integer as REAL."""
        return "CAST(? AS INTEGER)" if integer and self.ints_as_text else "?"

    def _bound(self, value: Any) -> Any:
        return str(value) if self.ints_as_text and type(value) is int else value

    @property
    def spec(self) -> SqlSpec:
        return self.layout.sql  # type: ignore[no-any-return]

    def _place(self, name: str) -> tuple[str, str, tuple[Any, ...]]:
        """(SQL table, a condition on its rows, its parameters) of state table ``name``."""
        spec = self.spec
        sql = spec.sql_table(name)
        if sql is None:
            raise DestinationError(f"{self.path}: {self.layout.describe()} has no table {name!r}")
        sql = self._found.get(sql.lower(), sql)
        if spec.mode == "one-table":
            return sql, _named(spec), (name,)
        return sql, "", ()

    _found: dict[str, str]  # folded SQL table name -> the name as created (set by _find)

    def _version_of(self, table: TableInfo) -> str | None:
        return self.spec.version if table.versioned else None

    def _select(self, table: TableInfo, after: bool, paged: bool = False) -> str:
        """The SELECT of a table's rows in key order (``paged``: with the raw key last
        and a LIMIT, for a page)."""
        spec = self.spec
        sql, cond, _ = self._place(table.name)
        cols = [_select_expr(spec.key, spec.key_codec), _select_expr(spec.value, spec.value_codec)]
        if spec.keep_rowid:
            cols.append("rowid")
        cols += [quote(c) for c in spec.extra_columns]
        version = self._version_of(table)
        if version:
            cols.append(quote(version))
        if paged:
            cols.append(quote(spec.key))
        conds = [cond] if cond else []
        if after:
            conds.append(
                f"{quote(spec.key)} COLLATE BINARY > {self._mark(spec.key_codec == 'integer')}"
            )
        where = f" WHERE {' AND '.join(conds)}" if conds else ""
        return (
            f"SELECT {', '.join(cols)} FROM {quote(sql)}{where} "
            f"ORDER BY {quote(spec.key)} COLLATE BINARY" + (" LIMIT ?" if paged else "")
        )

    def _cursor(self, table: TableInfo, after: bytes | None) -> Iterator[tuple[Any, ...]]:
        """The table's rows after ``after`` in key order: one cursor, or pages of keys."""
        spec = self.spec
        _, _, args = self._place(table.name)
        last = None if after is None else _to_sql(spec.key_codec, after)
        if not self.paged:
            tail = () if last is None else (self._bound(last),)
            return iter(self.conn.execute(self._select(table, last is not None), (*args, *tail)))
        return self._pages(table, args, last)

    def _pages(
        self, table: TableInfo, args: tuple[Any, ...], last: Any
    ) -> Iterator[tuple[Any, ...]]:
        page = BATCH_RECORDS
        while True:
            tail = () if last is None else (self._bound(last),)
            sql = self._select(table, last is not None, paged=True)
            rows = self.conn.execute(sql, (*args, *tail, page)).fetchall()
            for r in rows:
                yield tuple(r[:-1])
            if len(rows) < page:
                return
            last = rows[-1][-1]

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        spec = self.spec
        cur = self._cursor(table, after)
        decode = "signed_version" if table.versioned else "as_is"
        if spec.keep_rowid or spec.extra_columns:
            return take_batches(self._whole_rows(cur), max_records, max_bytes, decode)
        if spec.key_codec in ("blob", "text") and spec.value_codec in ("blob", "text"):
            return take_batches(cur, max_records, max_bytes, decode)  # converted in SQL
        kc, vc = spec.key_codec, spec.value_codec
        rows = ((_from_sql(kc, r[0]), _from_sql(vc, r[1]), *r[2:]) for r in cur)
        return take_batches(rows, max_records, max_bytes, decode)

    def _whole_rows(self, cur: Any) -> Iterator[tuple[Any, ...]]:
        """Rows whose value also carries the rowid (``keep_rowid``: its 8 bytes first)
        and the extra columns (``columns``: each tagged, all length-prefixed)."""
        spec = self.spec
        kc, vc = spec.key_codec, spec.value_codec
        keep, n = spec.keep_rowid, len(spec.extra_columns)
        for r in cur:
            value = _from_sql(vc, r[1])
            at = 3 if keep else 2
            if isinstance(value, bytes) and n:
                value = _framed(value, r[at : at + n])
            if isinstance(value, bytes) and keep:
                value = encode_integer(r[2]) + value
            yield (_from_sql(kc, r[0]), value, *r[at + n :])

    def outside_model(
        self, table: TableInfo, after: bytes | None, exc: BaseException
    ) -> str | None:
        """The first of the table's rows of another storage class than its codec's."""
        return _outside(self, table, after)

    def _kind_check(self, name: str, versioned: bool) -> None:
        """Refuse a table whose rows contradict its kind (a version in a plain table's
        row, none in a versioned one's), where its SQL table has the version column."""
        spec = self.spec
        if spec.version is None:
            return
        sql, cond, args = self._place(name)
        cols = {c[0].lower(): c for c in _columns(self.conn, sql)}
        column = cols.get(spec.version.lower())
        if column is not None and versioned and column[2] and not cond:
            return  # NOT NULL: SQLite keeps every row versioned
        if column is None:
            if versioned:
                raise SourceError(
                    f"{self.path}: table {name!r} is versioned, but SQL table {sql!r} has no "
                    f"column {spec.version!r}"
                )
            return
        wrong = "IS NULL" if versioned else "IS NOT NULL"
        conds = " AND ".join([*([cond] if cond else []), f"{quote(spec.version)} {wrong}"])
        row = self.conn.execute(
            f"SELECT {quote(spec.key)} FROM {quote(sql)} WHERE {conds} LIMIT 1", args
        ).fetchall()
        if row:
            kind = "versioned" if versioned else "plain"
            raise SourceError(
                f"{self.path}: table {name!r} is {kind}, but its record {row[0][0]!r} "
                f"{'has no' if versioned else 'has a'} {spec.version}",
                hint="list the versioned tables in the layout's `versioned`",
            )

    def _find(self) -> tuple[list[str], list[str], bool]:
        """The state tables the file shows, its foreign SQL tables, and whether the
        layout's shared table (one-table, single-table) is there.

        Raises:
            SourceError: a table of the layout without a column it names; a name in a
                name column that is not text.
        """
        spec = self.spec
        names = table_names(self.conn)
        self._found = {n.lower(): n for n in names}
        internal = {n.lower() for n in INTERNAL_TABLES}
        foreign: list[str] = []
        found: list[str] = []
        present = False
        for n in names:
            folded = n.lower()
            if folded.startswith("sqlite_") or folded in internal:
                continue
            if spec.mode == "one-table":
                if folded == (spec.table or "").lower():
                    present = True
                    self._check_columns(n, spec.columns())
                    self._check_rowid(n)
                else:
                    foreign.append(n)
                continue
            state = spec.state_table(n)
            if state is None:
                foreign.append(n)
                continue
            self._check_columns(n, [spec.key, spec.value, *spec.extra_columns])
            self._check_rowid(n)
            present = True
            found.append(state)
        if spec.mode == "one-table" and present:
            sql = (
                f"SELECT DISTINCT {quote(spec.name_column or '')} COLLATE BINARY "
                f"FROM {quote(self._found[(spec.table or '').lower()])}"
            )
            for (name,) in self.conn.execute(sql).fetchall():
                if not isinstance(name, str) or not name:
                    raise SourceError(
                        f"{self.path}: {spec.table}.{spec.name_column} holds {name!r}, "
                        "not a table name (non-empty text)"
                    )
                found.append(name)
        return found, foreign, present

    def _check_rowid(self, table: str) -> None:
        """Refuse ``keep_rowid`` on a table without rowids (``WITHOUT ROWID``)."""
        if not self.spec.keep_rowid:
            return
        try:
            self.conn.execute(f"SELECT rowid FROM {quote(table)} LIMIT 0").fetchall()
        except Exception as exc:  # the driver's "no such column": a WITHOUT ROWID table
            raise SourceError(
                f"{self.path}: table {table!r} has no rowids (WITHOUT ROWID), and the layout "
                "says keep_rowid = true",
                hint="set keep_rowid = false in the layout",
            ) from exc

    def _check_columns(self, table: str, wanted: list[str]) -> None:
        cols = {c[0].lower() for c in _columns(self.conn, table)}
        missing = [c for c in wanted if c.lower() not in cols]
        if missing:
            raise SourceError(
                f"{self.path}: table {table!r} has no column {missing[0]!r} that the layout names"
            )

    def _metadata(self) -> dict[str, bytes]:
        if not self.layout.metadata_in_store:
            return read_side_metadata(self.path)
        return read_metadata(self.conn, table_names(self.conn))

    def _tables(self, meta: Mapping[str, bytes], found: list[str]) -> list[TableInfo]:
        names = set(found)
        if self.spec.mode == "one-table":  # an empty table exists by its recorded kind
            names |= {k[len(META_KIND_PREFIX) :] for k in meta if k.startswith(META_KIND_PREFIX)}
        tables = []
        for name in sorted(names, key=lambda n: n.encode("utf-8")):
            # A recorded kind wins (a conversion or an upgrade wrote it).
            recorded = meta.get(META_KIND_PREFIX + name)
            versioned = (
                recorded == b"versioned" if recorded is not None else name in self.layout.versioned
            )
            if name in found:
                self._kind_check(name, versioned)
            tables.append(TableInfo(name, TableKind.VERSIONED if versioned else TableKind.PLAIN))
        return tables


def _named(spec: SqlSpec, param: str = "?1") -> str:
    """The condition that a one-table row is of the state table named by ``param``.

    Names are compared as bytes (``COLLATE BINARY``) whatever the name column's own
    collation; the column's own comparison comes first so that its index is used.
    """
    column = quote(spec.name_column or "")
    return f"{column} = {param} AND {column} = {param} COLLATE BINARY"


def _outside(owner: _Mapped, table: TableInfo, after: bytes | None) -> str | None:
    """The first row after ``after`` whose key, value or version is of another storage
    class than its codec's, for a message ("the value of key 'k' is a TEXT ('x'), not a
    BLOB"); or None."""
    spec = owner.spec
    sql, cond, args = owner._place(table.name)
    checks = [("key", spec.key, spec.key_codec)]
    if spec.value_codec != "any":  # any class is a value of codec "any"
        checks.append(("value", spec.value, spec.value_codec))
    version = owner._version_of(table)
    if version:
        checks.append(("version", version, "integer"))
    cols, bad = class_checks(checks)
    conds = [cond] if cond else []
    if after is not None:
        conds.append(
            f"{quote(spec.key)} COLLATE BINARY > {owner._mark(spec.key_codec == 'integer')}"
        )
        args = (*args, owner._bound(_to_sql(spec.key_codec, after)))
    conds.append(f"({bad})")
    row = owner.conn.execute(
        f"SELECT {quote(spec.key)}, {cols} FROM {quote(sql)} WHERE {' AND '.join(conds)} "
        f"ORDER BY {quote(spec.key)} COLLATE BINARY LIMIT 1",
        args,
    ).fetchall()
    return outside_message(row[0], checks, _codec_hint, key_with_value=True) if row else None


def _codec_hint(what: str, kind: str) -> str:
    """The codec that reads a column's rows of storage class ``kind`` (upper case), where
    one does ("value_codec = "text" reads TEXT values"), for :func:`_outside`'s message."""
    codec = "key_codec" if what == "key" else "value_codec"
    known = kind.lower() in ("blob", "text", "integer", "real")
    if what != "version" and known and (what == "value" or kind.lower() != "real"):
        return f' ({codec} = "{kind.lower()}" reads {kind} {what}s)'
    return ""


def _check_encoding(conn: Any, spec: SqlSpec, path: Path) -> None:
    """Refuse a text codec on a file whose text is not UTF-8 (its order would not be bytes')."""
    if "text" not in (spec.key_codec, spec.value_codec):
        return
    enc = str(conn.execute("PRAGMA encoding").fetchall()[0][0])
    if enc.upper() != "UTF-8":
        raise SourceError(
            f"{path}: the file's text is {enc}, not UTF-8: the text codec reads UTF-8 only"
        )


class SqlLayoutReader(_Mapped, Reader):
    """One snapshot of a SQL file in a layout (the engine's connection, read-only)."""

    threadsafe_reads = True

    def __init__(self, raw: RawSqlRead, layout: Layout, skip_foreign: bool):
        self.raw = raw
        self.path = raw.path
        self.conn = raw.conn
        self.layout = layout
        self.ints_as_text = raw.ints_as_text
        self.paged = raw.paged
        self.facts = replace(raw.facts, private_metadata=(META_KIND_PREFIX,))
        try:
            with self.opening(failed="{path}: not a readable SQLite database ({text})"):
                _check_encoding(self.conn, layout.sql, self.path)
                found, foreign, present = self._find()
                self.foreign_tables = foreign
                self._counts = {n: self._count(n) for n in foreign}
                if foreign and not skip_foreign:
                    listed = ", ".join(repr(n) for n in foreign)
                    raise SourceError(
                        f"{self.path}: tables not in {layout.describe()}: {listed}",
                        hint="--skip-foreign-tables leaves them out; or correct the layout",
                    )
                self.snapshot_metadata = self._metadata()
                self.snapshot_tables = self._tables(self.snapshot_metadata, found)
                spec = layout.sql
                if (
                    spec.mode != "table-per-table"
                    and not present
                    and not self.snapshot_tables
                    and foreign
                ):
                    raise SourceError(
                        f"{self.path}: no table {spec.table!r}, which {layout.describe()} names"
                    )
        except BaseException:
            raw.close()
            raise

    def _count(self, table: str) -> int | None:
        with contextlib.suppress(Exception):  # a count for the summary only
            return int(self.conn.execute(f"SELECT count(*) FROM {quote(table)}").fetchall()[0][0])
        return None

    def skipped_tables(self) -> list[tuple[str, int | None]]:
        return [(f"table {n!r}", self._counts.get(n)) for n in self.foreign_tables]

    def confirm_end(self, table: TableInfo, after: bytes | None, last: bytes | None) -> None:
        self.raw.confirm()

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        sql, cond, args = self._place(table.name)
        where = f" WHERE {cond}" if cond else ""
        with contextlib.suppress(Exception):  # progress only: a failure here is no error
            n = self.conn.execute(f"SELECT count(*) FROM {quote(sql)}{where}", args).fetchall()
            return int(n[0][0]), True
        return None

    def close(self) -> None:
        raw = getattr(self, "raw", None)
        if raw is not None:
            self.raw = None  # type: ignore[assignment]
            raw.close()


def check_sql_tables(layout: Layout, tables: list[TableInfo]) -> None:
    """Refuse, before anything is written, tables the layout cannot hold.

    Raises:
        DestinationError: a table the layout has no place for, a versioned table without
            a version column, or one the layout (metadata 'none') does not list (exit 5).
    """
    spec: SqlSpec = layout.sql
    problems = []
    seen: dict[str, str] = {}
    for t in tables:
        sql = spec.sql_table(t.name)
        if spec.mode != "one-table" and sql is not None:
            other = seen.setdefault(sql.lower(), t.name)
            if other != t.name:
                problems.append(f"{t.name!r} (its SQL table {sql!r} is {other!r}'s, case ignored)")
                continue
        problem = None
        if spec.sql_table(t.name) is None:
            problem = "has no SQL table in the layout"
        elif t.versioned and spec.version is None:
            problem = "is versioned, and the layout has no version column"
        elif t.versioned and not layout.metadata_in_store and t.name not in layout.versioned:
            problem = (
                "is versioned, and the layout (metadata 'none') does not list it in `versioned`"
            )
        if problem:
            problems.append(f"{t.name!r} ({problem})")
    if problems:
        raise DestinationError(
            f"{layout.describe()} cannot hold {', '.join(problems)}",
            hint="leave it out with --tables, or correct the layout",
        )


def _stored_form(statement: str) -> str:
    """A CREATE INDEX/TRIGGER/VIEW statement as SQLite keeps it in ``sqlite_schema``."""
    m = _EXTRA_HEAD.match(statement)
    if not m:
        return statement.strip()
    unique = " UNIQUE" if m.group(1) else ""
    return f"CREATE{unique} {m.group(2).upper()} " + statement[m.end() :]


class SqlLayoutWriter(_Mapped, Writer):
    """Writes a SQL file in a layout through the engine's own writer (its connection
    and transactions)."""

    def __init__(self, raw: RawSqlWriter, layout: Layout, create: bool):
        self.raw = raw
        self.path = raw.path
        self.conn = raw.conn
        self.layout = layout
        self.ints_as_text = bool(getattr(raw, "ints_as_text", False))
        self.paged = bool(getattr(raw, "paged", False))
        self.facts = replace(raw.facts, private_metadata=(META_KIND_PREFIX,))
        spec = layout.sql
        try:
            with self.errors(
                "opening for writing", failed="{path}: cannot open for writing ({text})"
            ):
                self._find()
            if spec.mode == "one-table" and spec.table and spec.table.lower() not in self._found:
                if not create:
                    raise DestinationError(
                        f"{self.path}: no table {spec.table!r}, which the layout names"
                    )
                self._tx(lambda: self._create_sql_table(None))
            if create:
                self._tx(self._file_settings)
        except BaseException:
            raw.close()
            raise

    def _tx(self, work: Callable[[], None]) -> None:
        self.raw.sql_tx(work)

    def _file_settings(self) -> None:
        spec = self.spec
        if spec.user_version is not None:
            self.conn.execute(f"PRAGMA user_version = {int(spec.user_version)}").fetchall()
        if spec.application_id is not None:
            self.conn.execute(f"PRAGMA application_id = {int(spec.application_id)}").fetchall()

    def _plain_create(self, sql: str, versioned: bool = True) -> str:
        """A table from the columns and codecs (the version column for a versioned
        table, or every table of a one-table layout)."""
        spec = self.spec
        key_type = CODEC_TYPES[spec.key_codec]
        value_type = CODEC_TYPES[spec.value_codec]
        if spec.mode == "one-table":
            cols = [
                f"{spec.name_column} TEXT NOT NULL",
                f"{spec.key} {key_type} NOT NULL",
                f"{spec.value} {value_type}".rstrip()
                + (" NOT NULL" if spec.value_codec != "any" else ""),
                *spec.extra_columns,
            ]
            if spec.version:
                cols.append(f"{spec.version} INTEGER")
            cols.append(f"PRIMARY KEY ({spec.name_column}, {spec.key})")
        else:
            cols = [f"{spec.key} {key_type} PRIMARY KEY", f"{spec.value} {value_type}".rstrip()]
            cols += spec.extra_columns
            if spec.version and versioned:
                cols.append(f"{spec.version} INTEGER")
        tail = " WITHOUT ROWID" if spec.without_rowid else ""
        return f"CREATE TABLE {quote(sql)} ({', '.join(cols)}){tail}"

    def _create_sql_table(self, name: str | None, versioned: bool = True) -> None:
        """Create the SQL table of state table ``name`` (None: the one-table table)."""
        spec = self.spec
        sql = spec.table if name is None else spec.sql_table(name)
        assert sql is not None
        statement = spec.create_sql(name) if name is not None else None
        if statement is None and isinstance(spec.create, str) and spec.mode == "one-table":
            statement = spec.create
        self.conn.execute(statement or self._plain_create(sql, versioned)).fetchall()
        created = {n.lower(): n for n in table_names(self.conn)}
        if sql.lower() not in created:
            raise DestinationError(
                f"{self.path}: the layout's create statement made no table {sql!r}"
            )
        self._found[sql.lower()] = created[sql.lower()]
        self._check_created(created[sql.lower()], versioned)

    def _check_created(self, sql: str, versioned: bool) -> None:
        spec = self.spec
        wanted = (
            spec.columns()
            if versioned or spec.mode == "one-table"
            else [spec.key, spec.value, *spec.extra_columns]
        )
        try:
            self._check_columns(sql, wanted)
            self._check_rowid(sql)
        except SourceError as exc:
            raise DestinationError(str(exc)) from exc

    def _insert_sql(self, table: TableInfo) -> str:
        spec = self.spec
        sql, _, _ = self._place(table.name)
        cols = ([spec.name_column] if spec.mode == "one-table" else []) + [spec.key, spec.value]
        marks = (["?"] if spec.mode == "one-table" else []) + [
            self._mark(spec.key_codec == "integer"),
            self._mark(spec.value_codec == "integer"),
        ]
        if spec.keep_rowid:
            cols.append("rowid")
            marks.append(self._mark(True))
        cols += list(spec.extra_columns)
        marks += ["?"] * len(spec.extra_columns)
        if table.versioned and spec.version:
            cols.append(spec.version)
            marks.append(self._mark(True))
        verb = "INSERT" if self.layout.metadata_in_store else "INSERT OR REPLACE"
        names = ", ".join(c if c == "rowid" else quote(c or "") for c in cols)
        return f"{verb} INTO {quote(sql)} ({names}) VALUES ({', '.join(marks)})"

    def _rows(self, table: TableInfo, batch: Batch) -> list[Any]:
        spec = self.spec
        kc, vc = spec.key_codec, spec.value_codec
        head: tuple[Any, ...] = (table.name,) if spec.mode == "one-table" else ()
        if kc == vc == "blob" and not head and not spec.keep_rowid and not spec.extra_columns:
            if table.versioned:
                return [(k, v, self._bound(to_signed(ver))) for k, v, ver in batch]
            return batch if isinstance(batch, list) else list(batch)
        out = []
        for rec in batch:
            try:
                k = _to_sql(kc, rec[0])
            except ValueError as exc:
                raise DestinationError(
                    f"{self.path}: key {shown_key(rec[0])} of table {table.name!r} cannot be "
                    f"stored with key_codec {kc!r} ({exc})"
                ) from exc
            try:
                raw = rec[1]
                if spec.keep_rowid:
                    rowid = decode_integer(bytes(raw[:8]))
                    raw = raw[8:]
                extra: list[Any] = []
                if spec.extra_columns:
                    raw, extra = _unframed(raw, len(spec.extra_columns))
                v = _to_sql(vc, raw)
            except ValueError as exc:
                raise DestinationError(
                    f"{self.path}: the value of key {shown_key(rec[0])} of table "
                    f"{table.name!r} cannot be stored with value_codec {vc!r} ({exc})"
                ) from exc
            if kc == "integer":
                k = self._bound(k)
            if vc == "integer":
                v = self._bound(v)
            wide = [
                x
                for x in ([v] if vc == "any" else []) + extra
                if self.ints_as_text and type(x) is int and not -(2**31) <= x < 2**31
            ]
            if wide:
                raise DestinationError(
                    f"{self.path}: the record of key {shown_key(rec[0])} of table "
                    f"{table.name!r} holds the INTEGER {wide[0]}, which this driver would store "
                    "as a REAL (it binds integers beyond 32 bits as REAL)",
                    hint='an INTEGER value column can be value_codec = "integer"',
                )
            tail = ((self._bound(rowid),) if spec.keep_rowid else ()) + tuple(extra)
            if table.versioned:
                out.append((*head, k, v, *tail, self._bound(to_signed(rec[2]))))
            else:
                out.append((*head, k, v, *tail))
        return out

    def _metadata_work(self, metadata: Mapping[str, bytes | None] | None) -> None:
        if metadata and self.layout.metadata_in_store:
            write_metadata(self.conn, metadata)

    def _side(self, metadata: Mapping[str, bytes | None] | None) -> None:
        if metadata and not self.layout.metadata_in_store:
            # After the records: a checkpoint never runs ahead of what is written.
            write_side_metadata(self.path, metadata, self.layout.describe())

    def raw_metadata(self) -> dict[str, bytes]:
        if not self.layout.metadata_in_store:
            return read_side_metadata(self.path)
        return stored_metadata(self.conn) if self._has_meta_table() else {}

    def _has_meta_table(self) -> bool:
        return METADATA_TABLE.lower() in {n.lower() for n in table_names(self.conn)}

    def list_tables(self) -> list[TableInfo]:
        found, _, _ = self._find()
        return self._tables(self.raw_metadata(), found)

    def create_table(self, table: TableInfo) -> None:
        check_sql_tables(self.layout, [table])
        spec = self.spec
        if spec.mode == "one-table":
            self._refuse_merging(table.name)
        kind = {META_KIND_PREFIX + table.name: table.kind.value.encode()}

        def work() -> None:
            sql = spec.sql_table(table.name) or ""
            if spec.mode != "one-table" and sql.lower() not in self._found:
                self._create_sql_table(table.name, table.versioned)
            if spec.mode != "one-table" and table.versioned:
                self._check_columns(self._found[sql.lower()], [spec.version or ""])
            self._metadata_work(kind)

        self._tx(work)

    def _refuse_merging(self, name: str) -> None:
        """Refuse a new table that the app's name column (of a collation other than
        BINARY) would hold as an existing one: ``a`` and ``A`` under ``COLLATE NOCASE``.

        Raises:
            DestinationError: such a name (exit 5).
        """
        spec = self.spec
        sql, _, _ = self._place(name)
        col = quote(spec.name_column or "")
        with self.errors("reading the schema"):
            row = self.conn.execute(
                f"SELECT {col} FROM {quote(sql)} WHERE {col} = ? AND {col} <> ? COLLATE BINARY "
                "LIMIT 1",
                (name, name),
            ).fetchall()
        if row:
            raise DestinationError(
                f"{self.path}: name column {spec.name_column!r} is "
                f"{self._collation(sql, spec.name_column or '')}: tables "
                f"{row[0][0]!r} and {name!r} would merge"
            )

    def _collation(self, table: str, column: str) -> str:
        """``COLLATE X`` of a column, as an index on it says (else "not BINARY")."""
        with contextlib.suppress(Exception):  # the message only
            for idx in self.conn.execute(f"PRAGMA index_list({quote(table)})").fetchall():
                for info in self.conn.execute(f"PRAGMA index_xinfo({quote(idx[1])})").fetchall():
                    if info[2] is not None and str(info[2]).lower() == column.lower():
                        return f"COLLATE {info[4]}"
        return "not BINARY"

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        rows = self._rows(table, batch)
        sql = self._insert_sql(table)

        def work() -> None:
            if rows:
                self.conn.executemany(sql, rows)
            self._metadata_work(metadata)

        self._tx(work)
        self._side(metadata)

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        self._tx(lambda: self._metadata_work(metadata))
        self._side(metadata)

    def _extra_sql(self) -> None:
        """The app's indexes, triggers and views, once the records are in (a trigger
        created before would fire on every record written)."""
        spec = self.spec
        if not spec.extra_sql:
            return
        if spec.mode == "table-per-table":
            statements = [s for t in self.list_tables() for s in spec.extra_sql_for(t.name)]
        else:
            statements = list(spec.extra_sql_for(spec.name or ""))

        def work() -> None:
            have = {r[0] for r in self.conn.execute("SELECT sql FROM sqlite_schema").fetchall()}
            for s in statements:
                if _stored_form(s) not in have and s not in have:
                    self.conn.execute(s).fetchall()

        self._tx(work)

    def finish(self) -> None:
        with self.errors("finishing", failed="{path}: finishing failed ({text})"):
            self._extra_sql()
        self.raw.finish()

    def sync(self) -> None:
        self.raw.sync()

    def transaction(self) -> AbstractContextManager[None]:
        return self.raw.transaction()

    def backup(self, path: Path) -> None:
        self.raw.backup(path)

    def execute_sql(self, sql: str) -> None:
        self._tx(lambda: self.conn.execute(sql).fetchall())

    def drop_table(self, name: str) -> None:
        spec = self.spec
        sql, cond, args = self._place(name)
        kind = {META_KIND_PREFIX + name: None}

        def work() -> None:
            if spec.mode == "one-table":
                self.conn.execute(f"DELETE FROM {quote(sql)} WHERE {cond}", args)
            else:
                self.conn.execute(f"DROP TABLE IF EXISTS {quote(sql)}")
                self._found.pop(sql.lower(), None)
            self._metadata_work(kind)

        self._tx(work)
        self._side(kind)

    def rename_table(self, old: str, new: str) -> None:
        spec = self.spec
        if spec.mode == "single-table":
            raise DestinationError(f"{self.path}: {self.layout.describe()} holds one table only")
        check_sql_tables(self.layout, [TableInfo(new, TableKind.PLAIN)])
        sql, cond, args = self._place(old)
        kind = self.raw_metadata().get(META_KIND_PREFIX + old)
        moved = {META_KIND_PREFIX + old: None, META_KIND_PREFIX + new: kind}

        def work() -> None:
            if spec.mode == "one-table":
                self.conn.execute(
                    f"UPDATE {quote(sql)} SET {quote(spec.name_column or '')} = ?2 WHERE {cond}",
                    (*args, new),
                )
            else:
                target = spec.sql_table(new) or ""
                self.conn.execute(f"ALTER TABLE {quote(sql)} RENAME TO {quote(target)}")
                self._found.pop(sql.lower(), None)
                self._found[target.lower()] = target
            self._metadata_work(moved)

        self._tx(work)
        self._side(moved)

    def close(self) -> None:
        raw = getattr(self, "raw", None)
        if raw is not None:
            self.raw = None  # type: ignore[assignment]
            raw.close()


# --- layout init: a layout guessed from a SQL file ----------------------------------


_CODEC_OF_TYPE = {"BLOB": "blob", "": "blob", "TEXT": "text", "INTEGER": "integer"}


def _codec_of(declared: str) -> str | None:
    """The codec a declared type's column most likely holds (SQLite's affinity rules)."""
    t = declared.upper()
    if t in _CODEC_OF_TYPE:
        return _CODEC_OF_TYPE[t]
    if "INT" in t:
        return "integer"
    if "CHAR" in t or "CLOB" in t or "TEXT" in t:
        return "text"
    if "BLOB" in t:
        return "blob"
    return None


def _classes(conn: Any, table: str, column: str) -> list[str]:
    """The storage classes a column holds (``typeof``), most frequent first."""
    rows = conn.execute(
        f"SELECT typeof({quote(column)}) AS t, count(*) AS n FROM {quote(table)} "
        "GROUP BY t ORDER BY n DESC"
    ).fetchall()
    return [str(r[0]) for r in rows]


def _unique_columns(conn: Any, table: str) -> set[str]:
    """The columns that are alone in a PRIMARY KEY or UNIQUE constraint (or index)."""
    out: set[str] = set()
    for idx in conn.execute(f"PRAGMA index_list({quote(table)})").fetchall():
        if not int(idx[2]):  # not unique
            continue
        cols = conn.execute(f"PRAGMA index_info({quote(idx[1])})").fetchall()
        if len(cols) == 1 and cols[0][2] is not None:
            out.add(str(cols[0][2]).lower())
    cols = _columns(conn, table)
    pk = [c for c in cols if c[3]]
    if len(pk) == 1:
        out.add(pk[0][0].lower())
    return out


@dataclass
class _KvTable:
    """A SQL table seen as one key/value table."""

    table: str
    key: str
    value: str
    version: str | None
    key_codec: str
    value_codec: str
    rowid: bool
    create: str
    extra: list[str]
    problem: str | None = None  # why the guess may not read it (a mixed column …)


def _kv_candidate(conn: Any, table: str) -> _KvTable | str:
    """The table as a key/value table, or why it is not one."""
    cols = _columns(conn, table)
    unique = _unique_columns(conn, table)
    keys = [c for c in cols if c[0].lower() in unique]
    if not keys:
        return f"table {table!r} has no PRIMARY KEY or UNIQUE column to be the key"
    if len(cols) not in (2, 3):
        return (
            f"table {table!r} has {len(cols)} columns: a key/value table has a key, a value "
            "and optionally an INTEGER version"
        )
    key = keys[0]
    rest = [c for c in cols if c is not key]
    version = None
    if len(rest) == 2:
        ints = [c for c in rest if "INT" in c[1]]
        if not ints:
            return f"table {table!r}: three columns, none of the other two an INTEGER version"
        version = ints[-1][0]
        rest = [c for c in rest if c[0] != version]
    value = rest[0]
    problem = None
    kcodec = _codec_of(key[1]) or "blob"
    seen = _classes(conn, table, key[0])
    if seen:
        kcodec = {"blob": "blob", "text": "text", "integer": "integer"}.get(seen[0], kcodec)
        if len(seen) > 1 or seen[0] not in ("blob", "text", "integer"):
            problem = (
                f"key column {key[0]!r} holds {', '.join(s.upper() for s in seen)} keys: "
                f"one storage class per key column (key_codec = {kcodec!r} reads the "
                f"{kcodec.upper()} ones and refuses the others)"
            )
    vcodec = _codec_of(value[1]) or "blob"
    seen = [s for s in _classes(conn, table, value[0])]
    if seen:
        if seen[0] in ("blob", "text", "integer", "real"):
            vcodec = seen[0]
        if len(seen) > 1 or seen[0] == "null":
            vcodec = "any"  # each value's class carried in its bytes (a tag byte)
    sql_rows = conn.execute(
        "SELECT type, sql FROM sqlite_schema WHERE tbl_name = ? AND sql IS NOT NULL", (table,)
    ).fetchall()
    create = next((s for t, s in sql_rows if t == "table"), "")
    extra = [s for t, s in sql_rows if t != "table"]
    without = bool(re.search(r"\)\s*WITHOUT\s+ROWID\s*;?\s*$", create, re.IGNORECASE))
    return _KvTable(
        table, key[0], value[0], version, kcodec, vcodec, not without, create, extra, problem
    )


def _rowids_out_of_key_order(conn: Any, t: _KvTable) -> bool:
    """Whether some row of the table has a smaller rowid than the row before it in key order."""
    k = quote(t.key)
    row = conn.execute(
        f"SELECT 1 FROM (SELECT rowid AS r, lag(rowid) OVER (ORDER BY {k} COLLATE BINARY) AS p "
        f"FROM {quote(t.table)}) WHERE r < p LIMIT 1"
    ).fetchall()
    return bool(row)


def _toml(s: str) -> str:
    return json.dumps(s, ensure_ascii=False)


def _multiline(s: str) -> str:
    if '"""' not in s and "\\" not in s and not s.endswith('"'):
        return '"""' + s + '"""'
    return _toml(s)


def guess_sql_layout(conn: Any, path: Path, engine: str) -> str:
    """A layout file guessed from a SQL file (``statemigrate layout init``), as TOML
    with comments saying what was seen and what could not be.

    Recognised: key/value tables (a key column alone in a PRIMARY KEY or UNIQUE, a
    value, an optional INTEGER version): several of the same columns are one
    table-per-table layout (sqlitedict's tables), one is a single-table layout
    (``dbm.sqlite3``'s ``Dict``); and a one-table layout (a text name column beside
    the key).

    Raises:
        SourceError: no table can be read by a layout; the message names why each is not.
    """
    names = [
        n
        for n in table_names(conn)
        if not n.lower().startswith("sqlite_")
        and n.lower() not in (METADATA_TABLE.lower(), ALEMBIC_TABLE.lower())
    ]
    user_version = int(conn.execute("PRAGMA user_version").fetchall()[0][0])
    application_id = int(conn.execute("PRAGMA application_id").fetchall()[0][0])
    one = [c for c in (_one_table_candidate(conn, n) for n in names) if c is not None]
    kv: list[_KvTable] = []
    why: list[str] = []
    not_kv: list[str] = []
    for n in names:
        if any(c["table"] == n for c in one):
            continue
        got = _kv_candidate(conn, n)
        if isinstance(got, str):
            why.append(got)
            not_kv.append(n)
        else:
            kv.append(got)
    if kv and METADATA_TABLE in table_names(conn) and not not_kv and not one:
        from ._sql import layout_tables

        if not layout_tables(conn, names)[1]:
            raise LayoutNotNeeded(
                f"{path}: the file is in statemigrate's own SQL layout: no layout file is needed",
                hint="read it without --layout",
            )
    head = [f"# Guessed by `statemigrate layout init {path.name}`: check every line."]
    head.append(f'engine = "{engine}"')
    if one and not kv:
        return _one_table_text(conn, one, names, head)
    if not kv:
        if not names:
            raise SourceError(f"{path}: the file has no tables")
        raise SourceError(
            f"{path}: no table can be read as key/value records: {'; '.join(why)}",
            hint="a layout needs a key column that is PRIMARY KEY or UNIQUE and one value column",
        )
    groups: dict[tuple[Any, ...], list[_KvTable]] = {}
    for t in kv:
        groups.setdefault((t.key, t.value, t.key_codec, t.value_codec), []).append(t)
    chosen = max(groups.values(), key=len)
    with_version = [t for t in chosen if t.version]
    if len({t.version for t in with_version}) > 1:
        chosen = [t for t in chosen if t.version in (None, with_version[0].version)]
    others = [t.table for t in kv if t not in chosen] + [c["table"] for c in one]
    foreign = others + not_kv
    first = with_version[0] if with_version else chosen[0]
    versioned: list[str] = []
    lines = list(head)
    if first.version:
        for t in chosen:
            row = conn.execute(
                f"SELECT 1 FROM {quote(t.table)} WHERE {quote(first.version)} IS NOT NULL LIMIT 1"
            ).fetchall()
            if row:
                versioned.append(t.table)
        lines.append("# Tables with a version in some row (an empty one cannot be told from here):")
    lines.append(f"versioned = {json.dumps(versioned, ensure_ascii=False)}")
    lines.append("# The app's shape exactly: no statemigrate table in the file, a convert's")
    lines.append('# checkpoint beside it while it runs (use "store" to upgrade in place).')
    lines.append('metadata = "none"')
    lines += ["", "[sql]"]
    if len(chosen) == 1:
        lines.append('mode = "single-table"')
        lines.append(f"table = {_toml(first.table)}")
        lines.append(f"name = {_toml(first.table)}  # the state table's name")
    else:
        lines.append('mode = "table-per-table"')
        mapping = ", ".join(f"{_toml(t.table)} = {_toml(t.table)}" for t in chosen)
        lines.append(f"tables = {{ {mapping} }}")
    lines.append(f"key = {_toml(first.key)}")
    lines.append(f"value = {_toml(first.value)}")
    if first.version:
        lines.append(f"version = {_toml(first.version)}  # signed 64-bit, read back modulo 2^64")
    lines.append(f"key_codec = {_toml(first.key_codec)}")
    lines.append(f"value_codec = {_toml(first.value_codec)}")
    if first.value_codec == "any":
        lines.append(
            '# The value column holds several storage classes: "any" carries each value\'s\n'
            "# class as a tag byte before its bytes (elsewhere the value is tagged)."
        )
    rowids = {t.rowid for t in chosen}
    lines.append(f"rowid = {'true' if first.rowid else 'false'}")
    if len(rowids) > 1:
        lines.append("# Some of these tables are WITHOUT ROWID: `create` below keeps each one's.")
    shuffled = [t.table for t in chosen if t.rowid and _rowids_out_of_key_order(conn, t)]
    if shuffled and rowids == {True}:
        lines.append(
            "# The rows' rowids are not in key order (an app reading ORDER BY rowid sees its\n"
            "# own order): keep_rowid carries them, the value elsewhere being the rowid's 8\n"
            "# bytes then the value's. Set it to false if the store moves for good."
        )
        lines.append("keep_rowid = true")
    if len(chosen) == 1:
        lines.append(f"create = {_multiline(first.create)}")
        if first.extra:
            lines.append("extra_sql = [" + ", ".join(_multiline(s) for s in first.extra) + "]")
    else:
        shared = {t.create.replace(quote(t.table), "{table}", 1) for t in chosen}
        if len(shared) == 1 and "{table}" in next(iter(shared)):
            lines.append(f"create = {_toml(shared.pop())}  # {{table}}: each table's quoted name")
        else:
            creates = ", ".join(f"{_toml(t.table)} = {_toml(t.create)}" for t in chosen)
            lines.append(f"create = {{ {creates} }}")
        extras = [t for t in chosen if t.extra]
        if extras:
            body = ", ".join(
                f"{_toml(t.table)} = [{', '.join(_toml(s) for s in t.extra)}]" for t in extras
            )
            lines.append(f"extra_sql = {{ {body} }}")
    lines.append(f"user_version = {user_version}")
    lines.append(f"application_id = {application_id}")
    problems = [t.problem for t in chosen if t.problem]
    for p in problems:
        lines.append(f"# Note: {p}")
    if any(t.rowid for t in chosen) and not shuffled:
        lines.append("# Rowid tables: rows are written back in key order, with new rowids.")
    if foreign:
        lines.append(
            "# Other tables, not in this layout (--skip-foreign-tables leaves them out): "
            + ", ".join(dict.fromkeys(foreign))
        )
    return "\n".join(lines) + "\n"


def _one_table_candidate(conn: Any, table: str) -> dict[str, str] | None:
    """The columns of ``table`` if it looks like one-table mode: a text name, a blob key
    and value (the key in the primary key when there is one), an optional integer."""
    cols = _columns(conn, table)
    text = [c for c in cols if "CHAR" in c[1] or "TEXT" in c[1] or "CLOB" in c[1]]
    blobs = [c for c in cols if c[1] in ("BLOB", "")]
    ints = [c for c in cols if "INT" in c[1]]
    if len(text) != 1 or len(blobs) != 2 or len(ints) > 1 or len(cols) != 3 + len(ints):
        return None
    key, value = sorted(blobs, key=lambda c: (c[3] == 0, c[3]))  # a primary-key blob first
    out = {"table": table, "name_column": text[0][0], "key": key[0], "value": value[0]}
    if ints:
        out["version"] = ints[0][0]
    return out


def _one_table_text(
    conn: Any, found: list[dict[str, str]], names: list[str], lines: list[str]
) -> str:
    best = found[0]
    q = quote(best["table"])
    if "version" in best:
        ver = quote(best["version"])
        name = quote(best["name_column"])
        with_versions = sorted(
            r[0]
            for r in conn.execute(
                f"SELECT DISTINCT {name} COLLATE BINARY FROM {q} WHERE {ver} IS NOT NULL"
            ).fetchall()
            if isinstance(r[0], str)
        )
        lines.append(
            "# Tables with a version in some row (a table whose rows carry none yet, or an"
            "\n# empty one, cannot be told from here): add the versioned tables the app has."
        )
        lines.append(f"versioned = {json.dumps(with_versions)}")
    else:
        lines.append("# No INTEGER column: no table can carry a version in this layout.")
        lines.append("versioned = []")
    lines += ["", "[sql]", 'mode = "one-table"']
    for field_name in ("table", "name_column", "key", "value", "version"):
        if field_name in best:
            lines.append(f'{field_name} = "{best[field_name]}"')
    if "version" in best:
        lines[-1] += "  # signed 64-bit, as read; NULL in plain tables' rows"
    others = [c["table"] for c in found[1:]]
    foreign = [n for n in names if n not in {c["table"] for c in found}]
    if others:
        lines.append(f"# Also shaped like this: {', '.join(others)} (one layout file each)")
    if foreign:
        lines.append(
            f"# Other tables, not in this layout (--skip-foreign-tables leaves them out): "
            f"{', '.join(foreign)}"
        )
    return "\n".join(lines) + "\n"
