"""SQLite through apsw, in the default layout of DESIGN.md.

One ``WITHOUT ROWID`` table per table (``key BLOB PRIMARY KEY, value BLOB`` and, when
versioned, ``version INTEGER``), metadata in ``__statemigrate__``, the schema
revision mirrored into Alembic's ``alembic_version`` table. The subclasses for
libSQL and Turso reuse the SQL text of :class:`SqlLayout`.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..errors import DestinationError, SourceError, StoreBusyError
from ..locks import busy_message, fcntl_holder, store_holder
from ..model import METADATA_TABLE, Batch, Record, TableInfo, TableKind
from .base import META_REVISION, Capabilities, Engine, Reader, Writer, check_options

SQLITE_MAGIC = b"SQLite format 3\x00"
ALEMBIC_TABLE = "alembic_version"
U64 = 2**64
I64_MAX = 2**63 - 1
INTERNAL_TABLES = {METADATA_TABLE, ALEMBIC_TABLE}
_ASCII_LOWER = str.maketrans("ABCDEFGHIJKLMNOPQRSTUVWXYZ", "abcdefghijklmnopqrstuvwxyz")


def fold_sql_name(name: str) -> str:
    """A table name as SQLite compares it: ASCII letters ignore case, other letters do not."""
    return name.translate(_ASCII_LOWER)


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


def quote(name: str) -> str:
    """A correctly quoted SQL identifier (names are never pasted unquoted)."""
    return '"' + name.replace('"', '""') + '"'


def to_signed(version: int) -> int:
    """A u64 version as the signed 64-bit integer with the same bits."""
    return version - U64 if version > I64_MAX else version


class SqlLayout:
    """The SQL of the default layout; ``without_rowid`` is False for Turso."""

    without_rowid: ClassVar[bool] = True

    @classmethod
    def create_table_sql(cls, table: TableInfo) -> str:
        cols = "key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL"
        if table.versioned:
            cols += ", version INTEGER NOT NULL"
        tail = " WITHOUT ROWID" if cls.without_rowid else ""
        return f"CREATE TABLE {quote(table.name)} ({cols}){tail}"

    @staticmethod
    def insert_sql(table: TableInfo) -> str:
        if table.versioned:
            return f"INSERT INTO {quote(table.name)} (key, value, version) VALUES (?, ?, ?)"
        return f"INSERT INTO {quote(table.name)} (key, value) VALUES (?, ?)"

    @staticmethod
    def select_sql(table: TableInfo, after: bool) -> str:
        cols = "key, value, version" if table.versioned else "key, value"
        where = " WHERE key > ?" if after else ""
        return f"SELECT {cols} FROM {quote(table.name)}{where} ORDER BY key"

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


def classify_columns(columns: list[tuple[str, str, int, int]]) -> TableKind | None:
    """The table kind from ``(name, type, notnull, pk)`` columns, or None if foreign."""
    shape = [(n.lower(), t.upper(), pk) for n, t, _nn, pk in columns]
    plain = [("key", "BLOB", 1), ("value", "BLOB", 0)]
    if shape == plain:
        return TableKind.PLAIN
    if shape == plain + [("version", "INTEGER", 0)]:
        return TableKind.VERSIONED
    return None


def fix_versions(rows: list) -> list:
    """Read SQLite's signed INTEGER versions back modulo 2^64."""
    return [(k, v, ver + U64 if ver < 0 else ver) for k, v, ver in rows]


def sql_write_records(table: TableInfo, batch: Batch) -> Any:
    """Rows to bind for a batch (versions as signed 64-bit)."""
    if table.versioned:
        return [(k, v, to_signed(ver)) for k, v, ver in batch]
    return batch


def decode_revision_meta(meta: dict[str, bytes], alembic_rows: list[str]) -> dict[str, bytes]:
    """Prefer our stamp; fall back to what Alembic's tools wrote."""
    if META_REVISION not in meta and alembic_rows:
        meta = dict(meta)
        meta[META_REVISION] = json.dumps(sorted(alembic_rows)).encode()
    return meta


