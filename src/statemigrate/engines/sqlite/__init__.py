"""SQLite through apsw, in the default layout of DESIGN.md (SQL text in :mod:`._sql`).

One ``WITHOUT ROWID`` table per table (``key BLOB PRIMARY KEY, value BLOB`` and, when
versioned, ``version INTEGER``), metadata in ``__statemigrate__``, the schema
revision mirrored into Alembic's ``alembic_version`` table.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import InterruptedByUser, StateMigrateError
from ...fsutil import crash_point
from ...model import Batch, TableInfo
from .._sql import (
    INTERNAL_TABLES,
    LOCK_PROBES,
    SqlFileEngine,
    SqlFileOptions,
    SqlLayout,
    layout_columns,
    layout_tables,
    outside_model,
    quote,
    read_metadata,
    read_only_open,
    refuse_foreign,
    stored_metadata,
    table_names,
    versioned_rows,
    write_metadata,
)
from .._sql_layout import RawSqlRead
from ..base import AppHolder, NativeCopy, Reader, StoreFacts, Writer, take_batches
from ..errors import DriverErrors, Meaning, Rule
from ..options import option

# What apsw's errors mean; a key or value that is not a BLOB is refused while reading.
APSW_ERRORS = DriverErrors(
    rules=(
        Rule(Meaning.BUSY, types=("apsw.BusyError",)),
        # SQLite's own text for SQLITE_FULL: a backup's error carries the connection's
        # text, which is SQLITE_OK's ("not an error").
        Rule(
            Meaning.FULL,
            types=("apsw.FullError",),
            message="{path}: disk full (database or disk is full)",
        ),
        Rule(Meaning.CONFLICT, types=("apsw.ConstraintError",)),
        Rule(Meaning.IO, types=("apsw.IOError",)),
        Rule(
            Meaning.OUTSIDE_MODEL,
            types=("builtins.ValueError", "builtins.OverflowError"),
            message="{path}: table {table!r} holds a record outside the model ({text})",
        ),
    ),
    driver=("apsw.Error", "builtins.ValueError", "builtins.OverflowError"),
)
SQLITE_FACTS = StoreFacts(
    errors=APSW_ERRORS, locks=LOCK_PROBES, busy_hint="stop the app, then run the same command"
)
# Pages per step of a native copy (SQLite's backup API): 16 MiB of 4 KiB pages.
BACKUP_STEP_PAGES = 4096


def select_batches(
    conn: Any, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
) -> Iterator[Batch]:
    """Bounded batches of a table in key order, strictly after ``after``.

    Rows are taken (and signed versions read back modulo 2^64) in the native
    extension, one call per batch; a key or value that is not a BLOB raises ValueError.
    """
    cur = conn.execute(
        SqlLayout.select_sql(table, after is not None), (after,) if after is not None else ()
    )
    yield from take_batches(
        cur, max_records, max_bytes, "signed_version" if table.versioned else "as_is"
    )


def raw_read(engine: type[SqliteEngine], path: Path) -> RawSqlRead:
    """The file opened read-only, inside one read transaction (its first read done)."""
    apsw = engine.require_driver()
    opened = read_only_open(path)
    failed = "{path}: not a readable SQLite database ({text})"
    with SQLITE_FACTS.mapped(path, "opening", writing=False, failed=failed):
        conn = apsw.Connection(opened.uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        conn.set_busy_timeout(3000)
        conn.execute("BEGIN")
        table_names(conn)  # the first read fixes the snapshot

    def close() -> None:
        conn.close()

    return RawSqlRead(path, conn, SQLITE_FACTS, lambda: opened.confirm_unchanged(path), close)


class SqliteReader(Reader):
    """Reads one consistent snapshot: every query runs inside one read transaction."""

    threadsafe_reads = True
    facts = SQLITE_FACTS

    def __init__(self, engine: type[SqliteEngine], path: Path, options: Mapping[str, Any]):
        apsw = engine.require_driver()
        self.path = path
        self.opened_with = (engine, options)
        self.opened = read_only_open(path)
        with self.errors("opening", failed="{path}: not a readable SQLite database ({text})"):
            self.conn = apsw.Connection(
                self.opened.uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
            )
            self.conn.set_busy_timeout(3000)
            self.conn.execute("BEGIN")
            names = table_names(self.conn)  # the first read fixes the snapshot
            self.snapshot_tables, self.foreign_tables = layout_tables(self.conn, names, path)
            if self.foreign_tables and not options.get("skip_foreign_tables", False):
                refuse_foreign(path, self.foreign_tables)
            self.snapshot_metadata = read_metadata(self.conn, names)

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        return select_batches(self.conn, table, after, max_records, max_bytes)

    def outside_model(
        self, table: TableInfo, after: bytes | None, exc: BaseException
    ) -> str | None:
        """The first record of another type than the layout's (:func:`._sql.outside_model`)."""
        return outside_model(self.conn, table.name, layout_columns(table), after)

    def confirm_end(self, table: TableInfo, after: bytes | None, last: bytes | None) -> None:
        """On read-only media, the file unchanged since it was opened (:class:`ReadOnlyOpen`)."""
        self.opened.confirm_unchanged(self.path)

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        """``count(*)``, exact, in the read's snapshot (the primary key's b-tree)."""
        with contextlib.suppress(Exception):  # progress only: a failure here is no error
            return int(self.conn.execute(f"SELECT count(*) FROM {quote(table.name)}").get), True
        return None

    def key_length_bounds(self, table: TableInfo) -> tuple[int, int] | None:
        """``min``/``max`` of ``length(key)`` in the read's snapshot (one scan in SQLite).

        None for an empty table and when a key is not a BLOB (``length`` would count characters): the batches
        then report it as they read it.
        """
        sql = (
            "SELECT min(length(key)), max(length(key)), "
            f"count(*), count(*) FILTER (WHERE typeof(key) != 'blob') FROM {quote(table.name)}"
        )
        with self.errors(where=f"{self.path} table {table.name!r}"):
            shortest, longest, count, others = self.conn.execute(sql).get
        if others or not count:
            return None
        return (shortest, longest)

    def holds_only_layout(self) -> bool:
        """Whether the file holds nothing but the layout's tables, the metadata and the stamp.

        A foreign table, a view, a trigger, an index of the app's own or SQLite's
        ``sqlite_sequence``/``sqlite_stat1`` would reach a page-by-page copy but not a
        convert's batches; the automatic indexes of primary keys are part of the layout.
        """
        ours = {t.name for t in self.snapshot_tables} | INTERNAL_TABLES
        for kind, name, table in self.conn.execute(
            "SELECT type, name, tbl_name FROM sqlite_schema"
        ).fetchall():
            if kind == "table" and name in ours:
                continue
            if kind == "index" and name.startswith("sqlite_autoindex_") and table in ours:
                continue
            return False
        return True

    def twin(self) -> SqliteReader | None:
        """A second read of this reader's snapshot, on a connection of its own; or None.

        In a rollback-journal mode this reader's open read transaction holds SQLite's
        SHARED lock, which no commit gets past (a writer needs the EXCLUSIVE lock): a
        second connection that starts reading meanwhile reads the same database. In WAL
        mode a commit can land between the two starts, so there is none; nor when the
        second read cannot start at once or finds other tables or metadata.
        """
        if self.opened.state is not None:
            return None  # an immutable read (a WAL-mode file no one has open) holds no lock
        mode = self.conn.execute("PRAGMA journal_mode").fetchall()[0][0]
        if str(mode).lower() == "wal":
            return None
        engine, options = self.opened_with
        try:
            twin = SqliteReader(engine, self.path, options)
        except StateMigrateError:  # busy, or unreadable now: the reader digests it
            return None
        if (twin.snapshot_tables, twin.snapshot_metadata) != (
            self.snapshot_tables,
            self.snapshot_metadata,
        ):
            twin.close()
            return None
        return twin

    def copy_into(self, path: Path, stop: Callable[[], bool] | None = None) -> None:
        """SQLite's online backup of this read's snapshot into a new file at ``path``.

        The pages come from this connection inside its read transaction, so the copy
        is the snapshot the batches are read from. The copy is left in rollback-journal
        mode, as a built store is; a kill mid-copy leaves a file whose hot journal
        rolls it back to empty. ``stop``, when given, is asked after each step of
        ``BACKUP_STEP_PAGES`` pages: true ends the copy there (InterruptedByUser), the
        file left unfinished.
        """
        import apsw  # the driver this reader was opened with (imported lazily)

        # Errors name the copy, and a full disk is looked for where it is written.
        failed = "{path}: copy failed ({text})"
        with self.facts.mapped(path, "copying", writing=True, source=False, failed=failed):
            flags = apsw.SQLITE_OPEN_READWRITE | apsw.SQLITE_OPEN_CREATE
            dest = apsw.Connection(str(path), flags=flags)
            stopped = False
            try:
                with dest.backup("main", self.conn, "main") as backup:
                    while not backup.done and not stopped:
                        backup.step(BACKUP_STEP_PAGES)
                        crash_point("native copy")
                        stopped = stop is not None and stop()
                if not stopped:
                    dest.execute("PRAGMA journal_mode=DELETE")
            finally:
                dest.close()
        if stopped:
            raise InterruptedByUser(f"{path}: the copy was stopped")

    def close(self) -> None:
        conn = getattr(self, "conn", None)
        if conn is not None:
            conn.close()
            self.conn = None


