"""libSQL through its Python driver (``libsql`` or ``libsql-experimental``), in SQLite's layout.

A libSQL file is a SQLite file: the same ``WITHOUT ROWID`` tables as the sqlite engine
(the SQL text comes from :class:`~statemigrate.engines.sqlite.SqlLayout`), readable by
either engine. The DB-API reader and writer here are shared with the Turso engine.

Driver quirks handled here:

- every error is a ``ValueError``; :func:`map_error` turns the message into the
  contract's exit codes (busy 3, source 4, destination 5);
- integers beyond 32 bits are bound as REAL, losing digits, so versions are bound as
  text and cast in SQL (``CAST(? AS INTEGER)`` is exact over the whole 64-bit range);
- ``executemany`` wants a list, and is no faster than ``execute`` per row;
- read-only is a ``file:…?mode=ro`` URI; a path that does not exist is refused before
  the driver sees it, so nothing is ever created while reading.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import re
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar
from urllib.parse import quote as urlquote

from ..errors import (
    DestinationError,
    MissingDriverError,
    SourceError,
    StateMigrateError,
    StoreBusyError,
)
from ..locks import busy_message, fcntl_holder
from ..model import METADATA_TABLE, Batch, Record, TableInfo
from .base import META_REVISION, Capabilities, Engine, Reader, Writer, check_options
from .sqlite import (
    ALEMBIC_TABLE,
    INTERNAL_TABLES,
    SQLITE_MAGIC,
    SqliteEngine,
    SqlLayout,
    check_file_size,
    check_internal_table,
    classify_columns,
    decode_revision_meta,
    fix_versions,
    fold_sql_name,
    quote,
    to_signed,
)

_CREATE_NAME = re.compile(
    r'\s*CREATE\s+TABLE\s+(?:IF\s+NOT\s+EXISTS\s+)?"((?:[^"]|"")*)"', re.IGNORECASE
)


def reraise_control(exc: BaseException) -> None:
    """Re-raise what is not a driver error: interrupts, exits, a generator's close.

    The drivers are Rust (pyo3): a panic inside one reaches Python as
    ``pyo3_runtime.PanicException``, a BaseException (seen on damaged files: a
    ``Utf8Error`` unwrap), so driver calls catch BaseException and keep only these.
    """
    if isinstance(exc, (KeyboardInterrupt, SystemExit, GeneratorExit)):
        raise exc


def _msg(exc: BaseException) -> str:
    return str(exc).split("\n")[0]


def map_error(exc: BaseException, path: Path, doing: str, *, source: bool) -> StateMigrateError:
    """The contract's error for a driver error, told by its message (the drivers do not type them)."""
    text = _msg(exc)
    low = text.lower()
    if "locked" in low or "busy" in low:
        return StoreBusyError(busy_message(path, fcntl_holder(path)))
    if "disk is full" in low or "no space" in low or "database full" in low:
        return DestinationError(f"{path}: disk full ({text})")
    if "constraint" in low:
        return DestinationError(f"{path}: duplicate or out-of-order key while {doing} ({text})")
    if "readonly" in low or "read-only" in low or "read only" in low:
        return DestinationError(f"{path}: not writable ({text})")
    if source:
        return SourceError(f"{path}: not a readable SQLite/libSQL database while {doing} ({text})")
    return DestinationError(f"{path}: {doing} failed ({text})")


class DbapiLayout(SqlLayout):
    """SqlLayout plus how a driver binds versions."""

    # Bind versions as text and cast in SQL (libSQL binds big integers as REAL).
    versions_as_text: ClassVar[bool] = True

    @classmethod
    def insert_sql_for(cls, table: TableInfo) -> str:
        if table.versioned and cls.versions_as_text:
            return f"INSERT INTO {quote(table.name)} (key, value, version) VALUES (?, ?, CAST(? AS INTEGER))"
        return cls.insert_sql(table)

    @classmethod
    def rows(cls, table: TableInfo, batch: Batch) -> list:
        if not table.versioned:
            return batch if isinstance(batch, list) else list(batch)
        if cls.versions_as_text:
            return [(k, v, str(to_signed(ver))) for k, v, ver in batch]
        return [(k, v, to_signed(ver)) for k, v, ver in batch]


def _table_names(conn: Any) -> list[str]:
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


def _layout_tables(
    conn: Any, names: list[str], where: object = "the store"
) -> tuple[list[TableInfo], list[str]]:
    tables, foreign = [], []
    for name in names:
        if name.lower().startswith("sqlite_"):
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


NAME_PREFIX = "sql.name:"  # + SQL table name -> the table's real name, where they differ


