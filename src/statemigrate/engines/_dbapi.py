"""SQLite's layout through a DB-API driver: the reader, writer and engine base of libSQL and Turso.

Driver quirks handled here:

- the drivers do not type their errors (libSQL raises ``ValueError`` for all of them):
  :data:`DBAPI_ERRORS` tells busy, full, duplicate keys and read-only files by their
  message;
- no cursor stays open between batches: records are paged by key
  (``WHERE key > ? ORDER BY key LIMIT n``), so other statements may run on the
  connection meanwhile;
- how versions are bound is the layout's (:class:`DbapiLayout`).
"""

from __future__ import annotations

import contextlib
import itertools
import shutil
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..errors import DestinationError, StateMigrateError
from ..fsutil import copy_file_written_back
from ..model import BATCH_RECORDS, Batch, TableInfo
from ._sql import (
    LOCK_PROBES,
    ReadOnlyOpen,
    SqlFileEngine,
    SqlFileOptions,
    SqlLayout,
    layout_columns,
    layout_tables,
    outside_model,
    quote,
    read_snapshot,
    stored_metadata,
    table_names,
    to_signed,
    write_metadata,
)
from ._sql_layout import RawSqlRead
from .base import Reader, StoreFacts, Writer, take_batches
from .errors import DriverErrors, Meaning, Rule

NAME_PREFIX = "sql.name:"  # + SQL table name -> the table's real name, where they differ

DBAPI_ERRORS = DriverErrors(
    rules=(
        Rule(Meaning.BUSY, words=("locked", "busy")),
        # pyturso says "StorageFull" (its I/O error's name).
        Rule(Meaning.FULL, words=("disk is full", "no space", "database full", "storagefull")),
        Rule(
            Meaning.CONFLICT,
            words=("constraint",),
            message="{path}: duplicate or out-of-order key while {doing} ({text})",
        ),
        Rule(Meaning.READ_ONLY, words=("readonly", "read-only", "read only")),
    ),
    source_failed="{path}: not a readable SQLite/libSQL database while {doing} ({text})",
)
DBAPI_FACTS = StoreFacts(errors=DBAPI_ERRORS, locks=LOCK_PROBES, private_metadata=(NAME_PREFIX,))


def map_error(exc: BaseException, path: Path, doing: str, *, source: bool) -> StateMigrateError:
    """The contract's error for a DB-API driver error (:data:`DBAPI_ERRORS`).

    Args:
        exc: the driver's error.
        path: the store.
        doing: what was being done, for the message.
        source: an error no rule explains is the source's (exit 4), else the destination's.
    """
    err = DBAPI_ERRORS.error(
        exc, path, doing, source=source, writing=not source, holder=lambda: DBAPI_FACTS.holder(path)
    )
    return err or DestinationError(f"{path}: {doing} failed ({exc})")


class DbapiLayout(SqlLayout):
    """SqlLayout plus how a driver binds versions."""

    # Bind versions as text and cast in SQL (libSQL binds big integers as REAL).
    versions_as_text: ClassVar[bool] = True

    @classmethod
    def insert_sql_for(cls, table: TableInfo) -> str:
        """``INSERT`` of one record, the version bound as the driver needs."""
        if table.versioned and cls.versions_as_text:
            return f"INSERT INTO {quote(table.name)} (key, value, version) VALUES (?, ?, CAST(? AS INTEGER))"
        return cls.insert_sql(table)

    @classmethod
    def rows(cls, table: TableInfo, batch: Batch) -> list[Any]:
        """Rows to bind for a batch."""
        if not table.versioned:
            return batch if isinstance(batch, list) else list(batch)
        if cls.versions_as_text:
            return [(k, v, str(to_signed(ver))) for k, v, ver in batch]
        return [(k, v, to_signed(ver)) for k, v, ver in batch]


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


def _pages(conn: Any, table: TableInfo, after: bytes | None, page: int) -> Iterator[list[Any]]:
    """Pages of rows of SQL table ``table`` in key order: a query per page, no cursor kept."""
    first = SqlLayout.select_sql(table, False, limit=True)
    rest = SqlLayout.select_sql(table, True, limit=True)
    while True:
        args = (page,) if after is None else (after, page)
        rows = conn.execute(first if after is None else rest, args).fetchall()
        if rows:
            yield rows
            after = rows[-1][0]
        if len(rows) < page:
            return


def page_batches(
    conn: Any,
    sql_name: str,
    table: TableInfo,
    after: bytes | None,
    max_records: int,
    max_bytes: int,
) -> Iterator[Batch]:
    """Batches of a table paged by key, taken natively (signed versions read back modulo 2^64)."""
    page = max(1, min(max_records, BATCH_RECORDS))
    rows = itertools.chain.from_iterable(_pages(conn, TableInfo(sql_name, table.kind), after, page))
    decode = "signed_version" if table.versioned else "as_is"
    yield from take_batches(rows, max_records, max_bytes, decode)


