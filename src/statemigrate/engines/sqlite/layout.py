"""SQLite in an app's own layout: every state table in one SQL table (``--source-layout``).

The layout file (:mod:`statemigrate.layout`) names the SQL table and its columns:
``table(name_column, key, value[, version])``. A state table is the set of rows with
its name in ``name_column``; its records are read ``ORDER BY key`` (BLOBs compare as
bytes). The metadata stays in ``__statemigrate__`` (and the revision in
``alembic_version``) as in the default layout; a table's kind is in the layout's
metadata's ``kind:<table>`` entry (which is also how an empty table exists) or, for a
table without one, in the layout's ``versioned`` list. Other SQL tables are the app's own: refused as foreign unless
``skip_foreign_tables``. Writers create exactly the layout's table (``PRIMARY KEY
(name, key)``, ``WITHOUT ROWID`` unless the layout says otherwise); indexes the app
needs are the app's business.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from dataclasses import replace
from pathlib import Path
from typing import Any

from ...errors import DestinationError, SourceError
from ...layout import Layout, SqlOneTable
from ...model import META_KIND_PREFIX, METADATA_TABLE, Batch, TableInfo, TableKind
from .._sql import (
    ALEMBIC_TABLE,
    outside_model,
    quote,
    read_metadata,
    read_only_open,
    refuse_foreign,
    table_names,
    to_signed,
    uri_path,
    write_metadata,
)
from ..base import Reader, take_batches
from . import SQLITE_FACTS, SqliteEngine, SqliteWriter

LAYOUT_FACTS = replace(SQLITE_FACTS, private_metadata=(META_KIND_PREFIX,))


def named(spec: SqlOneTable, param: str = "?1") -> str:
    """The condition that a row is of the state table named by ``param``.

    Names are compared as bytes (``COLLATE BINARY``) whatever the name column's own
    collation: an app's column declared ``COLLATE NOCASE`` would otherwise make tables
    ``a`` and ``A`` one. The column's own comparison comes first so that its index (the
    primary key's) is used; on a BINARY column the second one changes nothing.
    """
    column = quote(spec.name_column)
    return f"{column} = {param} AND {column} = {param} COLLATE BINARY"


def _select_sql(spec: SqlOneTable, versioned: bool, after: bool) -> str:
    cols = [spec.key, spec.value] + ([spec.version] if versioned and spec.version else [])
    where = named(spec) + (f" AND {quote(spec.key)} > ?2" if after else "")
    return (
        f"SELECT {', '.join(quote(c) for c in cols)} FROM {quote(spec.table)} "
        f"WHERE {where} ORDER BY {quote(spec.key)}"
    )


def _scan(
    conn: Any, spec: SqlOneTable, table: TableInfo, after: bytes | None, n: int, nbytes: int
) -> Iterator[Batch]:
    args = (table.name,) if after is None else (table.name, after)
    cur = conn.execute(_select_sql(spec, table.versioned, after is not None), args)
    return take_batches(cur, n, nbytes, "signed_version" if table.versioned else "as_is")


def _outside_model(
    conn: Any, spec: SqlOneTable, table: TableInfo, after: bytes | None
) -> str | None:
    """The first of the table's rows of another type than the layout's (:func:`.._sql.outside_model`)."""
    version = spec.version if table.versioned else None
    where = (named(spec), (table.name,))
    return outside_model(conn, spec.table, (spec.key, spec.value, version), after, where)


def check_layout_table(conn: Any, names: list[str], spec: SqlOneTable, where: Path) -> bool:
    """Whether the layout's table is there, with every column the layout names.

    Raises:
        SourceError: the table is there without one of the columns (exit 4).
    """
    found = next((n for n in names if n.lower() == spec.table.lower()), None)
    if found is None:
        return False
    cols = {r[1].lower() for r in conn.execute(f"PRAGMA table_info({quote(found)})").fetchall()}
    missing = [c for c in spec.columns() if c.lower() not in cols]
    if missing:
        raise SourceError(
            f"{where}: table {spec.table!r} has no column {missing[0]!r} that the layout names"
        )
    return True


def layout_tables(
    conn: Any, layout: Layout, meta: Mapping[str, bytes], present: bool, where: Path
) -> list[TableInfo]:
    """The state tables: the names in the name column and the kinds the metadata records.

    Raises:
        SourceError: a name that is not text, or a table's rows that contradict its
            kind (a version in a plain table's row, none in a versioned one's).
    """
    spec = layout.sql
    names: set[str] = set()
    if present:
        sql = f"SELECT DISTINCT {quote(spec.name_column)} COLLATE BINARY FROM {quote(spec.table)}"
        for (name,) in conn.execute(sql).fetchall():
            if not isinstance(name, str) or not name:
                raise SourceError(
                    f"{where}: {spec.table}.{spec.name_column} holds {name!r}, "
                    "not a table name (non-empty text)"
                )
            names.add(name)
    names |= {k[len(META_KIND_PREFIX) :] for k in meta if k.startswith(META_KIND_PREFIX)}
    tables = []
    for name in sorted(names, key=lambda n: n.encode("utf-8")):
        # A recorded kind wins (a conversion or an upgrade wrote it: a layout describing
        # the app at head lists tables versioned only from a later revision on).
        recorded = meta.get(META_KIND_PREFIX + name)
        versioned = recorded == b"versioned" if recorded is not None else name in layout.versioned
        if present and spec.version is not None:
            wrong = "IS NULL" if versioned else "IS NOT NULL"
            row = conn.execute(
                f"SELECT {quote(spec.key)} FROM {quote(spec.table)} WHERE "
                f"{named(spec)} AND {quote(spec.version)} {wrong} LIMIT 1",
                (name,),
            ).fetchall()
            if row:
                kind = "versioned" if versioned else "plain"
                raise SourceError(
                    f"{where}: table {name!r} is {kind}, but its record {row[0][0]!r} "
                    f"{'has no' if versioned else 'has a'} {spec.version}",
                    hint="list the versioned tables in the layout's `versioned`",
                )
        tables.append(TableInfo(name, TableKind.VERSIONED if versioned else TableKind.PLAIN))
    return tables


class LayoutSqliteReader(Reader):
    """One snapshot of a SQLite file in a one-table layout."""

    threadsafe_reads = True
    facts = LAYOUT_FACTS

    def __init__(
        self, engine: type[SqliteEngine], path: Path, options: Mapping[str, Any], layout: Layout
    ):
        apsw = engine.require_driver()
        self.path = path
        self.layout = layout
        self.opened = read_only_open(path)
        with self.errors("opening", failed="{path}: not a readable SQLite database ({text})"):
            self.conn = apsw.Connection(
                self.opened.uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
            )
            self.conn.set_busy_timeout(3000)
            self.conn.execute("BEGIN")
            names = table_names(self.conn)  # the first read fixes the snapshot
            present = check_layout_table(self.conn, names, layout.sql, path)
            ours = {layout.sql.table.lower(), METADATA_TABLE.lower(), ALEMBIC_TABLE.lower()}
            foreign = [
                n for n in names if n.lower() not in ours and not n.lower().startswith("sqlite_")
            ]
            if foreign and not options.get("skip_foreign_tables", False):
                refuse_foreign(path, foreign)
            self.snapshot_metadata = read_metadata(self.conn, names)
            if not present and not any(
                k.startswith(META_KIND_PREFIX) for k in self.snapshot_metadata
            ):
                raise SourceError(
                    f"{path}: no table {layout.sql.table!r}, which {layout.describe()} names"
                )
            self.snapshot_tables = layout_tables(
                self.conn, layout, self.snapshot_metadata, present, path
            )

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        return _scan(self.conn, self.layout.sql, table, after, max_records, max_bytes)

    def outside_model(
        self, table: TableInfo, after: bytes | None, exc: BaseException
    ) -> str | None:
        """The first of the table's rows of another type than the layout's."""
        return _outside_model(self.conn, self.layout.sql, table, after)

    def confirm_end(self, table: TableInfo, after: bytes | None, last: bytes | None) -> None:
        """On read-only media, the file unchanged since it was opened (:class:`ReadOnlyOpen`)."""
        self.opened.confirm_unchanged(self.path)

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        """``count(*)`` of the table's rows, exact, in the read's snapshot."""
        spec = self.layout.sql
        sql = f"SELECT count(*) FROM {quote(spec.table)} WHERE {named(spec)}"
        with contextlib.suppress(Exception):  # progress only: a failure here is no error
            return int(self.conn.execute(sql, (table.name,)).fetchall()[0][0]), True
        return None

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
            self.conn = None


class LayoutSqliteWriter(SqliteWriter):
    """Writes the layout's one table; everything else as the default SQLite writer."""

    facts = LAYOUT_FACTS

    def __init__(self, engine: type[SqliteEngine], path: Path, create: bool, layout: Layout):
        super().__init__(engine, path, create)
        self.layout = layout
        spec = layout.sql
        with self.errors("opening for writing", failed="{path}: cannot open for writing ({text})"):
            present = check_layout_table(self.conn, table_names(self.conn), spec, path)
        if not present:
            if not create:
                self.close()
                raise DestinationError(f"{path}: no table {spec.table!r}, which the layout names")
            self._tx(lambda: self.conn.execute(self._create_sql()))

    def _create_sql(self) -> str:
        spec = self.layout.sql
        cols = [
            f"{quote(spec.name_column)} TEXT NOT NULL",
            f"{quote(spec.key)} BLOB NOT NULL",
            f"{quote(spec.value)} BLOB NOT NULL",
        ]
        if spec.version:
            cols.append(f"{quote(spec.version)} INTEGER")
        key = f"PRIMARY KEY ({quote(spec.name_column)}, {quote(spec.key)})"
        tail = " WITHOUT ROWID" if spec.without_rowid else ""
        return f"CREATE TABLE {quote(spec.table)} ({', '.join(cols)}, {key}){tail}"

    def _insert_sql(self, versioned: bool) -> str:
        spec = self.layout.sql
        cols = [spec.name_column, spec.key, spec.value]
        if versioned and spec.version:
            cols.append(spec.version)
        marks = ", ".join("?" for _ in cols[:3]) + (", CAST(? AS INTEGER)" if len(cols) > 3 else "")
        return f"INSERT INTO {quote(spec.table)} ({', '.join(quote(c) for c in cols)}) VALUES ({marks})"

    def list_tables(self) -> list[TableInfo]:
        return layout_tables(self.conn, self.layout, self.raw_metadata(), True, self.path)

    def _refuse_merging(self, name: str) -> None:
        """Refuse a new table that the app's name column would hold as an existing one.

        The reader tells names apart as bytes, but a name column of another collation
        than BINARY (``COLLATE NOCASE``) makes ``a`` and ``A`` one in the app's own
        queries and in the primary key.

        Raises:
            DestinationError: such a name (exit 5).
        """
        spec = self.layout.sql
        with self.errors("reading the schema"):
            collation = str(self.conn.column_metadata("main", spec.table, spec.name_column)[1])
            if collation.upper() == "BINARY":
                return
            for other in self.list_tables():
                same = self.conn.execute(
                    f"SELECT ?1 = ?2 COLLATE {quote(collation)}", (other.name, name)
                ).fetchall()[0][0]
                if same and other.name != name:
                    raise DestinationError(
                        f"{self.path}: name column {spec.name_column!r} is COLLATE {collation}: "
                        f"tables {other.name!r} and {name!r} would merge"
                    )

    def create_table(self, table: TableInfo) -> None:
        if table.versioned and not self.layout.sql.version:
            raise DestinationError(
                f"{self.path}: table {table.name!r} is versioned, and the layout has no version column"
            )
        self._refuse_merging(table.name)
        self.put_metadata({META_KIND_PREFIX + table.name: table.kind.value.encode()})

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        name = table.name
        if table.versioned:
            rows: Any = [(name, k, v, to_signed(ver)) for k, v, ver in batch]
        else:
            rows = [(name, r[0], r[1]) for r in batch]
        sql = self._insert_sql(table.versioned)

        def work() -> None:
            self.conn.executemany(sql, rows)
            if metadata:
                write_metadata(self.conn, metadata)

        self._tx(work)

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        return _scan(self.conn, self.layout.sql, table, after, max_records, max_bytes)

    def outside_model(
        self, table: TableInfo, after: bytes | None, exc: BaseException
    ) -> str | None:
        """The first of the table's rows of another type than the layout's."""
        return _outside_model(self.conn, self.layout.sql, table, after)

    def drop_table(self, name: str) -> None:
        spec = self.layout.sql

        def work() -> None:
            self.conn.execute(f"DELETE FROM {quote(spec.table)} WHERE {named(spec)}", (name,))
            write_metadata(self.conn, {META_KIND_PREFIX + name: None})

        self._tx(work)

    def rename_table(self, old: str, new: str) -> None:
        spec = self.layout.sql
        kind = self.raw_metadata().get(META_KIND_PREFIX + old)

        def work() -> None:
            self.conn.execute(
                f"UPDATE {quote(spec.table)} SET {quote(spec.name_column)} = ?1 "
                f"WHERE {named(spec, '?2')}",
                (new, old),
            )
            write_metadata(self.conn, {META_KIND_PREFIX + old: None, META_KIND_PREFIX + new: kind})

        self._tx(work)