def _real_names(
    tables: list[TableInfo], meta: Mapping[str, bytes]
) -> tuple[list[TableInfo], dict[str, str]]:
    """Tables under their real names, and real name -> SQL table name."""
    out, sql = [], {}
    for t in tables:
        raw = meta.get(NAME_PREFIX + t.name)
        real = raw.decode("utf-8") if raw is not None else t.name
        out.append(TableInfo(real, t.kind))
        sql[real] = t.name
    return out, sql


def _hide(meta: Mapping[str, bytes]) -> dict[str, bytes]:
    return {k: v for k, v in meta.items() if not k.startswith(NAME_PREFIX)}


def _read_meta(conn: Any, names: list[str]) -> dict[str, bytes]:
    meta: dict[str, bytes] = {}
    if METADATA_TABLE in names:
        meta = {k: bytes(v) for k, v in conn.execute(SqlLayout.META_SELECT).fetchall()}
    alembic = []
    if ALEMBIC_TABLE in names:
        alembic = [
            r[0] for r in conn.execute(f"SELECT version_num FROM {ALEMBIC_TABLE}").fetchall()
        ]
    return decode_revision_meta(meta, alembic)


def page_batches(
    conn: Any,
    path: Path,
    sql_name: str,
    table: TableInfo,
    after: bytes | None,
    max_records: int,
    max_bytes: int,
    *,
    source: bool,
) -> Iterator[Batch]:
    """Batches of a table paged by key (``WHERE key > ? ORDER BY key LIMIT n``): no cursor
    stays open between batches, so other statements may run on the connection meanwhile."""
    cols = "key, value, version" if table.versioned else "key, value"
    first = f"SELECT {cols} FROM {quote(sql_name)} ORDER BY key LIMIT ?"
    rest = f"SELECT {cols} FROM {quote(sql_name)} WHERE key > ? ORDER BY key LIMIT ?"
    page = max(1, min(max_records, 10_000))
    pending: list = []
    done = False
    try:
        while True:
            batch: list = []
            size = 0
            while len(batch) < max_records and size < max_bytes:
                if not pending:
                    if done:
                        break
                    args = (page,) if after is None else (after, page)
                    pending = conn.execute(first if after is None else rest, args).fetchall()
                    pending.reverse()
                    done = len(pending) < page
                    if not pending:
                        break
                row = pending.pop()
                after = row[0]
                batch.append(row)
                size += len(row[0]) + len(row[1])
            if not batch:
                return
            yield fix_versions(batch) if table.versioned else batch
    except StateMigrateError:
        raise
    except BaseException as exc:  # a driver panic is a BaseException
        reraise_control(exc)
        raise map_error(exc, path, f"reading table {table.name!r}", source=source) from exc


class DbapiSqlReader(Reader):
    """Reads one snapshot through a DB-API driver: everything inside one read transaction.

    Records are paged by key (``WHERE key > ? ORDER BY key LIMIT n``), so no cursor
    stays open between batches.
    """

    def __init__(
        self, engine: type[DbapiSqlEngine], path: Path, conn: Any, options: Mapping[str, Any]
    ):
        self.engine = engine
        self.path = path
        self.conn = conn
        try:
            conn.execute("BEGIN")
            names = _table_names(conn)  # the first read fixes the snapshot
            tables, foreign = _layout_tables(conn, names, path)
            self._meta = _read_meta(conn, names)
            self._tables, self._sql = _real_names(tables, self._meta)
        except BaseException as exc:  # a driver panic is a BaseException
            reraise_control(exc)
            self.close()
            if isinstance(exc, StateMigrateError):
                raise
            raise map_error(exc, path, "reading the schema", source=True) from exc
        self.foreign_tables = foreign
        if foreign and not options.get("skip_foreign_tables"):
            self.close()
            listed = ", ".join(repr(n) for n in foreign)
            raise SourceError(
                f"{path}: tables not in statemigrate's layout: {listed}",
                hint="convert them yourself, or pass --skip-foreign-tables to leave them out",
            )

    def list_tables(self) -> list[TableInfo]:
        return list(self._tables)

    def metadata(self) -> dict[str, bytes]:
        return _hide(self._meta)

    def iter_records(self, table: TableInfo, after: bytes | None = None) -> Iterator[Record]:
        for batch in self.read_batches(table, after):
            yield from batch

    def read_batches(self, table, after=None, *, max_records=10_000, max_bytes=8 << 20):  # type: ignore[override]
        return page_batches(
            self.conn,
            self.path,
            self._sql.get(table.name, table.name),
            table,
            after,
            max_records,
            max_bytes,
            source=True,
        )

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            with contextlib.suppress(Exception):  # nothing left to end
                conn.execute("ROLLBACK")
            conn.close()
            self.conn = None


