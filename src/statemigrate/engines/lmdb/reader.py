"""Reading an LMDB environment: one read transaction over the whole read.

Reading never creates a file and never writes ``data.mdb``. When no process has the
environment open (no holder of LMDB's shared lock on ``lock.mdb``), it is opened with
``lock=False``, so even ``lock.mdb`` is left alone; a writer that starts during the
read is caught because the last committed transaction id moves (checked after every
batch, before the batch is used: pages our snapshot reads can only be reused after such
a commit). When the app has the environment open, the reader registers in LMDB's
reader table like any reader (that is LMDB's protocol, and it writes ``lock.mdb``) so
that the app's writer never reuses pages of our snapshot.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, ClassVar

from ...errors import DestinationError, StoreBusyError
from ...fsutil import crash_point
from ...locks import busy_message, lock_holder
from ...model import METADATA_TABLE, Batch, TableInfo
from ..base import Reader, recorded_tables
from .databases import cursor_batches, database_codecs, flagged_tables, table_dbs
from .file import check_data_file, count_dbs, data_file, keep_map_size, open_ro, walked_digests
from .lockfile import probes

if TYPE_CHECKING:
    from .engine import LmdbEngine

_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


class LmdbReader(Reader):
    """One read transaction over the whole read; see the module notes on locking."""

    raw: ClassVar[bool] = False  # the layouts' raw reader: the unnamed database's records too

    def __init__(self, engine: type[LmdbEngine], path: Path):
        self.lmdb = lmdb = engine.require_driver()
        self.path = path
        self.single = not path.is_dir()  # a single-file environment (MDB_NOSUBDIR)
        self.facts = engine.store_facts(path)  # a single file's lock file is PATH-lock
        self.data = data_file(path)
        self.open_probes = probes(path, single=self.single)[1]
        self.locked = lock_holder(path, self.open_probes) is not None
        check_data_file(self.data, path if self.single else None)
        with self.opening(failed="{path}: not a readable LMDB store ({text})"):
            n = count_dbs(path, lmdb, self.locked, subdir=not self.single)
            self.env = open_ro(path, lmdb, self.locked, n + 1, subdir=not self.single)
            self.txn = self.env.begin(buffers=False)
            self.snapshot_id = int(self.txn.id())
            self.txnid = self._last_txnid()
            self.dbs = table_dbs(self.env, self.txn, lmdb, path, raw=self.raw)
            self.codecs = database_codecs(self.env, self.txn, self.dbs, path)
            self.snapshot_metadata = self._read_meta()
        tables = recorded_tables(self.snapshot_metadata, self.dbs)
        self.snapshot_tables = flagged_tables(tables, self.codecs, self.snapshot_metadata)

    def _last_txnid(self) -> int:
        return int(self.env.info()["last_txnid"])

    def _read_meta(self) -> dict[str, bytes]:
        db = self.dbs.get(METADATA_TABLE)
        if db is None:
            return {}
        return {k.decode("utf-8"): v for k, v in self.txn.cursor(db)}

    def _check_unchanged(self) -> None:
        """Without LMDB's lock, refuse a read a writer may have changed under us.

        Pages our snapshot reads can only be reused after a commit, which moves the
        last transaction id: checked after each batch is taken, before it is used.
        """
        if not self.locked and self._last_txnid() != self.txnid:
            pid = lock_holder(self.path, self.open_probes)
            raise StoreBusyError(
                busy_message(self.path, pid) + ": it wrote to the store while it was being read",
                hint="stop the app (or let it finish) and run again",
            )

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        cur = self.txn.cursor(self.dbs[table.name])
        codec = self.codecs.get(table.name)
        check = self._check_unchanged
        return cursor_batches(cur, table, after, max_records, max_bytes, check, codec)

    def native_digests(self, tables: list[TableInfo]) -> list[tuple[int, int, int]] | None:
        """The tables' digests from ``data.mdb``'s pages (``_native.lmdb_digests``).

        Only when no other process has the environment open: the walk reads the meta
        page of this transaction, which a writer's second commit would overwrite, and
        such a commit moves the last transaction id, checked after the walk as after
        every batch. Any store the walk does not read is read through the cursor.
        """
        if self.locked or any(t.name in self.codecs for t in tables):
            return None  # the walk reads records as stored: a flagged database's are not
        found = walked_digests(self.data, self.snapshot_id, tables)
        if found is not None:
            self._check_unchanged()
        return found

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        """The named database's entry count, exact (LMDB's stats)."""
        with contextlib.suppress(Exception):  # progress only: a failure here is no error
            return int(self.txn.stat(self.dbs[table.name])["entries"]), True
        return None

    def copy_into(self, path: Path, subdir: bool = True) -> None:
        """LMDB's compacting copy of this read's transaction into a new directory ``path``
        (a new single file, without ``subdir``).

        ``mdb_env_copyfd3`` walks the transaction's pages (free pages left out), so the
        copy is the snapshot the batches are read from; without LMDB's lock, a writer
        that committed meanwhile is refused afterwards, as after every batch. The file
        is opened here rather than by ``mdb_env_copy``, which writes with ``O_DIRECT``:
        the copy then stays in the page cache for the read back (a cold walk of its
        pages took ten times the copy), and the pipeline syncs it.
        """
        try:
            if subdir:
                path.mkdir()
            target = path / "data.mdb" if subdir else path
            fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)
        except OSError as exc:
            raise DestinationError(f"{path}: cannot create ({exc.strerror})") from exc
        try:
            crash_point("native copy")
            # Errors name the copy, and a full disk is looked for where it is written.
            failed = "{path}: copy failed ({text})"
            with self.facts.mapped(path, "copying", writing=True, source=False, failed=failed):
                self.env.copyfd(fd, compact=True, txn=self.txn)
            keep_map_size(self.data, fd)
        finally:
            os.close(fd)
        self._check_unchanged()

    def close(self) -> None:
        txn = getattr(self, "txn", None)
        if txn is not None:
            txn.abort()
            self.txn = None
        env = getattr(self, "env", None)
        if env is not None:
            env.close()
            self.env = None