class DbapiSqlReader(Reader):
    """Reads one snapshot through a DB-API driver: everything inside one read transaction."""

    facts = DBAPI_FACTS

    def __init__(
        self,
        engine: type[DbapiSqlEngine],
        path: Path,
        conn: Any,
        opts: SqlFileOptions,
        opened: ReadOnlyOpen | None = None,
    ):
        self.engine = engine
        self.path = path
        self.conn = conn
        self.opened = opened  # how the source itself was opened (None: a private copy)
        with self.opening("reading the schema"):
            conn.execute("BEGIN")
            tables, self.foreign_tables, self.snapshot_metadata = read_snapshot(
                conn, path, opts.skip_foreign_tables
            )
            self.snapshot_tables, self._sql = _real_names(tables, self.snapshot_metadata)

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        sql_name = self._sql.get(table.name, table.name)
        return page_batches(self.conn, sql_name, table, after, max_records, max_bytes)

    def outside_model(
        self, table: TableInfo, after: bytes | None, exc: BaseException
    ) -> str | None:
        """The first record of another type than the layout's (:func:`._sql.outside_model`)."""
        sql_name = self._sql.get(table.name, table.name)
        return outside_model(self.conn, sql_name, layout_columns(table), after)

    def confirm_end(self, table: TableInfo, after: bytes | None, last: bytes | None) -> None:
        """On read-only media, the file unchanged since it was opened (:class:`ReadOnlyOpen`)."""
        if self.opened is not None:
            self.opened.confirm_unchanged(self.path)

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        """``count(*)``, exact, in the read's snapshot (for progress totals)."""
        sql_name = self._sql.get(table.name, table.name)
        with contextlib.suppress(Exception):  # progress only: a failure here is no error
            row = self.conn.execute(f"SELECT count(*) FROM {quote(sql_name)}").fetchone()
            return int(row[0]), True
        return None

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            with contextlib.suppress(Exception):  # nothing left to end
                conn.execute("ROLLBACK")
            conn.close()
            self.conn = None


class DbapiSqlWriter(Writer):
    """Explicit transactions (the driver in autocommit mode), one per batch."""

    facts = DBAPI_FACTS

    def __init__(
        self, engine: type[DbapiSqlEngine], path: Path, conn: Any, metadata_table: bool = True
    ):
        self.engine = engine
        self.path = path
        self.conn = conn
        self.layout = engine.layout
        self._in_tx = False
        self.in_place = False  # set by transaction(): only in-place upgrades use it
        self.was_wal = False  # the file's journal mode when opened, for an upgrade to keep
        with self.opening("opening for writing"):
            mode = conn.execute("PRAGMA journal_mode").fetchall()
            self.was_wal = bool(mode) and str(mode[0][0]).lower() == "wal"
            for pragma in engine.writer_pragmas:
                conn.execute(pragma).fetchall()
            if metadata_table:
                conn.execute(SqlLayout.META_CREATE)
        # What a layout's writer binds as text and casts in SQL (libSQL binds integers
        # beyond 32 bits as REAL): :mod:`._sql_layout`.
        self.ints_as_text = engine.layout.versions_as_text
        self.paged = True  # no cursor kept between batches

    def _tx(self, work: Callable[[], None], doing: str) -> None:
        """``work`` in one transaction; inside :meth:`transaction` it joins that one."""
        with self.errors(doing):
            if self._in_tx:  # its end commits or rolls back
                work()
                return
            try:
                self.conn.execute("BEGIN")
                work()
                self.conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(Exception):  # nothing left to end
                    self.conn.execute("ROLLBACK")
                raise

    def sql_tx(self, work: Callable[[], None]) -> None:
        """``work`` in one transaction (what a layout's writer is given, :mod:`._sql_layout`)."""
        self._tx(work, "writing")

    def raw_metadata(self) -> dict[str, bytes]:
        return stored_metadata(self.conn)

    def list_tables(self) -> list[TableInfo]:
        tables = layout_tables(self.conn, table_names(self.conn), "the store")[0]
        return _real_names(tables, self.raw_metadata())[0]

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

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        rows = self.layout.rows(table, batch)
        sql = self.layout.insert_sql_for(self._sql_table(table))

        def work() -> None:
            if rows:
                self.conn.executemany(sql, rows)
            if metadata:
                write_metadata(self.conn, metadata)

        self._tx(work, f"writing table {table.name!r}")

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        self._tx(lambda: write_metadata(self.conn, metadata), "writing metadata")

    # In-place methods (schema upgrades): everything runs on this one connection, so
    # reads inside transaction() see the transaction's own writes.

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        sql_name = self.engine.sql_name(table.name)
        return page_batches(self.conn, sql_name, table, after, max_records, max_bytes)

    def outside_model(
        self, table: TableInfo, after: bytes | None, exc: BaseException
    ) -> str | None:
        """The first record of another type than the layout's (:func:`._sql.outside_model`)."""
        sql_name = self.engine.sql_name(table.name)
        return outside_model(self.conn, sql_name, layout_columns(table), after)

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
        with self.errors("starting a transaction"):
            self.conn.execute("PRAGMA synchronous=FULL").fetchall()  # the user's own file now
            self.conn.execute("BEGIN IMMEDIATE")
        self._in_tx = True
        try:
            yield
        except BaseException:
            self._in_tx = False
            with contextlib.suppress(Exception):  # nothing left to end
                self.conn.execute("ROLLBACK")
            raise
        self._in_tx = False
        with self.errors("committing"):
            try:
                self.conn.execute("COMMIT")
            except BaseException:
                with contextlib.suppress(Exception):  # nothing left to end
                    self.conn.execute("ROLLBACK")
                raise

    def sync(self) -> None:
        """Commits so far on disk: a checkpoint syncs what synchronous=OFF left unsynced.

        Inside :meth:`transaction` nothing is committed yet (it commits with synchronous=FULL).
        """
        if self._in_tx:
            return
        with self.errors("syncing"):
            self.conn.execute("PRAGMA wal_checkpoint(FULL)").fetchall()

    def backup(self, path: Path) -> None:
        """A copy of the file after a checkpoint, so that no committed page is left in the WAL."""
        with self.errors("backing up"):
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchall()
        try:
            copy_file_written_back(self.path, path)
            shutil.copystat(self.path, path)
            wal = Path(str(self.path) + "-wal")
            if wal.exists() and wal.stat().st_size > 0:  # a checkpoint a reader kept from finishing
                shutil.copy2(wal, Path(str(path) + "-wal"))
        except OSError as exc:
            raise DestinationError(f"{path}: cannot write the backup ({exc.strerror})") from exc

    def _leaves_wal(self, pragma: str) -> str:
        """A store upgraded in place keeps the journal mode it had (WAL stays WAL)."""
        if self.in_place and self.was_wal and "journal_mode" in pragma.lower():
            return "PRAGMA journal_mode=WAL"
        return pragma

    def finish(self) -> None:
        with self.errors("finishing"):
            for pragma in self.engine.finish_pragmas:
                self.conn.execute(self._leaves_wal(pragma)).fetchall()

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