class DbapiSqlWriter(Writer):
    """Explicit transactions (the driver in autocommit mode), one per batch."""

    def __init__(self, engine: type[DbapiSqlEngine], path: Path, conn: Any):
        self.engine = engine
        self.path = path
        self.conn = conn
        self.layout = engine.layout
        self._in_tx = False
        self.in_place = False  # set by transaction(): only in-place upgrades use it
        self.was_wal = False  # the file's journal mode when opened, for an upgrade to keep
        try:
            mode = conn.execute("PRAGMA journal_mode").fetchall()
            self.was_wal = bool(mode) and str(mode[0][0]).lower() == "wal"
            for pragma in engine.writer_pragmas:
                conn.execute(pragma).fetchall()
            conn.execute(SqlLayout.META_CREATE)
        except BaseException as exc:  # a driver panic is a BaseException
            reraise_control(exc)
            self.close()
            raise map_error(exc, path, "opening for writing", source=False) from exc

    def _tx(self, work: Callable[[], None], doing: str) -> None:
        if self._in_tx:  # inside transaction(): join it; its end commits or rolls back
            try:
                work()
            except StateMigrateError:
                raise
            except BaseException as exc:  # a driver panic is a BaseException
                reraise_control(exc)
                raise map_error(exc, self.path, doing, source=False) from exc
            return
        try:
            self.conn.execute("BEGIN")
            work()
            self.conn.execute("COMMIT")
        except BaseException as exc:  # a driver panic is a BaseException
            reraise_control(exc)
            with contextlib.suppress(Exception):  # nothing left to end
                self.conn.execute("ROLLBACK")
            if isinstance(exc, StateMigrateError):
                raise
            raise map_error(exc, self.path, doing, source=False) from exc

    def _all_meta(self) -> dict[str, bytes]:
        return {k: bytes(v) for k, v in self.conn.execute(SqlLayout.META_SELECT).fetchall()}

    def list_tables(self) -> list[TableInfo]:
        return _real_names(_layout_tables(self.conn, _table_names(self.conn))[0], self._all_meta())[
            0
        ]

    def metadata(self) -> dict[str, bytes]:
        return _hide(self._all_meta())

    def _sql_table(self, table: TableInfo) -> TableInfo:
        return TableInfo(self.engine.sql_name(table.name), table.kind)

    def create_table(self, table: TableInfo) -> None:
        sql_table = self._sql_table(table)

        def work() -> None:
            self.conn.execute(self.layout.create_table_sql(sql_table))
            if sql_table.name != table.name:
                self.conn.execute(
                    SqlLayout.META_PUT, (NAME_PREFIX + sql_table.name, table.name.encode("utf-8"))
                )

        self._tx(work, f"creating table {table.name!r}")

    def _put_meta(self, metadata: Mapping[str, bytes | None]) -> None:
        for key, value in metadata.items():
            if value is None:
                self.conn.execute(SqlLayout.META_DELETE, (key,))
            else:
                self.conn.execute(SqlLayout.META_PUT, (key, value))
            if key == META_REVISION:
                revisions = json.loads(value) if value is not None else []
                self.conn.execute(SqlLayout.ALEMBIC_CREATE)
                self.conn.execute(f"DELETE FROM {ALEMBIC_TABLE}")
                for rev in revisions:
                    self.conn.execute(
                        f"INSERT INTO {ALEMBIC_TABLE} (version_num) VALUES (?)", (rev,)
                    )

    def write_batch(self, table: TableInfo, batch: Batch, metadata=None) -> None:  # type: ignore[override]
        rows = self.layout.rows(table, batch)
        sql = self.layout.insert_sql_for(self._sql_table(table))

        def work() -> None:
            if rows:
                self.conn.executemany(sql, rows)
            if metadata:
                self._put_meta(metadata)

        self._tx(work, f"writing table {table.name!r}")

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        self._tx(lambda: self._put_meta(metadata), "writing metadata")

    # In-place methods (schema upgrades): everything runs on this one connection, so
    # reads inside transaction() see the transaction's own writes.

    def read_batches(self, table, after=None, *, max_records=10_000, max_bytes=8 << 20):  # type: ignore[override]
        return page_batches(
            self.conn,
            self.path,
            self.engine.sql_name(table.name),
            table,
            after,
            max_records,
            max_bytes,
            source=False,
        )

    def drop_table(self, name: str) -> None:
        sql_name = self.engine.sql_name(name)

        def work() -> None:
            self.conn.execute(f"DROP TABLE IF EXISTS {quote(sql_name)}")
            self.conn.execute(SqlLayout.META_DELETE, (NAME_PREFIX + sql_name,))

        self._tx(work, f"dropping table {name!r}")

    def rename_table(self, old: str, new: str) -> None:
        old_sql, new_sql = self.engine.sql_name(old), self.engine.sql_name(new)

        def work() -> None:
            self.conn.execute(f"ALTER TABLE {quote(old_sql)} RENAME TO {quote(new_sql)}")
            self.conn.execute(SqlLayout.META_DELETE, (NAME_PREFIX + old_sql,))
            if new_sql != new:
                self.conn.execute(SqlLayout.META_PUT, (NAME_PREFIX + new_sql, new.encode("utf-8")))

        self._tx(work, f"renaming table {old!r}")

    def execute_sql(self, sql: str) -> None:
        """Run SQL text (``op.execute``) inside the current transaction."""
        self._tx(lambda: self.conn.execute(sql).fetchall(), "running SQL")

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """BEGIN IMMEDIATE … COMMIT around the block: DDL, records and metadata in one commit."""
        self.in_place = True
        try:
            self.conn.execute("PRAGMA synchronous=FULL").fetchall()  # the user's own file now
            self.conn.execute("BEGIN IMMEDIATE")
        except BaseException as exc:  # a driver panic is a BaseException
            reraise_control(exc)
            raise map_error(exc, self.path, "starting a transaction", source=False) from exc
        self._in_tx = True
        try:
            yield
        except BaseException:
            self._in_tx = False
            with contextlib.suppress(Exception):  # nothing left to end
                self.conn.execute("ROLLBACK")
            raise
        self._in_tx = False
        try:
            self.conn.execute("COMMIT")
        except BaseException as exc:  # a driver panic is a BaseException
            reraise_control(exc)
            with contextlib.suppress(Exception):  # nothing left to end
                self.conn.execute("ROLLBACK")
            raise map_error(exc, self.path, "committing", source=False) from exc

    def sync(self) -> None:
        """Commits so far on disk: a checkpoint syncs what synchronous=OFF left unsynced.

        Inside :meth:`transaction` nothing is committed yet (it commits with synchronous=FULL).
        """
        if self._in_tx:
            return
        try:
            self.conn.execute("PRAGMA wal_checkpoint(FULL)").fetchall()
        except BaseException as exc:  # a driver panic is a BaseException
            reraise_control(exc)
            raise map_error(exc, self.path, "syncing", source=False) from exc

    def backup(self, path: Path) -> None:
        """A copy of the file after a checkpoint, so that no committed page is left in the WAL."""
        import shutil

        try:
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
            shutil.copy2(self.path, path)
            wal = Path(str(self.path) + "-wal")
            if wal.exists() and wal.stat().st_size > 0:  # a checkpoint a reader kept from finishing
                shutil.copy2(wal, Path(str(path) + "-wal"))
        except OSError as exc:
            raise DestinationError(f"{path}: cannot write the backup ({exc.strerror})") from exc
        except BaseException as exc:  # a driver panic is a BaseException
            reraise_control(exc)
            raise map_error(exc, self.path, "backing up", source=False) from exc

    def _leaves_wal(self, pragma: str) -> str:
        """A store upgraded in place keeps the journal mode it had (WAL stays WAL)."""
        if self.in_place and self.was_wal and "journal_mode" in pragma.lower():
            return "PRAGMA journal_mode=WAL"
        return pragma

    def finish(self) -> None:
        try:
            for pragma in self.engine.finish_pragmas:
                self.conn.execute(self._leaves_wal(pragma)).fetchall()
        except BaseException as exc:  # a driver panic is a BaseException
            reraise_control(exc)
            raise map_error(exc, self.path, "finishing", source=False) from exc

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            if self.in_place and not self.was_wal:
                # A failed upgrade puts the file back in the rollback-journal mode it was
                # found in (after finish() this changes nothing).
                with contextlib.suppress(Exception):
                    conn.execute("PRAGMA journal_mode=DELETE").fetchall()
            conn.close()
            self.conn = None


