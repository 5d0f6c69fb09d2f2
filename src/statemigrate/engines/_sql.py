"""The SQL layout shared by the sqlite, libsql and turso engines (DESIGN.md, "Layouts").

One table per table (``key BLOB PRIMARY KEY, value BLOB`` and, when versioned,
``version INTEGER``), metadata in ``__statemigrate__``, the schema revision mirrored
into Alembic's ``alembic_version`` table. Everything here works on an apsw connection
and on a DB-API one alike (``conn.execute(sql, params)`` returning rows).
"""

from __future__ import annotations

import json
import os
import re
from abc import abstractmethod
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ..errors import DestinationError, SourceError, StoreBusyError
from ..locks import LockProbe, SideFile, lock_holder
from ..model import METADATA_TABLE, Batch, TableInfo, TableKind, shown_name, table_name_problem
from .access import shown_key
from .base import META_REVISION, Capabilities, Engine, Reader, Writer
from .options import EngineOptions, layout_option, skip_foreign_tables_option

if TYPE_CHECKING:
    from ..layout import Layout

SQLITE_MAGIC = b"SQLite format 3\x00"
ALEMBIC_TABLE = "alembic_version"
U64 = 2**64
I64_MAX = 2**63 - 1
INTERNAL_TABLES = {METADATA_TABLE, ALEMBIC_TABLE}
SIDECAR_SUFFIXES = ("-wal", "-shm", "-journal")
# What SQLite opens beside the file it writes (its unix VFS opens them O_NOFOLLOW itself;
# declared so that a link there is named before the driver's "unable to open").
SIDE_FILES = (
    SideFile("-wal", "SQLite's write-ahead log"),
    SideFile("-shm", "SQLite's WAL index"),
    SideFile("-journal", "SQLite's rollback journal"),
)
# A -wal holds committed pages until a checkpoint copies them into the database; a
# -journal whose header starts with this magic is "hot" (a write was cut short) and is
# rolled back into the database when it opens.
WAL_HEADER_BYTES = 32
HOT_JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")


def side_file_state(path: Path) -> str | None:
    """What a side file of a SQLite file holds: "committed", "hot" or None (nothing)."""
    size = path.stat().st_size
    if path.name.endswith("-wal") and size > WAL_HEADER_BYTES:
        return "committed"
    if path.name.endswith("-journal") and size >= len(HOT_JOURNAL_MAGIC):
        with open(path, "rb") as f:
            if f.read(len(HOT_JOURNAL_MAGIC)) == HOT_JOURNAL_MAGIC:
                return "hot"
    return None


# A writer of a SQLite file holds a POSIX write lock on it or on a file beside it.
LOCK_PROBES = (LockProbe(""), LockProbe("-shm"), LockProbe("-wal"), LockProbe("-journal"))
RESERVED_NAMES: Mapping[str, str] = {
    ALEMBIC_TABLE: "reserved for the revision stamp that Alembic reads"
}
RESERVED_PREFIXES: Mapping[str, str] = {"sqlite_": "reserved by SQLite"}
FOLDING = "in SQL, which ignores case"
# A SQLite file through a driver that opens it read-only beside other readers.
CAPABILITIES = Capabilities(
    atomic_multi_table=True,
    read_only_open=True,
    multi_process_readers=True,
    directory=False,
    sql=True,
    in_place=True,
    transactional_ddl=True,
    rename_table=True,
)
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")
_CREATE_NAME = re.compile(
    r'\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"((?:[^"]|"")*)"', re.IGNORECASE
)


def fold_sql_name(name: str) -> str:
    """A table name as SQLite compares it: ASCII letters ignore case, other letters do not."""
    return name.translate(_ASCII_LOWER)


def quote(name: str) -> str:
    """A correctly quoted SQL identifier (names are never pasted unquoted)."""
    return '"' + name.replace('"', '""') + '"'


def to_signed(version: int) -> int:
    """A u64 version as the signed 64-bit integer with the same bits."""
    return version - U64 if version > I64_MAX else version