class SqliteWriter(Writer):
    """Writes through large transactions; WAL with relaxed sync while the file is private."""

    facts = SQLITE_FACTS

    def __init__(
        self, engine: type[SqliteEngine], path: Path, create: bool, metadata_table: bool = True
    ):
        apsw = engine.require_driver()
        self.apsw = apsw
        self.path = path
        flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
        self.in_place = False  # set by transaction(): only in-place upgrades use it
        self.was_wal: bool | None = None  # an existing file's journal mode, to leave it so
        opening = {"failed": "{path}: cannot open for writing ({text})", "source": not create}
        with self.errors("opening for writing", **opening):
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
            if metadata_table:
                self.conn.execute(SqlLayout.META_CREATE)

    def _final_journal_mode(self) -> str:
        """The mode to leave: an in-place upgrade leaves the mode it found, a built store DELETE."""
        return "WAL" if self.in_place and self.was_wal else "DELETE"

    def _tx(self, fn: Any) -> None:
        with self.errors("writing", failed="{path}: write failed ({text})"), self.conn:
            fn()  # one transaction (a savepoint inside transaction()); rolled back on error

    def sql_tx(self, work: Callable[[], None]) -> None:
        """``work`` in one transaction (what a layout's writer is given, :mod:`.._sql_layout`)."""
        self._tx(work)

    def list_tables(self) -> list[TableInfo]:
        return layout_tables(self.conn, table_names(self.conn))[0]

    def raw_metadata(self) -> dict[str, bytes]:
        return stored_metadata(self.conn)

    def create_table(self, table: TableInfo) -> None:
        self._tx(lambda: self.conn.execute(SqlLayout.create_table_sql(table)))

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        def work() -> None:
            self.conn.executemany(SqlLayout.insert_sql(table), versioned_rows(table, batch))
            if metadata:
                write_metadata(self.conn, metadata)

        self._tx(work)

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        self._tx(lambda: write_metadata(self.conn, metadata))

    def finish(self) -> None:
        with self.errors("finishing", failed="{path}: finishing failed ({text})"):
            self.conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
            # A built store is left self-contained in rollback-journal mode (an app may
            # switch it to WAL when it opens it); a store upgraded in place keeps its mode.
            self.conn.execute(f"PRAGMA journal_mode={self._final_journal_mode()}")
            self.conn.execute("PRAGMA synchronous=FULL")

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

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        return select_batches(self.conn, table, after, max_records, max_bytes)

    def outside_model(
        self, table: TableInfo, after: bytes | None, exc: BaseException
    ) -> str | None:
        """The first record of another type than the layout's (:func:`._sql.outside_model`)."""
        return outside_model(self.conn, table.name, layout_columns(table), after)

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
        with self.errors("starting a write", failed="{path}: cannot start a write ({text})"):
            # An in-place upgrade writes the user's own file: full sync, not the
            # relaxed setting used while a private .partial is built.
            self.conn.execute("PRAGMA synchronous=FULL")
            self.conn.execute("BEGIN IMMEDIATE")
        try:
            yield
        except BaseException:
            if not self.conn.get_autocommit():
                self.conn.execute("ROLLBACK")
            raise
        committing = {
            "failed": "{path}: the commit failed, nothing of it was kept ({text})",
            "hint": "free some space, then run the same command",
        }
        with self.errors("committing", **committing):
            try:
                self.conn.execute("COMMIT")
            except self.apsw.Error:
                if not self.conn.get_autocommit():
                    with contextlib.suppress(self.apsw.Error):
                        self.conn.execute("ROLLBACK")
                raise

    def backup(self, path: Path) -> None:
        """A copy through SQLite's online backup API."""
        with self.errors("backing up", failed="{where}: backup failed ({text})", where=path):
            dest = self.apsw.Connection(str(path))
            try:
                with dest.backup("main", self.conn, "main") as b:
                    while not b.done:
                        b.step(-1)
            finally:
                dest.close()


