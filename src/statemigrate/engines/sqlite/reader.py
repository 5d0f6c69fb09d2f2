"""Reading a SQLite file through apsw: every query inside one read transaction."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import InterruptedByUser, StateMigrateError
from ...fsutil import crash_point
from ...model import Batch, TableInfo
from .._sql import (
    INTERNAL_TABLES,
    SqlFileOptions,
    SqlLayout,
    layout_columns,
    outside_model,
    quote,
    read_only_open,
    read_snapshot,
    table_names,
)
from .._sql_layout import RawSqlRead
from ..access import close_held
from ..base import Reader, StoreAccess, take_batches

if TYPE_CHECKING:
    from .engine import SqliteEngine

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
    with engine.facts.mapped(path, "opening", writing=False, failed=failed):
        conn = apsw.Connection(opened.uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI)
        conn.set_busy_timeout(3000)
        conn.execute("BEGIN")
        table_names(conn)  # the first read fixes the snapshot

    def close() -> None:
        conn.close()

    return RawSqlRead(path, conn, engine.facts, lambda: opened.confirm_unchanged(path), close)


class ConnectionReads(StoreAccess):
    """The reads a reader and a writer share over their apsw connection (``conn``)."""

    conn: Any

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        return select_batches(self.conn, table, after, max_records, max_bytes)

    def outside_model(
        self, table: TableInfo, after: bytes | None, exc: BaseException
    ) -> str | None:
        """The first record of another type than the layout's (:func:`._sql.outside_model`)."""
        return outside_model(self.conn, table.name, layout_columns(table), after)


class SqliteReader(ConnectionReads, Reader):
    """Reads one consistent snapshot: every query runs inside one read transaction."""

    threadsafe_reads = True

    def __init__(self, engine: type[SqliteEngine], path: Path, opts: SqlFileOptions):
        apsw = engine.require_driver()
        self.path = path
        self.facts = engine.facts
        self.opened_with = (engine, opts)
        self.opened = read_only_open(path)
        with self.errors("opening", failed="{path}: not a readable SQLite database ({text})"):
            self.conn = apsw.Connection(
                self.opened.uri, flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
            )
            self.conn.set_busy_timeout(3000)
            self.conn.execute("BEGIN")
            self.snapshot_tables, self.foreign_tables, self.snapshot_metadata = read_snapshot(
                self.conn, path, opts.skip_foreign_tables
            )

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
        engine, opts = self.opened_with
        try:
            twin = SqliteReader(engine, self.path, opts)
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
        close_held(self, "conn")