class SqliteReader(Reader):
    """Reads one consistent snapshot: every query runs inside one read transaction."""

    threadsafe_reads = True

    def __init__(self, engine: type[SqliteEngine], path: Path, options: Mapping[str, Any]):
        apsw = engine.require_driver()
        self.engine = engine
        self.skip_foreign = bool(options.get("skip_foreign_tables", False))
        uri = "file:" + _uri_path(path) + "?mode=ro"
        try:
            self.conn = apsw.Connection(uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
            self.conn.set_busy_timeout(3000)
            self.conn.execute("BEGIN")
            # The first read fixes the snapshot for the whole transaction.
            names = [
                r[0]
                for r in self.conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")
            ]
        except apsw.BusyError as exc:
            raise StoreBusyError(busy_message(path, fcntl_holder(path))) from exc
        except apsw.Error as exc:
            raise SourceError(f"{path}: not a readable SQLite database ({_msg(exc)})") from exc
        self.path = path
        self._tables: list[TableInfo] = []
        foreign = []
        for name in names:
            if name.startswith("sqlite_"):
                continue
            cols = [
                (r[1], r[2], r[3], r[5])
                for r in self.conn.execute(f"PRAGMA table_info({quote(name)})")
            ]
            if name in INTERNAL_TABLES:
                check_internal_table(path, name, cols)
                continue
            kind = classify_columns(cols)
            if kind is None:
                foreign.append(name)
            else:
                self._tables.append(TableInfo(name, kind))
        self.foreign_tables = foreign
        if foreign and not self.skip_foreign:
            listed = ", ".join(repr(n) for n in foreign)
            raise SourceError(
                f"{path}: tables not in statemigrate's layout: {listed}",
                hint="convert them yourself, or pass --skip-foreign-tables to leave them out",
            )
        self._meta = self._read_meta(names)

    def _read_meta(self, names: list[str]) -> dict[str, bytes]:
        meta: dict[str, bytes] = {}
        if METADATA_TABLE in names:
            meta = {k: bytes(v) for k, v in self.conn.execute(SqlLayout.META_SELECT)}
        alembic = []
        if ALEMBIC_TABLE in names:
            alembic = [r[0] for r in self.conn.execute(f"SELECT version_num FROM {ALEMBIC_TABLE}")]
        return decode_revision_meta(meta, alembic)

    def list_tables(self) -> list[TableInfo]:
        return list(self._tables)

    def metadata(self) -> dict[str, bytes]:
        return dict(self._meta)

    def iter_records(self, table: TableInfo, after: bytes | None = None) -> Iterator[Record]:
        for batch in self.read_batches(table, after):
            yield from batch

    def read_batches(self, table, after=None, *, max_records=10_000, max_bytes=8 << 20):  # type: ignore[override]
        apsw = self.engine.require_driver()
        try:
            yield from select_batches(self.conn, table, after, max_records, max_bytes)
        except apsw.Error as exc:
            raise SourceError(
                f"{self.path}: reading table {table.name!r} failed ({_msg(exc)})"
            ) from exc
        except (ValueError, OverflowError) as exc:
            raise SourceError(
                f"{self.path}: table {table.name!r} holds a record outside the model ({exc})"
            ) from exc

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
            self.conn = None


def select_batches(
    conn: Any, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
) -> Iterator[Batch]:
    """Bounded batches of a table in key order, strictly after ``after``.

    Rows are taken (and signed versions read back modulo 2^64) in the native
    extension, one call per batch; a key or value that is not a BLOB raises ValueError.
    """
    from .. import _native

    cur = conn.execute(
        SqlLayout.select_sql(table, after is not None), (after,) if after is not None else ()
    )
    decode = "signed_version" if table.versioned else "as_is"
    while True:
        rows, _nbytes = _native.take_batch(cur, max_records, max_bytes, decode)
        if not rows:
            return
        yield rows


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
    with open(path, "rb") as f:
        head = f.read(100)
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


def _uri_path(path: Path) -> str:
    from urllib.parse import quote as urlquote

    return urlquote(str(path.absolute()))


def _msg(exc: BaseException) -> str:
    return str(exc).split("\n")[0]


class SqliteWriter(Writer):
    """Writes through large transactions; WAL with relaxed sync while the file is private."""

    def __init__(self, engine: type[SqliteEngine], path: Path, create: bool):
        apsw = engine.require_driver()
        self.apsw = apsw
        self.path = path
        flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
        self.in_place = False  # set by transaction(): only in-place upgrades use it
        self.was_wal: bool | None = None  # an existing file's journal mode, to leave it so
        try:
            self.conn = apsw.Connection(str(path), flags=flags)
            self.conn.set_busy_timeout(2000)
            if not create:
                mode = self.conn.execute("PRAGMA journal_mode").fetchall()[0][0]
                self.was_wal = str(mode).lower() == "wal"
            # WAL keeps every committed batch whole across a kill -9 of this process;
            # synchronous=OFF is safe for that (the OS has the pages) and finish()
            # syncs before the file is renamed into place.
            self.conn.execute("PRAGMA journal_mode=WAL")
            self.conn.execute("PRAGMA synchronous=OFF")
            self.conn.execute("PRAGMA cache_size=-65536")
            self.conn.execute("PRAGMA wal_autocheckpoint=10000")
            self.conn.execute(SqlLayout.META_CREATE)
        except apsw.BusyError as exc:
            raise self._busy() from exc
        except (apsw.FullError, apsw.IOError) as exc:
            raise DestinationError(f"{path}: cannot open for writing ({_msg(exc)})") from exc
        except apsw.Error as exc:
            err = SourceError if not create else DestinationError
            raise err(f"{path}: cannot open for writing ({_msg(exc)})") from exc

    def _busy(self) -> StoreBusyError:
        """Exit 3 naming the process that holds the file (or its ``-wal``/``-shm``)."""
        paths = SqliteEngine.store_paths(self.path)
        return StoreBusyError(
            busy_message(self.path, store_holder(paths)),
            hint="stop the app, then run the same command",
        )

    def _final_journal_mode(self) -> str:
        """The mode to leave: an in-place upgrade leaves the mode it found, a built store DELETE."""
        return "WAL" if self.in_place and self.was_wal else "DELETE"

    def _tx(self, fn: Any) -> None:
        try:
            with self.conn:  # one transaction; rolled back on error
                fn()
        except self.apsw.FullError as exc:
            raise DestinationError(f"{self.path}: disk full ({_msg(exc)})") from exc
        except self.apsw.ConstraintError as exc:
            raise DestinationError(
                f"{self.path}: duplicate or out-of-order key ({_msg(exc)})"
            ) from exc
        except self.apsw.Error as exc:
            raise DestinationError(f"{self.path}: write failed ({_msg(exc)})") from exc

    def list_tables(self) -> list[TableInfo]:
        out = []
        for (name,) in self.conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'"):
            if name in INTERNAL_TABLES or name.startswith("sqlite_"):
                continue
            cols = [
                (r[1], r[2], r[3], r[5])
                for r in self.conn.execute(f"PRAGMA table_info({quote(name)})")
            ]
            kind = classify_columns(cols)
            if kind is not None:
                out.append(TableInfo(name, kind))
        return out

    def metadata(self) -> dict[str, bytes]:
        return {k: bytes(v) for k, v in self.conn.execute(SqlLayout.META_SELECT)}

    def create_table(self, table: TableInfo) -> None:
        self._tx(lambda: self.conn.execute(SqlLayout.create_table_sql(table)))

    def _put_meta(self, metadata: Mapping[str, bytes | None]) -> None:
        for key, value in metadata.items():
            if value is None:
                self.conn.execute(SqlLayout.META_DELETE, (key,))
            else:
                self.conn.execute(SqlLayout.META_PUT, (key, value))
            if key == META_REVISION:
                self._mirror_alembic(json.loads(value) if value is not None else [])

    def _mirror_alembic(self, revisions: list[str]) -> None:
        self.conn.execute(SqlLayout.ALEMBIC_CREATE)
        self.conn.execute(f"DELETE FROM {ALEMBIC_TABLE}")
        self.conn.executemany(
            f"INSERT INTO {ALEMBIC_TABLE} (version_num) VALUES (?)", [(r,) for r in revisions]
        )

    def write_batch(self, table: TableInfo, batch: Batch, metadata=None) -> None:  # type: ignore[override]
        def work() -> None:
            self.conn.executemany(SqlLayout.insert_sql(table), sql_write_records(table, batch))
            if metadata:
                self._put_meta(metadata)

        self._tx(work)

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        self._tx(lambda: self._put_meta(metadata))

    def finish(self) -> None:
        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            # A built store is left self-contained in rollback-journal mode (an app may
            # switch it to WAL when it opens it); a store upgraded in place keeps its mode.
            self.conn.execute(f"PRAGMA journal_mode={self._final_journal_mode()}")
            self.conn.execute("PRAGMA synchronous=FULL")
        except self.apsw.Error as exc:
            raise DestinationError(f"{self.path}: finishing failed ({_msg(exc)})") from exc

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            if self.was_wal is False:
                # Abandoned without finish() (a failed upgrade): the file is put back in the
                # rollback-journal mode it was found in, not left in WAL for good.
                with contextlib.suppress(self.apsw.Error):
                    conn.execute("PRAGMA journal_mode=DELETE")
            conn.close()
            self.conn = None

    # In-place methods (schema upgrades): everything runs on this one connection, so
    # a revision's reads see its own uncommitted writes inside transaction().

    def read_batches(self, table, after=None, *, max_records=10_000, max_bytes=8 << 20):  # type: ignore[override]
        try:
            yield from select_batches(self.conn, table, after, max_records, max_bytes)
        except self.apsw.Error as exc:
            raise DestinationError(
                f"{self.path}: reading table {table.name!r} failed ({_msg(exc)})"
            ) from exc

    def drop_table(self, name: str) -> None:
        self._tx(lambda: self.conn.execute(f"DROP TABLE IF EXISTS {quote(name)}"))

    def rename_table(self, old: str, new: str) -> None:
        self._tx(lambda: self.conn.execute(f"ALTER TABLE {quote(old)} RENAME TO {quote(new)}"))

    def execute_sql(self, sql: str) -> None:
        """Run SQL text (``op.execute``) inside the current transaction."""
        self._tx(lambda: self.conn.execute(sql))

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE … COMMIT: the write lock up front, so a busy store fails fast.

        Inner ``with self.conn`` blocks become savepoints (apsw), so the whole block
        is one commit, DDL included; an exception rolls everything back.
        """
        self.in_place = True
        try:
            # An in-place upgrade writes the user's own file: full sync, not the
            # relaxed setting used while a private .partial is built.
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.execute("BEGIN IMMEDIATE")
        except self.apsw.BusyError as exc:
            raise self._busy() from exc
        except self.apsw.Error as exc:
            raise DestinationError(f"{self.path}: cannot start a write ({_msg(exc)})") from exc
        try:
            yield
        except BaseException:
            if not self.conn.get_autocommit():
                self.conn.execute("ROLLBACK")
            raise
        else:
            try:
                self.conn.execute("COMMIT")
            except self.apsw.Error as exc:
                if not self.conn.get_autocommit():
                    with contextlib.suppress(self.apsw.Error):
                        self.conn.execute("ROLLBACK")
                if isinstance(exc, self.apsw.BusyError):
                    raise self._busy() from exc
                raise DestinationError(
                    f"{self.path}: the commit failed, nothing of it was kept ({_msg(exc)})",
                    hint="free some space, then run the same command",
                ) from exc

    def backup(self, path: Path) -> None:
        """A copy through SQLite's online backup API."""
        try:
            dest = self.apsw.Connection(str(path))
            try:
                with dest.backup("main", self.conn, "main") as b:
                    while not b.done:
                        b.step(-1)
            finally:
                dest.close()
        except self.apsw.Error as exc:
            raise DestinationError(f"{path}: backup failed ({_msg(exc)})") from exc


class SqliteEngine(Engine):
    """SQLite through apsw."""

    name = "sqlite"
    extra = "sqlite"
    driver_module = "apsw"
    description = "SQLite (apsw): one WITHOUT ROWID table per table"
    capabilities = Capabilities(
        atomic_multi_table=True,
        read_only_open=True,
        multi_process_readers=True,
        directory=False,
        sql=True,
        in_place=True,
        transactional_ddl=True,
        rename_table=True,
    )
    sidecar_suffixes = ("-wal", "-shm", "-journal")
    suffixes = (".sqlite", ".sqlite3", ".db")
    volatile_files = ("*-shm",)  # the WAL index: every reader writes its read marks there
    detect_priority = 1  # a SQLite file is also a libSQL and a Turso file: sqlite reads any
    space_factor = 1.6
    reserved_table_names: ClassVar[Mapping[str, str]] = {
        ALEMBIC_TABLE: "reserved for the revision stamp that Alembic reads"
    }
    reserved_table_prefixes: ClassVar[Mapping[str, str]] = {"sqlite_": "reserved by SQLite"}
    table_name_folding = "in SQL, which ignores case"

    @classmethod
    def fold_table_name(cls, name: str) -> str:
        """SQLite's case folding of names (ASCII only)."""
        return fold_sql_name(name)

    @classmethod
    def detect(cls, path: Path) -> bool:
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            return f.read(16) == SQLITE_MAGIC

    @classmethod
    def open_reader(cls, path: Path, options: Mapping[str, Any] | None = None) -> Reader:
        opts = check_options(cls, options, {"skip_foreign_tables"})
        if path.is_dir():
            raise SourceError(f"{path}: is a directory, not a SQLite file")
        with open(path, "rb") as f:  # a clear error before apsw's generic one
            head = f.read(16)
        if head != SQLITE_MAGIC:
            raise SourceError(f"{path}: not a SQLite database (no SQLite header)")
        check_file_size(path)
        return SqliteReader(cls, path, opts)

    @classmethod
    def create_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        check_options(cls, options, set())
        return SqliteWriter(cls, path, create=True)

    @classmethod
    def open_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        check_options(cls, options, set())
        return SqliteWriter(cls, path, create=False)

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        with open(path, "rb") as f:
            head = f.read(100)
        if len(head) < 100:
            return {}
        modes = {1: "rollback journal", 2: "WAL"}
        wal = head[18] == 2
        holder = fcntl_holder(path) or (fcntl_holder(Path(str(path) + "-shm")) if wal else None)
        return {
            "page_size": int.from_bytes(head[16:18], "big") or 65536,
            "journal": modes.get(head[18], f"unknown ({head[18]})"),
            # In WAL mode a reader sees one consistent snapshot while the app writes.
            "wal_readable_while_written": wal,
            "writer_pid": holder,
        }