@dataclass(frozen=True)
class SqliteOptions(SqlFileOptions):
    """SQLite's options: those of every SQLite file, and an app's own layout."""

    layout: str | None = option(
        None,
        "a layout file (TOML) saying how the app lays its state out in SQLite "
        "(README: Your app's own layout)",
        expects="the path of a layout file",
    )


class SqliteEngine(SqlFileEngine):
    """SQLite through apsw."""

    name = "sqlite"
    extra = "sqlite"
    driver_module = "apsw"
    description = "SQLite (apsw): one WITHOUT ROWID table per table"
    suffixes = (".sqlite", ".sqlite3", ".db")
    # A connection in WAL mode (the app switches the file to WAL, as apps do), one read
    # done, no transaction open: its shared lock on -shm shows it.
    app_holder = AppHolder(
        "import apsw\n"
        "c = apsw.Connection(sys.argv[1])\n"
        "c.execute('PRAGMA journal_mode=WAL').fetchall()\n"
        "c.execute('SELECT count(*) FROM sqlite_schema').fetchall()\n"
        "if sys.argv[2] == 'write':\n"
        "    c.execute('BEGIN IMMEDIATE')\n"
    )
    detect_priority = 1  # a SQLite file is also a libSQL and a Turso file: sqlite reads any
    options = SqliteOptions
    layout_family = "sql"

    @classmethod
    def _reader(cls, path: Path, options: Mapping[str, Any]) -> Reader:
        return SqliteReader(cls, path, options)

    @classmethod
    def _raw_read(cls, path: Path) -> RawSqlRead:
        """A read of one snapshot of the file, for a layout's reader (:mod:`.._sql_layout`)."""
        return raw_read(cls, path)

    @classmethod
    def guess_layout(cls, path: Path) -> str:
        """A layout file guessed from an existing file (``statemigrate layout init``)."""
        from .._sql_layout import guess_sql_layout

        cls.check_source(path)
        raw = cls._raw_read(path)
        try:
            return guess_sql_layout(raw.conn, path, cls.name)
        finally:
            raw.close()

    @classmethod
    def _raw_writer(cls, path: Path, create: bool, metadata_table: bool) -> Writer:
        """The engine's own writer, for a layout's writer (without statemigrate's
        metadata table when the layout keeps none in the store)."""
        return SqliteWriter(cls, path, create, metadata_table=metadata_table)

    @classmethod
    def _writer(cls, path: Path, create: bool) -> Writer:
        return SqliteWriter(cls, path, create)

    @classmethod
    def native_copy(
        cls, reader: Reader, options: Mapping[str, Any] | None = None
    ) -> NativeCopy | None:
        """SQLite's backup API over the reader's snapshot, when the file holds only the layout.

        Faster than ``VACUUM INTO`` here (pages copied as they are, not rebuilt), and
        it reads inside the reader's own transaction, which ``VACUUM INTO`` cannot.
        """
        if options or not isinstance(reader, SqliteReader) or not reader.holds_only_layout():
            return None
        return NativeCopy("SQLite backup", reader.copy_into, twin=reader.twin)
