"""The SQLite engine's declared facts, options and hooks (the SQL file engines' base: :mod:`.._sql`)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .._sql import (
    LOCK_PROBES,
    SqlFileEngine,
    SqlFileOptions,
)
from .._sql_layout import RawSqlRead
from ..base import AppHolder, NativeCopy, Reader, StoreFacts, Writer
from ..errors import DriverErrors, Meaning, Rule
from ..options import layout_option
from .reader import SqliteReader, raw_read
from .writer import SqliteWriter

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


@dataclass(frozen=True)
class SqliteOptions(SqlFileOptions):
    """SQLite's options: those of every SQLite file, and an app's own layout."""

    layout: str | None = layout_option("in SQLite")


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
    facts = StoreFacts(
        errors=APSW_ERRORS, locks=LOCK_PROBES, busy_hint="stop the app, then run the same command"
    )
    layout_family = "sql"

    @classmethod
    def _reader(cls, path: Path, opts: SqlFileOptions) -> Reader:
        return SqliteReader(cls, path, opts)

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