class SqlLayout:
    """The SQL of the layout; ``without_rowid`` is False for Turso."""

    without_rowid: ClassVar[bool] = True

    @classmethod
    def create_table_sql(cls, table: TableInfo) -> str:
        """``CREATE TABLE`` of a table."""
        cols = "key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL"
        if table.versioned:
            cols += ", version INTEGER NOT NULL"
        tail = " WITHOUT ROWID" if cls.without_rowid else ""
        return f"CREATE TABLE {quote(table.name)} ({cols}){tail}"

    @staticmethod
    def insert_sql(table: TableInfo) -> str:
        """``INSERT`` of one record."""
        if table.versioned:
            return f"INSERT INTO {quote(table.name)} (key, value, version) VALUES (?, ?, ?)"
        return f"INSERT INTO {quote(table.name)} (key, value) VALUES (?, ?)"

    @staticmethod
    def select_sql(table: TableInfo, after: bool, limit: bool = False) -> str:
        """``SELECT`` of a table's records in key order (after a key, a page at most)."""
        cols = "key, value, version" if table.versioned else "key, value"
        where = " WHERE key > ?" if after else ""
        tail = " LIMIT ?" if limit else ""
        return f"SELECT {cols} FROM {quote(table.name)}{where} ORDER BY key{tail}"

    META_CREATE = (
        f"CREATE TABLE IF NOT EXISTS {quote(METADATA_TABLE)} (key TEXT PRIMARY KEY, value BLOB)"
    )
    META_PUT = f"INSERT OR REPLACE INTO {quote(METADATA_TABLE)} (key, value) VALUES (?, ?)"
    META_DELETE = f"DELETE FROM {quote(METADATA_TABLE)} WHERE key = ?"
    META_SELECT = f"SELECT key, value FROM {quote(METADATA_TABLE)}"
    ALEMBIC_CREATE = (
        f"CREATE TABLE IF NOT EXISTS {ALEMBIC_TABLE} "
        "(version_num VARCHAR(32) NOT NULL, CONSTRAINT alembic_version_pkc PRIMARY KEY (version_num))"
    )


def outside_model(
    conn: Any,
    table: str,
    columns: tuple[str, str, str | None],
    after: bytes | None,
    where: tuple[str, tuple[Any, ...]] = ("", ()),
) -> str | None:
    """The first record after ``after`` whose key or value is not a BLOB or whose version
    is not an INTEGER (SQLite keeps any type in any column), for a message; or None.

    Args:
        conn: the connection (apsw or DB-API).
        table: the SQL table.
        columns: the key, value and version columns (version None: a plain table).
        after: the key after which the batch that failed began (None: the first).
        where: a condition on the table's rows and its parameters (a one-table layout's
            name column).

    Returns:
        "the version of key b'k' is a REAL (1.5), not an INTEGER", or None when every
        record is of the layout's types.
    """
    key_column, value_column, version_column = columns
    checks = [("key", key_column, "blob"), ("value", value_column, "blob")]
    if version_column:
        checks.append(("version", version_column, "integer"))
    cols, bad = class_checks(checks)
    key = quote(key_column)
    conds, args = ([where[0]], where[1]) if where[0] else ([], ())
    if after is not None:
        conds.append(f"{key} > ?")
        args += (after,)
    conds.append(f"({bad})")
    row = conn.execute(
        f"SELECT {key}, {cols} FROM {quote(table)} WHERE {' AND '.join(conds)} "
        f"ORDER BY {key} LIMIT 1",
        args,
    ).fetchall()
    return outside_message(row[0], checks) if row else None


# A check of :func:`class_checks`: what the column holds (key, value or version), the
# column, and the storage class its rows must have (SQLite's typeof(): blob, integer …).
ClassCheck = tuple[str, str, str]


def class_checks(checks: Sequence[ClassCheck]) -> tuple[str, str]:
    """A query's part that finds rows of another storage class than their columns':
    the columns selected (each column's ``typeof`` and the start of its ``quote``, for
    :func:`outside_message`) and the condition that one of them is of another class."""
    cols = ", ".join(f"typeof({quote(c)}), substr(quote({quote(c)}), 1, 40)" for _, c, _ in checks)
    bad = " OR ".join(f"typeof({quote(c)}) <> '{t}'" for _, c, t in checks)
    return cols, bad