class DbapiSqlEngine(Engine):
    """Shared parts of the engines that speak SQLite's SQL through a DB-API driver."""

    layout: ClassVar[type[DbapiLayout]] = DbapiLayout
    reserved_table_names: ClassVar[Mapping[str, str]] = SqliteEngine.reserved_table_names
    reserved_table_prefixes: ClassVar[Mapping[str, str]] = SqliteEngine.reserved_table_prefixes
    table_name_folding: ClassVar[str] = SqliteEngine.table_name_folding
    writer_pragmas: ClassVar[tuple[str, ...]] = ()
    finish_pragmas: ClassVar[tuple[str, ...]] = ()
    sidecar_suffixes: ClassVar[tuple[str, ...]] = ("-wal", "-shm", "-journal")
    volatile_files: ClassVar[tuple[str, ...]] = ("*-shm",)  # the WAL index (read marks)

    @classmethod
    def detect(cls, path: Path) -> bool:
        # A SQLite file; auto-detection prefers the sqlite engine for it.
        return SqliteEngine.detect(path)

    @classmethod
    def sql_name(cls, name: str) -> str:
        """The SQL table that holds table ``name`` (the name itself for libSQL)."""
        return name

    @classmethod
    def fold_table_name(cls, name: str) -> str:
        """SQLite's case folding of the SQL table that holds the table."""
        return fold_sql_name(cls.sql_name(name))

    @classmethod
    def _check_source(cls, path: Path) -> None:
        if not path.exists():
            raise SourceError(f"{path}: no such file")
        if path.is_dir():
            raise SourceError(f"{path}: is a directory, not a SQLite file")
        with open(path, "rb") as f:
            if f.read(16) != SQLITE_MAGIC:
                raise SourceError(f"{path}: not a SQLite database (no SQLite header)")
        check_file_size(path)

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        info = SqliteEngine.format_info(path)
        info["written_by"] = "cannot be told: a libSQL or Turso file is a SQLite file"
        return info