def _columns(conn: Any, table: str) -> list[tuple[str, str, int]]:
    """(name, declared type upper-cased, position in the primary key) of each column."""
    rows = conn.execute(f"PRAGMA table_info({quote(table)})").fetchall()
    return [(r[1], str(r[2] or "").upper(), int(r[5])) for r in rows]


def _one_table_candidate(conn: Any, table: str) -> dict[str, str] | None:
    """The columns of ``table`` if it looks like one-table mode: a text name, a blob key
    and value (the key in the primary key when there is one), an optional integer."""
    cols = _columns(conn, table)
    text = [c for c in cols if "CHAR" in c[1] or "TEXT" in c[1] or "CLOB" in c[1]]
    blobs = [c for c in cols if c[1] in ("BLOB", "")]
    ints = [c for c in cols if "INT" in c[1]]
    if len(text) != 1 or len(blobs) != 2 or len(ints) > 1 or len(cols) != 3 + len(ints):
        return None
    key, value = sorted(blobs, key=lambda c: (c[2] == 0, c[2]))  # a primary-key blob first
    out = {"table": table, "name_column": text[0][0], "key": key[0], "value": value[0]}
    if ints:
        out["version"] = ints[0][0]
    return out


def guess_layout(path: Path, apsw: Any) -> str:
    """A layout file guessed from an existing SQLite file, as TOML with comments saying
    what was seen and what could not be (which tables are versioned, and how).

    Raises:
        SourceError: no table of the file looks like a one-table layout.
    """
    conn = apsw.Connection(
        "file:" + uri_path(path) + "?mode=ro",
        flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI,
    )
    try:
        names = [
            n
            for n in table_names(conn)
            if not n.lower().startswith("sqlite_")
            and n.lower() not in (METADATA_TABLE.lower(), ALEMBIC_TABLE.lower())
        ]
        found = [c for c in (_one_table_candidate(conn, n) for n in names) if c is not None]
        if not found:
            raise SourceError(
                f"{path}: no table looks like one table holding every state table "
                "(a text name column, a BLOB key, a BLOB value, an optional INTEGER version)",
                hint="write the layout file by hand (README: Your app's own layout)",
            )
        best = found[0]
        lines = [
            f"# Guessed by `statemigrate layout init sqlite {path.name}`: check every line.",
            'engine = "sqlite"',
        ]
        q = f"{quote(best['table'])}"
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
        lines += ["", "[sqlite]", 'mode = "one-table"']
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
    finally:
        conn.close()