def outside_message(
    row: Sequence[Any],
    checks: Sequence[ClassCheck],
    hint: Callable[[str, str], str] | None = None,
    key_with_value: bool = False,
) -> str | None:
    """What the first column of ``row`` of another storage class than its check's holds,
    for a message ("the value of key b'k' is a REAL (1.5), not an INTEGER"); or None.

    Args:
        row: the row's key, then the columns :func:`class_checks` selects.
        checks: the checks the row was selected by.
        hint: what to say after "not a BLOB" about a column (what it holds, the class
            found in upper case), or "".
        key_with_value: a key of another class is shown with its quoted start, as the
            other columns are ("the key 'k' is a TEXT ('k')"), not alone.
    """
    first, *found = row
    for (what, _c, wanted), kind, shown in zip(checks, found[0::2], found[1::2], strict=False):
        if kind == wanted:
            continue
        kind = str(kind).upper()
        article = "an" if kind[0] in "AEIOU" else "a"
        is_ = "NULL" if kind == "NULL" else f"{article} {kind} ({shown})"
        want = wanted.upper()
        should = f"not {'an' if want[0] in 'AEIOU' else 'a'} {want}"
        if hint is not None:
            should += hint(what, kind)
        if what != "key":
            return f"the {what} of key {shown_key(first)} is {is_}, {should}"
        if kind == "NULL":
            return f"a key is NULL, {should}"
        return f"the key {shown} is {is_ if key_with_value else f'{article} {kind}'}, {should}"
    return None


def layout_columns(table: TableInfo) -> tuple[str, str, str | None]:
    """The key, value and version (None: a plain table) columns of the default layout."""
    return ("key", "value", "version" if table.versioned else None)


def versioned_rows(table: TableInfo, batch: Batch) -> Any:
    """Rows to bind for a batch (versions as signed 64-bit)."""
    if table.versioned:
        return [(k, v, to_signed(ver)) for k, v, ver in batch]
    return batch


def classify_columns(columns: list[tuple[str, str, int, int]]) -> TableKind | None:
    """The table kind from ``(name, type, notnull, pk)`` columns, or None if foreign."""
    shape = [(n.lower(), t.upper(), pk) for n, t, _nn, pk in columns]
    plain = [("key", "BLOB", 1), ("value", "BLOB", 0)]
    if shape == plain:
        return TableKind.PLAIN
    if shape == plain + [("version", "INTEGER", 0)]:
        return TableKind.VERSIONED
    return None


def check_internal_table(
    where: object, name: str, columns: list[tuple[str, str, int, int]]
) -> None:
    """Refuse a user's table named like statemigrate's metadata or Alembic's stamp.

    Both live beside the tables in a SQL store; they are told from a user's table of
    the same name by their columns (ours: ``key TEXT, value``; Alembic's: ``version_num``).

    Args:
        where: the store, for the message.
        name: ``__statemigrate__`` or ``alembic_version``.
        columns: the table's ``(name, type, notnull, pk)`` columns.

    Raises:
        SourceError: the table is not statemigrate's or Alembic's (exit 4).
    """
    cols = [(n.lower(), t.upper()) for n, t, _nn, _pk in columns]
    if name == METADATA_TABLE:
        ours = [c for c, _t in cols] == ["key", "value"] and cols[0][1] == "TEXT"
        what = "statemigrate's metadata"
    else:
        ours = "version_num" in [c for c, _t in cols]
        what = "Alembic's revision stamp"
    if not ours:
        raise SourceError(
            f"{where}: table {name!r} uses the name of {what}; rename it in the app first"
        )


def table_names(conn: Any) -> list[str]:
    """Table names as created; Turso lower-cases ``name`` but keeps the ``sql`` text."""
    out = []
    for name, sql in conn.execute(
        "SELECT name, sql FROM sqlite_schema WHERE type = 'table'"
    ).fetchall():
        m = _CREATE_NAME.match(sql or "")
        if m and m.group(1).replace('""', '"').lower() == name.lower():
            name = m.group(1).replace('""', '"')
        out.append(name)
    return out


def layout_tables(
    conn: Any, names: list[str], where: object | None = None
) -> tuple[list[TableInfo], list[str]]:
    """The tables in the layout, and the names of foreign ones (other columns).

    Args:
        conn: the connection.
        names: the store's table names (:func:`table_names`).
        where: the store, to refuse a user's table named like an internal one; None
            skips internal tables unchecked (a writer's own store).

    Raises:
        SourceError: an internal table's name on a user's table.
    """
    tables, foreign = [], []
    for name in names:
        if name.lower().startswith("sqlite_"):
            continue
        if name in INTERNAL_TABLES and where is None:
            continue
        cols = [
            (r[1], r[2], r[3], r[5])
            for r in conn.execute(f"PRAGMA table_info({quote(name)})").fetchall()
        ]
        if name in INTERNAL_TABLES:
            check_internal_table(where, name, cols)
            continue
        kind = classify_columns(cols)
        if kind is None:
            foreign.append(name)
        else:
            tables.append(TableInfo(name, kind))
    return tables, foreign


