"""Writing an LMDB environment: one write transaction per batch, the map grown when it fills.

A second LMDB writer waits forever for the writer mutex; before an existing store is
opened for writing, the engine reads the mutex's owner from the lock file without
taking it (:mod:`.lockfile`) and refuses with exit 3 naming the pid.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar

from ...errors import DestinationError, SourceError
from ...locks import refuse_if_held
from ...model import METADATA_TABLE, Batch, TableInfo, encode_versioned
from ..base import META_KIND_PREFIX as KIND_PREFIX
from ..base import Writer, recorded_tables
from .databases import cursor_batches, database_codecs, flagged_tables, table_dbs
from .file import check_data_file, count_dbs, data_file, is_single_file
from .flags import Codec, flags_of, open_kwargs

if TYPE_CHECKING:
    from .engine import LmdbEngine

META_DB = METADATA_TABLE.encode()
MIN_MAP_SIZE = 64 << 20
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def stored_pairs(codec: Codec, batch: Batch, where: str) -> list[tuple[bytes, bytes]]:
    """The stored pairs of a batch of a flagged database's records.

    Raises:
        DestinationError: a record no such database can hold (exit 5).
    """
    try:
        return [codec.from_model(bytes(r[0]), bytes(r[1])) for r in batch]
    except ValueError as exc:
        raise DestinationError(
            f"{where}: a record does not fit the database's flags ({', '.join(codec.flags)}): {exc}"
        ) from exc


def put_flagged(cur: Any, codec: Codec, pairs: list[tuple[bytes, bytes]]) -> int:
    """Put ``pairs`` into a flagged database at ``cur``; how many were added.

    A DUPSORT database takes a key's further values (MDB_NODUPDATA refuses only a
    pair already there); any other refuses a key already there.
    """
    if codec.dupsort:
        return int(cur.putmulti(pairs, dupdata=False, overwrite=True)[1])
    return int(cur.putmulti(pairs, overwrite=False)[1])


class LmdbWriter(Writer):
    """One write transaction per batch; the map grows when it fills."""

    raw: ClassVar[bool] = False  # the layouts' raw writer: no metadata database of its own

    def __init__(
        self, engine: type[LmdbEngine], path: Path, create: bool, subdir: bool | None = None
    ):
        """``subdir``: a directory store (True) or a single file (False, ``MDB_NOSUBDIR``);
        None: a new store is a directory, an existing one as it is. An existing store of
        the other shape than ``subdir`` asks is refused."""
        self.lmdb = lmdb = engine.require_driver()
        self.path = path
        if create:
            self.single = subdir is False
            try:
                if self.single:  # LMDB takes an empty file for a new environment
                    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666))
                else:
                    path.mkdir()
            except OSError as exc:
                raise DestinationError(f"{path}: cannot create ({exc.strerror})") from exc
            self.max_dbs, self.map_size = 16, MIN_MAP_SIZE
        else:
            self.single = is_single_file(path)
            if not self.single and not (path / "data.mdb").is_file():
                raise DestinationError(
                    f"{path}: not an LMDB store (no data.mdb, nor a single-file environment)"
                )
            if subdir is not None and subdir == self.single:
                shapes = ("a single-file", "a directory")
                raise DestinationError(
                    f"{path}: {shapes[not self.single]} LMDB environment, but "
                    f"subdir = {str(subdir).lower()} asks for {shapes[self.single]} one"
                )
            try:
                check_data_file(data_file(path), path if self.single else None)
            except SourceError as exc:
                raise DestinationError(exc.message) from exc
            # A held store was refused before (LmdbEngine.refuses_held).
            with self.errors(failed="{path}: not a writable LMDB store ({text})"):
                self.max_dbs = count_dbs(path, lmdb, True, subdir=not self.single) + 16
            # Room for an upgrade's single transaction (address space only, not disk).
            self.map_size = max(1 << 30, 4 * data_file(path).stat().st_size)
        self.facts = engine.store_facts(path)  # a single file's lock file is PATH-lock
        self.env: Any = None
        self._outer: Any = None
        self.private = create
        self._open()

    def _refuse_if_open(self) -> None:
        # An upgrade's transaction may start long after the open: an app that opened
        # the environment since is refused too (see LmdbEngine.refuses_held).
        refuse_if_held(self.path, self.facts.locks, hint=self.facts.busy_hint)

    def _open(self) -> None:
        try:
            with self.errors(failed="{path}: cannot open LMDB for writing ({text})"):
                # sync off while the store is a private .partial: a killed process loses
                # nothing the OS already has, and finish() syncs before it is renamed
                # into place. An existing store (resume, upgrade) commits durably.
                self.env = self.lmdb.open(
                    str(self.path),
                    subdir=not self.single,
                    max_dbs=self.max_dbs,
                    map_size=self.map_size,
                    sync=not self.private,
                    metasync=not self.private,
                    readahead=False,
                    create=False,
                )
                with self.env.begin(write=True) as txn:
                    self.dbs = table_dbs(self.env, txn, self.lmdb, self.path, raw=self.raw)
                    self.codecs = database_codecs(self.env, txn, self.dbs, self.path)
                    if METADATA_TABLE not in self.dbs and not self.raw:
                        self.dbs[METADATA_TABLE] = self.env.open_db(META_DB, txn=txn)
        except SourceError as exc:
            raise DestinationError(exc.message) from exc

    def _reopen(self, *, max_dbs: int | None = None) -> None:
        self.env.close()
        self.max_dbs = max_dbs or self.max_dbs
        self._open()

    def _tx(self, work: Any) -> None:
        """Run ``work(txn)`` in one write transaction, growing the map when it fills.

        Inside :meth:`transaction` the work joins the open transaction instead.
        """
        failed = "{path}: write failed ({text})"
        if self._outer is not None:
            with self.errors(failed=failed, map_size=f"{self.map_size:,}"):
                work(self._outer)
            return
        while True:
            txn = self.env.begin(write=True)
            with self.errors(failed=failed):
                try:
                    work(txn)
                    txn.commit()
                    return
                except self.lmdb.MapFullError:
                    txn.abort()
                except BaseException:
                    txn.abort()
                    raise
            self.map_size *= 2
            with self.errors(failed="{path}: cannot grow the map ({text})"):
                self.env.set_mapsize(self.map_size)

    def list_tables(self) -> list[TableInfo]:
        meta = self.raw_metadata()
        return flagged_tables(recorded_tables(meta, self.dbs), self.codecs, meta)

    def raw_metadata(self) -> dict[str, bytes]:
        if self._outer is not None:
            return {k.decode("utf-8"): v for k, v in self._outer.cursor(self.dbs[METADATA_TABLE])}
        with self.env.begin(db=self.dbs[METADATA_TABLE], buffers=False) as txn:
            return {k.decode("utf-8"): v for k, v in txn.cursor()}

    def create_table(self, table: TableInfo) -> None:
        if len(self.dbs) >= self.max_dbs and self._outer is None:
            self._reopen(max_dbs=self.max_dbs * 2)
        name, kind = table.name.encode("utf-8"), (KIND_PREFIX + table.name).encode()
        flags = flags_of(table.meta, self.path)
        if flags and table.versioned:
            raise DestinationError(
                f"{self.path}: table {table.name!r} is versioned: an LMDB database with "
                f"flags ({', '.join(flags)}) cannot hold versions"
            )

        def work(txn: Any) -> None:
            self.dbs[table.name] = self.env.open_db(name, txn=txn, **open_kwargs(flags))
            if table.versioned:
                txn.put(kind, b"versioned", db=self.dbs[METADATA_TABLE])

        self._tx(work)
        if flags:
            self.codecs[table.name] = Codec(flags)

    def _put_meta(self, txn: Any, metadata: Mapping[str, bytes | None]) -> None:
        db = self.dbs[METADATA_TABLE]
        for key, value in metadata.items():
            if value is None:
                txn.delete(key.encode("utf-8"), db=db)
            else:
                txn.put(key.encode("utf-8"), value, db=db)

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        codec = self.codecs.get(table.name)
        if codec is not None:
            self._write_flagged(table, codec, batch, metadata)
            return
        pairs = encode_versioned(batch) if table.versioned else batch

        def put(cur: Any) -> int:
            # The fast path appends after the table's last key (a conversion always
            # does); an upgrade may insert anywhere. Neither overwrites a record.
            append = not pairs or not cur.last() or cur.key() < pairs[0][0]
            # MDB_APPEND skips a key that is not after the previous one, without raising.
            _consumed, added = cur.putmulti(pairs, append=append, overwrite=False)
            return int(added)

        self._put_all(table, pairs, put, "out of key order or already present", metadata)

    def _put_all(
        self,
        table: TableInfo,
        pairs: list[tuple[bytes, bytes]],
        put: Callable[[Any], int],
        missed: str,
        metadata: Mapping[str, bytes | None] | None,
    ) -> None:
        """One transaction: ``put`` the pairs through a cursor of the table's database
        (it returns how many it added), then the metadata. A pair it did not add (``missed``
        says why) refuses the whole batch, and nothing of it is written."""

        def work(txn: Any) -> None:
            added = put(txn.cursor(self.dbs[table.name]))
            if added != len(pairs):
                raise DestinationError(
                    f"{self.path}: table {table.name!r}: {len(pairs) - added} record(s) "
                    f"{missed}; nothing of this batch was written"
                )
            if metadata:
                self._put_meta(txn, metadata)

        self._tx(work)

    def _write_flagged(
        self,
        table: TableInfo,
        codec: Codec,
        batch: Batch,
        metadata: Mapping[str, bytes | None] | None,
    ) -> None:
        """A batch into a flagged database: each record as the stored pair it stands for."""
        pairs = stored_pairs(codec, batch, f"{self.path}: table {table.name!r}")
        self._put_all(
            table, pairs, lambda cur: put_flagged(cur, codec, pairs), "already present", metadata
        )

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        self._tx(lambda txn: self._put_meta(txn, metadata))

    # In-place methods (schema upgrades).

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        """Batches as this writer sees them: inside :meth:`transaction`, its own writes too."""
        own = self._outer is None
        txn = self.env.begin(buffers=False) if own else self._outer
        try:
            db = self.dbs.get(table.name)
            if db is not None:
                codec = self.codecs.get(table.name)
                cur = txn.cursor(db)
                yield from cursor_batches(cur, table, after, max_records, max_bytes, None, codec)
        finally:
            if own:
                txn.abort()

    def drop_table(self, name: str) -> None:
        db = self.dbs.get(name)
        if db is None:
            return

        def work(txn: Any) -> None:
            txn.drop(db, delete=True)
            txn.delete((KIND_PREFIX + name).encode(), db=self.dbs[METADATA_TABLE])

        self._tx(work)
        del self.dbs[name]
        self.codecs.pop(name, None)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One LMDB write transaction around the block: tables, records and metadata."""
        self._refuse_if_open()
        if len(self.dbs) + 64 > self.max_dbs:  # no reopening inside the transaction
            self._reopen(max_dbs=len(self.dbs) + 128)
        dbs = dict(self.dbs)
        self._outer = self.env.begin(write=True)
        try:
            yield
        except BaseException:
            self._outer.abort()
            self.dbs = dbs  # handles opened or dropped inside are gone with the abort
            raise
        else:
            try:
                with self.errors(failed="{path}: commit failed ({text})"):
                    self._outer.commit()
            except BaseException:
                self.dbs = dbs
                raise
        finally:
            self._outer = None

    def sync(self) -> None:
        self.finish()

    def backup(self, path: Path) -> None:
        """LMDB's own consistent copy (``mdb_env_copy``) into a new directory (into a new
        file, for a single-file environment)."""
        fd = -1
        try:
            if self.single:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)
            else:
                path.mkdir()
        except OSError as exc:
            raise DestinationError(f"{path}: cannot write the backup ({exc.strerror})") from exc
        try:
            with self.errors(where=path, failed="{where}: backup failed ({text})"):
                if self.single:
                    self.env.copyfd(fd)
                    os.fsync(fd)
                else:
                    self.env.copy(str(path))
        finally:
            if fd >= 0:
                os.close(fd)

    def finish(self) -> None:
        with self.errors(failed="{path}: sync failed ({text})"):
            self.env.sync(True)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None
