"""libSQL through its Python driver (``libsql`` or ``libsql-experimental``), in SQLite's layout.

A libSQL file is a SQLite file: the same ``WITHOUT ROWID`` tables as the sqlite engine
(the SQL text comes from :mod:`._sql`), readable by either engine. The DB-API reader
and writer (:mod:`._dbapi`) are shared with the Turso engine.

Driver quirks handled here and there:

- every error is a ``ValueError``; :data:`~._dbapi.DBAPI_ERRORS` tells the contract's
  exit codes from the message (busy 3, source 4, destination 5);
- integers beyond 32 bits are bound as REAL, losing digits, so versions are bound as
  text and cast in SQL (``CAST(? AS INTEGER)`` is exact over the whole 64-bit range);
- ``executemany`` wants a list, and is no faster than ``execute`` per row;
- read-only is a ``file:…?mode=ro`` URI; a path that does not exist is refused before
  the driver sees it, so nothing is ever created while reading.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import Any

from ...errors import MissingDriverError
from .._dbapi import DBAPI_FACTS, DbapiSqlEngine, DbapiSqlReader, map_error
from .._sql import CAPABILITIES, ReadOnlyOpen, SqlFileOptions, SqlLayoutOptions, read_only_open
from ..base import AppHolder, Reader

__all__ = ["LibsqlEngine", "map_error"]


class LibsqlEngine(DbapiSqlEngine):
    """libSQL through ``libsql`` or ``libsql-experimental``."""

    name = "libsql"
    extra = "libsql"
    driver_module = "libsql_experimental"
    description = (
        "libSQL (libsql / libsql-experimental): SQLite's layout, one WITHOUT ROWID table per table"
    )
    capabilities = CAPABILITIES
    options = SqlLayoutOptions
    layout_family = "sql"
    suffixes = (".libsql",)
    app_holder = AppHolder(
        "try:\n"
        "    import libsql\n"
        "except ImportError:\n"
        "    import libsql_experimental as libsql\n"
        "c = libsql.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA journal_mode=WAL').fetchall()\n"
        "c.execute('SELECT count(*) FROM sqlite_schema').fetchall()\n"
        "if sys.argv[2] == 'write':\n"
        "    c.execute('BEGIN IMMEDIATE')\n",
    )
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
    def _read_connection(cls, path: Path) -> tuple[Any, ReadOnlyOpen | None, Callable[[], None]]:
        driver = cls.require_driver()
        opened = read_only_open(path)
        with DBAPI_FACTS.mapped(path, "opening", writing=False):
            conn = driver.connect(opened.uri, isolation_level=None)
            conn.execute("PRAGMA busy_timeout=3000").fetchall()
        return conn, opened, lambda: None

    @classmethod
    def _reader(cls, path: Path, opts: SqlFileOptions) -> Reader:
        conn, opened, _ = cls._read_connection(path)
        return DbapiSqlReader(cls, path, conn, opts, opened)