def refuse_foreign(where: object, foreign: list[str]) -> None:
    """Refuse tables not in the layout (unless the reader was told to skip them).

    Raises:
        SourceError: naming each of them, with the way out.
    """
    listed = ", ".join(repr(n) for n in foreign)
    raise SourceError(
        f"{where}: tables not in statemigrate's layout: {listed}",
        hint="if they are the app's state, `statemigrate layout init STORE` prints a layout "
        "file for them (then --source-layout FILE); --skip-foreign-tables leaves them out",
    )


def read_snapshot(
    conn: Any, path: Path, skip_foreign_tables: bool
) -> tuple[list[TableInfo], list[str], dict[str, bytes]]:
    """The first reads of a store's snapshot, inside its read transaction: its tables in
    the default layout, the names of the foreign ones, and its metadata.

    Raises:
        SourceError: foreign tables, unless ``skip_foreign_tables`` (:func:`refuse_foreign`);
            an internal table's name on a user's table (:func:`layout_tables`).
    """
    names = table_names(conn)  # the first read fixes the snapshot
    tables, foreign = layout_tables(conn, names, path)
    if foreign and not skip_foreign_tables:
        refuse_foreign(path, foreign)
    return tables, foreign, read_metadata(conn, names)


def stored_metadata(conn: Any) -> dict[str, bytes]:
    """The metadata table, whole."""
    return {k: bytes(v) for k, v in conn.execute(SqlLayout.META_SELECT).fetchall()}


def read_metadata(conn: Any, names: list[str]) -> dict[str, bytes]:
    """The metadata of a store with tables ``names``; the revision from Alembic's stamp
    when statemigrate's is missing (a store Alembic's own tools stamped)."""
    meta = stored_metadata(conn) if METADATA_TABLE in names else {}
    if META_REVISION not in meta and ALEMBIC_TABLE in names:
        rows = conn.execute(f"SELECT version_num FROM {ALEMBIC_TABLE}").fetchall()
        if rows:
            meta[META_REVISION] = json.dumps(sorted(r[0] for r in rows)).encode()
    return meta


def write_metadata(conn: Any, metadata: Mapping[str, bytes | None]) -> None:
    """Apply metadata updates (None deletes); the revision is mirrored for Alembic."""
    for key, value in metadata.items():
        if value is None:
            conn.execute(SqlLayout.META_DELETE, (key,))
        else:
            conn.execute(SqlLayout.META_PUT, (key, value))
        if key == META_REVISION:
            conn.execute(SqlLayout.ALEMBIC_CREATE)
            conn.execute(f"DELETE FROM {ALEMBIC_TABLE}")
            for rev in json.loads(value) if value is not None else []:
                conn.execute(f"INSERT INTO {ALEMBIC_TABLE} (version_num) VALUES (?)", (rev,))


def is_sqlite_file(path: Path) -> bool:
    """Whether ``path`` is a file starting with SQLite's header (changes nothing)."""
    if not path.is_file():
        return False
    return file_head(path, 16) == SQLITE_MAGIC


def sqlite_file_info(path: Path) -> dict[str, Any]:
    """Facts of a SQLite file's header for ``inspect``: page size, journal mode, writer."""
    head = file_head(path)
    if len(head) < 100:
        return {}
    modes = {1: "rollback journal", 2: "WAL"}
    wal = head[18] == 2
    probes = LOCK_PROBES[:2] if wal else LOCK_PROBES[:1]  # the file, and its -shm in WAL mode
    return {
        "page_size": int.from_bytes(head[16:18], "big") or 65536,
        "journal": modes.get(head[18], f"unknown ({head[18]})"),
        # In WAL mode a reader sees one consistent snapshot while the app writes.
        "wal_readable_while_written": wal,
        "writer_pid": lock_holder(path, probes),
    }


def check_source_file(path: Path) -> None:
    """Refuse, before a driver opens it, a source that is not a whole SQLite file.

    Raises:
        SourceError: missing, a directory, no SQLite header, or cut short.
    """
    if not path.exists():
        raise SourceError(f"{path}: no such file")
    if path.is_dir():
        raise SourceError(f"{path}: is a directory, not a SQLite file")
    if file_head(path, 16) != SQLITE_MAGIC:  # a clear error before the driver's generic one
        raise SourceError(f"{path}: not a SQLite database (no SQLite header)")
    check_file_size(path)


