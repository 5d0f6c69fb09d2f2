"""Writing a SQLite file through apsw: large transactions, WAL with relaxed sync while the file is private."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...model import Batch, TableInfo
from .._sql import (
    SqlLayout,
    layout_tables,
    quote,
    stored_metadata,
    table_names,
    versioned_rows,
    write_metadata,
)
from ..base import Writer
from .reader import ConnectionReads

if TYPE_CHECKING:
    from .engine import SqliteEngine


class SqliteWriter(ConnectionReads, Writer):
    """Writes through large transactions; WAL with relaxed sync while the file is private."""

    def __init__(
        self, engine: type[SqliteEngine], path: Path, create: bool, metadata_table: bool = True
    ):
        apsw = engine.require_driver()
        self.apsw = apsw
        self.path = path
        self.facts = engine.facts
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