class LibsqlEngine(DbapiSqlEngine):
    """libSQL through ``libsql`` or ``libsql-experimental``."""

    name = "libsql"
    extra = "libsql"
    driver_module = "libsql_experimental"
    description = (
        "libSQL (libsql / libsql-experimental): SQLite's layout, one WITHOUT ROWID table per table"
    )
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
    suffixes = (".libsql",)
    space_factor = 1.6
    # WAL keeps each committed batch whole across a kill of this process; finish()
    # checkpoints and leaves a self-contained file in rollback-journal mode.
    writer_pragmas = (
        "PRAGMA journal_mode=WAL",
        "PRAGMA synchronous=OFF",
        "PRAGMA busy_timeout=2000",
        "PRAGMA cache_size=-65536",
        "PRAGMA wal_autocheckpoint=10000",
    )
    finish_pragmas = (
        "PRAGMA wal_checkpoint(TRUNCATE)",
        "PRAGMA journal_mode=DELETE",
        "PRAGMA synchronous=FULL",
    )

    @classmethod
    def require_driver(cls) -> Any:
        """The newer ``libsql`` package when installed, else ``libsql_experimental`` (same API)."""
        for module in ("libsql", "libsql_experimental"):
            try:
                driver = importlib.import_module(module)
            except ImportError:
                continue
            if hasattr(driver, "connect"):  # not a directory that happens to be called libsql
                return driver
        raise MissingDriverError(cls.name, cls.extra)

    @classmethod
    def open_reader(cls, path: Path, options: Mapping[str, Any] | None = None) -> Reader:
        opts = check_options(cls, options, {"skip_foreign_tables"})
        cls._check_source(path)
        driver = cls.require_driver()
        uri = "file:" + urlquote(str(path.absolute())) + "?mode=ro"
        try:
            conn = driver.connect(uri, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=3000").fetchall()
        except BaseException as exc:  # a driver panic is a BaseException
            reraise_control(exc)
            raise map_error(exc, path, "opening", source=True) from exc
        return DbapiSqlReader(cls, path, conn, opts)

    @classmethod
    def _writer(cls, path: Path, create: bool) -> Writer:
        if create and (path.exists() or path.is_symlink()):
            raise DestinationError(f"{path}: already exists")
        if not create:
            if not path.is_file():
                raise DestinationError(f"{path}: no such file")
            pid = fcntl_holder(path)
            if pid is not None:
                raise StoreBusyError(busy_message(path, pid))
        driver = cls.require_driver()
        try:
            conn = driver.connect(str(path), isolation_level=None)
        except BaseException as exc:  # a driver panic is a BaseException
            reraise_control(exc)
            raise map_error(exc, path, "opening for writing", source=False) from exc
        return DbapiSqlWriter(cls, path, conn)

    @classmethod
    def create_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        check_options(cls, options, set())
        return cls._writer(path, create=True)

    @classmethod
    def open_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        check_options(cls, options, set())
        return cls._writer(path, create=False)