def check_file_size(path: Path) -> None:
    """Refuse a SQLite file cut short, which SQLite itself would read without an error.

    SQLite counts a partial last page as a whole one and reads its missing bytes as
    zeros, so a file one byte short converts with a changed record. It is refused when
    its size is not a whole number of pages (SQLite always writes whole pages), or when
    the header's page count (valid when the change counters at offsets 24 and 92
    match) needs more pages than the file has and no ``-wal`` beside it holds frames
    that could supply them.

    Args:
        path: the SQLite file (its header already checked).

    Raises:
        SourceError: the file is truncated.
    """
    head = file_head(path)
    size = path.stat().st_size
    if len(head) < 100:
        raise SourceError(f"{path}: truncated SQLite file ({size} bytes, the header alone is 100)")
    page = int.from_bytes(head[16:18], "big")
    page = 65536 if page == 1 else page
    if page < 512 or page & (page - 1):
        return  # not a valid page size: SQLite refuses the file itself
    if size % page:
        raise SourceError(
            f"{path}: truncated or damaged SQLite file ({size:,} bytes is not"
            f" a whole number of its {page:,}-byte pages)"
        )
    count = int.from_bytes(head[28:32], "big")
    if count and head[24:28] == head[92:96] and count * page > size:
        wal = Path(str(path) + "-wal")
        if not (wal.is_file() and wal.stat().st_size >= 32 + 24 + page):
            raise SourceError(
                f"{path}: truncated SQLite file (its header counts {count:,} pages"
                f" of {page:,} bytes; the file holds {size // page:,})"
            )


@dataclass(frozen=True)
class SqlFileOptions(EngineOptions):
    """The options of a SQLite-file engine (``--skip-foreign-tables``)."""

    skip_foreign_tables: bool = skip_foreign_tables_option()


@dataclass(frozen=True)
class SqlLayoutOptions(SqlFileOptions):
    """The options of a SQLite-file engine with layouts: those of every SQLite file, and
    an app's own layout."""

    layout: str | None = layout_option("in SQL tables")


