"""Turso (pyturso, the Rust rewrite of SQLite) in SQLite's layout, with rowid tables.

Layout: as the sqlite engine, but each table is a rowid table with ``key BLOB PRIMARY
KEY`` (Turso's ``WITHOUT ROWID`` is experimental: it can neither update nor delete
there, and its range queries scan the whole table). The file is a SQLite file in WAL
mode; after :meth:`finish` its WAL is checkpointed and empty, and it passes
``PRAGMA integrity_check`` in the ``sqlite3`` shell.

Why the reader works on a private copy: pyturso has no read-only open (``?mode=ro``
silently creates a new file named literally ``…?mode=ro``), it creates a ``-wal`` file
beside any database it opens, and it may checkpoint a WAL into the main file when it
closes. So the reader checks that no process holds the store (Turso takes an exclusive
POSIX lock on the whole file while any connection is open: exit 3 with its pid),
copies the file and its WAL into a private directory (:mod:`.snapshot`, under
``TMPDIR``; it needs the store's size in free space there; copies, never links, as
the driver may write the file it opens), checks the source did not change during the
copy, and reads the copy. The source is never opened by the driver. The copy is first
checked with SQLite's ``integrity_check`` (the standard library's sqlite3): pyturso aborts
the whole interpreter on some damaged files.

Other quirks: Turso stores table names lower-cased (ASCII only) in ``sqlite_schema``
but keeps the ``CREATE TABLE`` text, from which the real name is read back; it folds
non-ASCII capitals when it looks a name up for an INSERT but not when it stores one, so
such a table is created with those letters lower-cased and its real name kept in the metadata table
(see :meth:`TursoEngine.sql_name`). Two names that differ only in case are one table
to SQLite and Turso alike: the second is refused (exit 5). ``executemany`` takes any iterable and is
about 3x faster than one call per row.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ...errors import DestinationError, SourceError, StoreBusyError
from ...locks import lock_holder, refuse_if_held
from .. import snapshot
from .._dbapi import DbapiLayout, DbapiSqlEngine, DbapiSqlReader
from .._sql import (
    CAPABILITIES,
    LOCK_PROBES,
    SIDE_FILES,
    ReadOnlyOpen,
    SqlFileOptions,
    SqlLayoutOptions,
    uri_path,
)
from ..base import AppHolder, Reader


class TursoLayout(DbapiLayout):
    """Rowid tables; pyturso binds 64-bit integers exactly."""

    without_rowid: ClassVar[bool] = False
    versions_as_text: ClassVar[bool] = False


def _state(paths: list[Path]) -> list[tuple[int, int]]:
    out = []
    for p in paths:
        try:
            st = p.stat()
            out.append((st.st_size, st.st_mtime_ns))
        except FileNotFoundError:
            out.append((-1, 0))
    return out


def _copy(path: Path, copy: Path) -> None:
    """Copy the file and its WAL, refusing a held store and retrying one that changed meanwhile."""
    sources = [path, Path(str(path) + "-wal")]
    for _attempt in range(3):
        refuse_if_held(path, LOCK_PROBES)
        before = _state(sources)
        shutil.copyfile(path, copy)
        wal = Path(str(copy) + "-wal")
        wal.unlink(missing_ok=True)
        if os.path.lexists(sources[1]):  # a side file: never a link followed
            snapshot.copy_file(path.parent, Path(sources[1].name), wal)
        if lock_holder(path, LOCK_PROBES) is None and _state(sources) == before:
            return
    raise StoreBusyError(f"{path}: the store kept changing while it was copied to be read")


def _check_copy(path: Path, copy: Path) -> None:
    """Refuse a damaged file before pyturso opens it: on some damaged files it panics and
    aborts the interpreter (SIGABRT), which no ``except`` catches. SQLite's own
    ``integrity_check`` (the standard library's sqlite3, on the private copy) finds them."""
    import sqlite3

    try:
        con = sqlite3.connect(f"file:{uri_path(copy)}", uri=True)
        # A damaged file's integrity report may quote bytes that are not UTF-8.
        con.text_factory = lambda raw: raw.decode("utf-8", "replace")
        try:
            rows = con.execute("PRAGMA integrity_check").fetchall()
        finally:
            con.close()
    except sqlite3.DatabaseError as exc:
        raise SourceError(f"{path}: not a readable SQLite/Turso database ({exc})") from exc
    except UnicodeDecodeError as exc:  # sqlite3 decodes SQLite's messages, which may quote damage
        raise SourceError(
            f"{path}: the database is damaged (SQLite's report holds bytes that are not UTF-8)"
        ) from exc
    if rows != [("ok",)]:
        first = " ".join(str(rows[0][0]).split())[:200] if rows else "no answer"  # one line
        raise SourceError(f"{path}: the database is damaged (integrity_check: {first})")


class TursoReader(DbapiSqlReader):
    """Reads a private copy of the store (see the module notes); removes it on close."""

    def __init__(self, engine: type[TursoEngine], path: Path, opts: SqlFileOptions):
        driver = engine.require_driver()
        self.path = path
        self.tmpdir: Path | None = None
        try:
            conn = self._open_copy(driver, path)
        except BaseException:
            self._drop_copy()
            raise
        super().__init__(engine, path, conn, opts)

    def _open_copy(self, driver: Any, path: Path) -> Any:
        try:
            self.tmpdir = snapshot.private_dir("turso")
            copy = self.tmpdir / "store.db"
            _copy(path, copy)
        except OSError as exc:
            raise SourceError(
                f"{path}: cannot make a private copy to read ({exc})",
                hint="pyturso cannot open a file read-only; point TMPDIR at a disk with room for a copy",
            ) from exc
        _check_copy(path, copy)
        with self.errors("opening"):
            return driver.connect(str(copy), isolation_level=None)

    def _drop_copy(self) -> None:
        snapshot.remove(self.tmpdir)
        self.tmpdir = None

    def close(self) -> None:
        super().close()
        self._drop_copy()


class TursoEngine(DbapiSqlEngine):
    """Turso through pyturso."""

    name = "turso"
    extra = "turso"
    driver_module = "turso"
    description = "Turso (pyturso): SQLite's layout with rowid tables (key BLOB PRIMARY KEY)"
    # No read-only open: the reader reads a private copy, never beside the app.
    capabilities = dataclasses.replace(
        CAPABILITIES, read_only_open=False, multi_process_readers=False
    )
    layout = TursoLayout
    options = SqlLayoutOptions
    layout_family = "sql"
    reserved_table_prefixes: ClassVar[Mapping[str, str]] = {
        **DbapiSqlEngine.reserved_table_prefixes,
        "__turso_internal_": "reserved by Turso",
    }
    # ASCII case as in SQLite, and other capitals as sql_name lower-cases them.
    table_name_folding: ClassVar[str] = "in Turso, which ignores the case of letters"
    space_factor = 2.0
    sidecar_suffixes = ("-wal", "-shm")
    side_files = SIDE_FILES[:2]  # no rollback journal: Turso writes in WAL mode only
    suffixes = (".turso",)
    app_holder = AppHolder(
        "import turso\n"
        "c = turso.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('SELECT count(*) FROM sqlite_schema').fetchall()\n"
        "if sys.argv[2] == 'write':\n"
        "    c.execute('BEGIN IMMEDIATE')\n",
        blocks_readers=True,
    )
    writer_pragmas = ("PRAGMA synchronous=OFF",)
    finish_pragmas = ("PRAGMA wal_checkpoint(TRUNCATE)",)

    @classmethod
    def sql_name(cls, name: str) -> str:
        """Non-ASCII letters lower-cased: Turso folds them when it looks a name up for an
        INSERT but not when it stores one, so no row could ever be inserted into a table
        spelled with a non-ASCII capital. The real name is kept in the metadata table
        (``sql.name:…``); an app using Turso uses the lower-cased spelling."""
        return "".join(c.lower() if ord(c) > 127 else c for c in name)

    @classmethod
    def _reader(cls, path: Path, opts: SqlFileOptions) -> Reader:
        return TursoReader(cls, path, opts)

    @classmethod
    def _read_connection(cls, path: Path) -> tuple[Any, ReadOnlyOpen | None, Callable[[], None]]:
        """A connection to a private copy of the store (see the module notes), and what
        removes the copy (a layout's reader, :mod:`._sql_layout`)."""
        driver = cls.require_driver()
        holder = TursoReader.__new__(TursoReader)  # its copy logic, without a table read
        holder.path, holder.tmpdir = path, None
        try:
            conn = holder._open_copy(driver, path)
        except BaseException:
            holder._drop_copy()
            raise
        return conn, None, holder._drop_copy

    @classmethod
    def _check_writable(cls, path: Path) -> None:
        if not os.access(path.parent, os.W_OK):
            raise DestinationError(f"{path.parent}: not writable")