class DbapiSqlEngine(SqlFileEngine):
    """Shared parts of the engines that speak SQLite's SQL through a DB-API driver."""

    layout: ClassVar[type[DbapiLayout]] = DbapiLayout
    facts: ClassVar[StoreFacts] = DBAPI_FACTS
    # The drivers wait for a lock no longer than their busy timeout, then fail in the
    # middle of a write: a store an app holds is refused before it is opened for writing.
    refuses_held: ClassVar[frozenset[str]] = frozenset({"write"})
    writer_pragmas: ClassVar[tuple[str, ...]] = ()
    finish_pragmas: ClassVar[tuple[str, ...]] = ()

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        info = super().format_info(path)
        info["written_by"] = "cannot be told: a libSQL or Turso file is a SQLite file"
        return info

    @classmethod
    def _check_writable(cls, path: Path) -> None:
        """Engine-specific refusals before the driver opens ``path`` for writing."""

    @classmethod
    def _read_connection(cls, path: Path) -> tuple[Any, ReadOnlyOpen | None, Callable[[], None]]:
        """A connection that reads the store (or a private copy of it), how the store was
        opened (None: a copy), and what removes the copy after the connection is closed."""
        raise NotImplementedError

    @classmethod
    def _raw_read(cls, path: Path) -> RawSqlRead:
        """One snapshot of the store for a layout's reader (:mod:`._sql_layout`)."""
        conn, opened, cleanup = cls._read_connection(path)

        def close() -> None:
            with contextlib.suppress(Exception):  # nothing left to end
                conn.execute("ROLLBACK")
            conn.close()
            cleanup()

        try:
            with DBAPI_FACTS.mapped(path, "reading the schema", writing=False):
                conn.execute("BEGIN")
                table_names(conn)  # the first read fixes the snapshot
        except BaseException:
            close()
            raise

        def confirm() -> None:
            if opened is not None:
                opened.confirm_unchanged(path)

        return RawSqlRead(
            path, conn, DBAPI_FACTS, confirm, close, cls.layout.versions_as_text, paged=True
        )

    @classmethod
    def _raw_writer(cls, path: Path, create: bool, metadata_table: bool) -> Writer:
        """The engine's own writer for a layout's writer (:mod:`._sql_layout`)."""
        return cls._connect_writer(path, create, metadata_table)

    @classmethod
    def _writer(cls, path: Path, create: bool) -> Writer:
        return cls._connect_writer(path, create, True)

    @classmethod
    def _connect_writer(cls, path: Path, create: bool, metadata_table: bool) -> Writer:
        if create and (path.exists() or path.is_symlink()):
            raise DestinationError(f"{path}: already exists")
        if not create and not path.is_file():
            raise DestinationError(f"{path}: no such file")  # the driver would create one
        cls._check_writable(path)
        driver = cls.require_driver()
        with DBAPI_FACTS.mapped(path, "opening for writing", writing=True):
            conn = driver.connect(str(path), isolation_level=None)
        return DbapiSqlWriter(cls, path, conn, metadata_table)