class SqlFileEngine(Engine):
    """What the engines of a SQLite file share (sqlite, libsql, turso): facts and checks."""

    capabilities: ClassVar[Capabilities] = CAPABILITIES
    options: ClassVar[type[EngineOptions]] = SqlFileOptions
    sidecar_suffixes: ClassVar[tuple[str, ...]] = SIDECAR_SUFFIXES
    side_files: ClassVar[tuple[SideFile, ...]] = SIDE_FILES
    # The WAL index: every reader writes its read marks there.
    volatile_files: ClassVar[tuple[str, ...]] = ("*-shm",)
    space_factor: ClassVar[float] = 1.6
    reserved_table_names: ClassVar[Mapping[str, str]] = RESERVED_NAMES
    reserved_table_prefixes: ClassVar[Mapping[str, str]] = RESERVED_PREFIXES
    table_name_folding: ClassVar[str] = FOLDING

    @classmethod
    def side_file_state(cls, side: Path) -> str | None:
        """A ``-wal`` with frames is "committed", a ``-journal`` with SQLite's magic "hot"
        (:func:`side_file_state`)."""
        return side_file_state(side)

    @classmethod
    def sql_name(cls, name: str) -> str:
        """The SQL table that holds table ``name`` (the name itself but for Turso)."""
        return name

    @classmethod
    def fold_table_name(cls, name: str) -> str:
        """SQLite's case folding (ASCII only) of the SQL table that holds the table."""
        return fold_sql_name(cls.sql_name(name))

    @classmethod
    def check_tables(cls, tables: list[TableInfo], options: Mapping[str, Any] | None) -> None:
        """Refuse tables a new file cannot hold: SQL's rules in the default layout only.

        In an app's one-table layout the names are data in the name column, which the
        writer creates BINARY (compared as bytes): ``a`` beside ``A``, or
        ``alembic_version``, are tables like any other there; only the model's rules apply.
        """
        layout = cls._layout(cls.parse_options(options, "dest"))
        if layout is None:
            super().check_tables(tables, options)
            return
        problems = [(t.name, table_name_problem(t.name)) for t in tables]
        listed = ", ".join(f"{shown_name(n)} ({why})" for n, why in problems if why)
        if listed:
            raise DestinationError(f"the {cls.name} engine cannot hold these tables: {listed}")
        from ._sql_layout import check_sql_tables

        sql_layout = getattr(cls, "layout", SqlLayout)
        if layout.sql.without_rowid and layout.sql.create is None and not sql_layout.without_rowid:
            raise DestinationError(
                f"{layout.describe()}: the {cls.name} engine's WITHOUT ROWID tables are "
                "experimental (they cannot update or delete rows)",
                hint="set rowid = true in the layout, or give the app's own `create`",
            )
        check_sql_tables(layout, tables)

    @classmethod
    def detect(cls, path: Path) -> bool:
        """A file starting with SQLite's header (the sqlite engine wins auto-detection)."""
        return is_sqlite_file(path)

    @classmethod
    def check_source(cls, path: Path) -> None:
        """Refuse a source that is not a whole SQLite file (:func:`check_source_file`)."""
        check_source_file(path)

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        """The file header's facts (:func:`sqlite_file_info`)."""
        return sqlite_file_info(path)

    @classmethod
    def _open_reader(cls, path: Path, opts: SqlFileOptions) -> Reader:
        """Open a whole SQLite file at one snapshot (options ``skip_foreign_tables`` and,
        where the engine has it, ``layout``)."""
        layout = cls._layout(opts)  # a bad layout file is refused before the store is read
        cls.check_source(path)
        if layout is not None:
            return cls._layout_reader(path, opts, layout)
        return cls._reader(path, opts)

    @classmethod
    def _open_writer(cls, path: Path, opts: SqlFileOptions, create: bool) -> Writer:
        """Create a new SQLite file at ``path`` or open an existing one for writing (option
        ``layout`` where the engine has it)."""
        layout = cls._layout(opts)
        if layout is not None:  # loaded first: a bad layout file creates nothing
            return cls._layout_writer(path, create, layout)
        return cls._writer(path, create=create)

    @classmethod
    def _layout_reader(cls, path: Path, opts: SqlFileOptions, layout: Layout) -> Reader:
        """The reader of a store in an app's own layout (:mod:`._sql_layout`), over the
        engine's raw read (:meth:`_raw_read`)."""
        from ._sql_layout import SqlLayoutReader

        return SqlLayoutReader(cls._raw_read(path), layout, opts.skip_foreign_tables)

    @classmethod
    def _layout_writer(cls, path: Path, create: bool, layout: Layout) -> Writer:
        """The writer of a store in an app's own layout (:mod:`._sql_layout`), over the
        engine's own writer (:meth:`_raw_writer`)."""
        from ._sql_layout import SqlLayoutWriter

        raw = cls._raw_writer(path, create, layout.metadata_in_store)
        return SqlLayoutWriter(raw, layout, create)  # type: ignore[arg-type]

    @classmethod
    def _raw_read(cls, path: Path) -> Any:
        """One snapshot of the file for a layout's reader (a :class:`._sql_layout.RawSqlRead`;
        engines with layouts)."""
        raise NotImplementedError

    @classmethod
    def _raw_writer(cls, path: Path, create: bool, metadata_table: bool) -> Writer:
        """The engine's own writer for a layout's writer (``sql_tx``; engines with layouts)."""
        raise NotImplementedError

    @classmethod
    @abstractmethod
    def _reader(cls, path: Path, opts: SqlFileOptions) -> Reader:
        """The reader of a checked source."""

    @classmethod
    @abstractmethod
    def _writer(cls, path: Path, create: bool) -> Writer:
        """The writer of a new (``create``) or existing file."""


def file_head(path: Path, n: int = 100) -> bytes:
    """The first ``n`` bytes of a SQLite file, read without dropping a lock.

    Closing a descriptor of a file drops every POSIX lock this process holds on it, and
    SQLite's unix VFS alone knows to keep a descriptor open while one of its connections
    holds a lock: so the header is read through that VFS where apsw is there. A plain
    ``open()`` taken while a reader of the file was open in this process (a convert's
    second reader beside SQLite's backup) released that reader's SHARED lock, and an app
    could commit under the read.

    Raises:
        OSError: the file cannot be read (as ``open()`` says it).
    """
    try:
        import apsw
    except ImportError:  # libSQL alone: its driver has no VFS access
        apsw = None  # type: ignore[assignment]
    if apsw is not None:
        try:
            flags = [apsw.SQLITE_OPEN_MAIN_DB | apsw.SQLITE_OPEN_READONLY, 0]
            f = apsw.VFSFile("", str(path), flags)
        except apsw.Error:
            pass  # not there, or not readable: said below as the file system says it
        else:
            try:
                return bytes(f.xRead(min(n, f.xFileSize()), 0))
            finally:
                f.xClose()
    with open(path, "rb") as fh:
        return fh.read(n)


def _wal_mode(path: Path) -> bool:
    """Whether the file's header says WAL mode (read and write versions 2)."""
    return file_head(path, 20)[18:20] == b"\x02\x02"


def _size(path: Path) -> int | None:
    try:
        return path.stat().st_size
    except FileNotFoundError:
        return None


def _state(path: Path) -> tuple[int, int, int, int]:
    st = path.stat()
    return (st.st_dev, st.st_ino, st.st_size, st.st_mtime_ns)


@dataclass(frozen=True)
class ReadOnlyOpen:
    """How a source is opened read-only: its ``file:`` URI, and for read-only media the
    file's state at open, confirmed unchanged at the end of each table read.

    Attributes:
        uri: the URI to open (``mode=ro``, and ``immutable=1`` on read-only media).
        state: for an immutable open, the file's (device, inode, size, mtime); else None.
    """

    uri: str
    state: tuple[int, int, int, int] | None = None

    def confirm_unchanged(self, path: Path) -> None:
        """Refuse a read of read-only media during which the file changed (exit 3).

        An immutable open takes no lock: a writer with write access elsewhere (the
        directory's owner, another mount) could checkpoint into the file meanwhile. The
        reads before an unchanged state were of the file as it was at open.

        Raises:
            StoreBusyError: the file changed since it was opened.
        """
        if self.state is not None and _state(path) != self.state:
            raise StoreBusyError(
                f"{path}: the file was written while it was read (opened as read-only media)",
                hint="stop the app, then run the same command",
            )


def read_only_open(path: Path) -> ReadOnlyOpen:
    """How to open the SQLite file ``path`` read-only, on any media.

    SQLite reads a WAL-mode file through a ``-shm`` it creates beside it, which it
    cannot on read-only media (a read-only mount, a directory this process cannot
    write): opening fails. SQLite documents ``immutable=1`` for such a file
    (https://www.sqlite.org/wal.html, "Read-Only Databases"); it is used only when the
    file is in WAL mode, no ``-shm`` is there and the ``-wal`` is absent or empty, so
    that every commit is in the file itself. As an
    immutable read takes no lock, the file is confirmed unchanged after each table
    (:meth:`ReadOnlyOpen.confirm_unchanged`). The same holds in a writable directory for
    a WAL-mode file without a ``-shm`` and with no commits in a ``-wal`` (no connection has
    it open; an app such as ``dbm.sqlite3`` closed it): a read-only open through SQLite
    would leave a ``-wal`` and a ``-shm`` beside the app's file, which it cannot remove.

    Raises:
        SourceError: a WAL-mode file on read-only media whose ``-wal`` holds commits,
            which SQLite reads only through a ``-shm`` it cannot create there (exit 4).
    """
    uri = "file:" + uri_path(path) + "?mode=ro"
    directory = path.absolute().parent
    if not _wal_mode(path):
        return ReadOnlyOpen(uri)
    if _size(Path(f"{path}-shm")) is not None:
        return ReadOnlyOpen(uri)  # SQLite reads through an existing -shm (3.22 and later)
    wal = _size(Path(f"{path}-wal"))
    if wal and os.access(directory, os.W_OK):
        return ReadOnlyOpen(uri)  # commits in the -wal: read through a -shm SQLite makes
    if wal:
        raise SourceError(
            f"{path}: its WAL ({path.name}-wal) holds commits that SQLite reads only through "
            f"a {path.name}-shm, which cannot be created in {directory} (not writable)",
            hint="copy the file and its -wal to a writable directory and read the copy",
        )
    return ReadOnlyOpen(uri + "&immutable=1", _state(path))


def uri_path(path: Path) -> str:
    """``path`` quoted for a ``file:`` URI."""
    from urllib.parse import quote as urlquote

    return urlquote(str(path.absolute()))
