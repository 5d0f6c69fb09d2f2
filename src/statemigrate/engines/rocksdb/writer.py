"""RocksDB's writer in the default layout: one column family per table.

Large WriteBatches with the WAL off and ``atomic_flush`` on (see the package's docstring);
the in-place methods that schema upgrades use.
"""

from __future__ import annotations

import gc
import os
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import DestinationError, SourceError
from ...model import METADATA_TABLE, Batch, TableInfo, encode_versioned
from .. import snapshot
from .._side_metadata import PARTIAL_SUFFIX
from ..base import META_KIND_PREFIX as KIND_PREFIX
from ..base import Writer, recorded_tables
from .families import CONFIG, DEFAULT_CF, DEFAULT_COMPAT, FamilyScans, check_store, driver_options
from .options_file import rewrite_options

if TYPE_CHECKING:
    from .engine import RocksdbEngine


def _read_config(store: Path) -> bytes | None:
    """rocksdict's ``rocksdict-config.json`` in ``store`` (None: there is none)."""
    config = store / CONFIG
    if config.is_symlink() or not config.is_file():
        return None
    return config.read_bytes()


class RocksdbWriter(FamilyScans, Writer):
    """Large WriteBatches, WAL off, atomic flushes; flushed and closed in finish()."""

    def __init__(
        self,
        engine: type[RocksdbEngine],
        path: Path,
        create: bool,
        format_version: int,
        compat: str = DEFAULT_COMPAT,
        keep_config: bool = False,
    ):
        self.rd = rd = engine.require_driver()
        self.path = path
        self.facts = engine.facts
        self.compat = compat
        self.opts = driver_options(rd, format_version, create=create, writer=True)
        # rocksdict's config as the store had it before the driver (re)writes it: a
        # store made here has none, and an app's own file is put back as it was.
        self._app_config: bytes | None = None
        self._keep_config = keep_config  # the layout's kv.rocksdict_config
        if not create:
            try:
                check_store(path, path)
            except SourceError as exc:
                raise DestinationError(exc.message) from exc
            if not path.name.endswith(PARTIAL_SUFFIX):  # a store being built has none of its own
                self._app_config = _read_config(path)
        self._open(create)
        self.write_opts = rd.WriteOptions()
        self.write_opts.disable_wal = True
        self.wal_opts = rd.WriteOptions()
        self._handles: dict[str, Any] = {}

    def _open(self, create: bool) -> None:
        rd, path = self.rd, self.path
        with self.errors(failed="{path}: cannot open RocksDB for writing ({text})"):
            names = [] if create else rd.Rdict.list_cf(str(path), self.opts)
            families = {n: self.opts for n in names if n != DEFAULT_CF}
            self.db = rd.Rdict(str(path), self.opts, column_families=families)
            if METADATA_TABLE not in names and self._metadata_family():
                self.db.create_column_family(METADATA_TABLE, self.opts)
        self._settle_config()

    def _metadata_family(self) -> bool:
        """Whether the metadata has a column family of its own (a layout may keep it inline)."""
        return True

    def _handle(self, name: str) -> Any:
        if name not in self._handles:
            self._handles[name] = self.db.get_column_family_handle(name)
        return self._handles[name]

    def _cf(self, name: str) -> Any:
        return self.db if name == DEFAULT_CF else self.db.get_column_family(name)

    def _names(self) -> list[str]:
        return list(self.rd.Rdict.list_cf(str(self.path), self.opts))

    def raw_metadata(self) -> dict[str, bytes]:
        return {k.decode("utf-8"): v for k, v in self._meta_items()}

    def list_tables(self) -> list[TableInfo]:
        names = [n for n in self._names() if n != DEFAULT_CF]
        return recorded_tables(self.raw_metadata(), names)

    def create_table(self, table: TableInfo) -> None:
        # The kind goes first and through the WAL: a column family is durable as soon
        # as it is created, while WAL-off writes survive a kill only once flushed, and a
        # table found after a kill must not read back as plain. Always written, so a
        # kind left by a dropped table of the same name never sticks.
        # The default family exists even when empty: its kind is always written, so
        # that an empty table ``default`` still reads back as a table.
        kind = b"versioned" if table.versioned else b"plain" if table.name == DEFAULT_CF else None
        self._write(None, [], {KIND_PREFIX + table.name: kind}, wal=True)
        if table.name != DEFAULT_CF:
            with self.errors(failed=f"{{path}}: cannot create table {table.name!r} ({{text}})"):
                self.db.create_column_family(table.name, self.opts)
            self._settle_config()  # rocksdict rewrites its config with each family

    def _write(
        self,
        table: TableInfo | None,
        batch: Batch,
        metadata: Mapping[str, bytes | None] | None,
        wal: bool = False,
    ) -> None:
        wb = self.rd.WriteBatch(raw_mode=True)
        if table is not None:
            handle = self._handle(table.name) if table.name != DEFAULT_CF else None
            pairs = encode_versioned(batch) if table.versioned else batch
            if handle is None:
                for k, v in pairs:
                    wb.put(k, v)
            else:
                for k, v in pairs:
                    wb.put(k, v, handle)
        if metadata:
            meta = self._handle(METADATA_TABLE)
            for key, value in metadata.items():
                if value is None:
                    wb.delete(key.encode("utf-8"), meta)
                else:
                    wb.put(key.encode("utf-8"), value, meta)
        with self.errors(failed="{path}: write failed ({text})"):
            self.db.write(wb, self.wal_opts if wal else self.write_opts)

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        self._write(table, batch, metadata)

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        self._write(None, [], metadata)

    def finish(self) -> None:
        with self.errors(failed="{path}: flush failed ({text})"):
            for name in self._names():
                cf = self._cf(name)
                cf.flush(True)
                del cf

    def close(self) -> None:
        db = getattr(self, "db", None)
        if db is not None:
            self._handles.clear()
            gc.collect()
            self.db = None
            try:
                with self.errors(failed="{path}: closing failed ({text})"):
                    db.close()  # flushes what is left: a full disk can meet it here
            finally:
                gc.collect()
            self._leave_the_apps_files()

    def _leave_the_apps_files(self) -> None:
        """After the driver closed: rocksdict's config settled (:meth:`_settle_config`),
        the OPTIONS files in the form RocksDB ``compat`` reads."""
        self._settle_config()
        try:
            rewrite_options(self.path, self.compat)
        except (OSError, ValueError) as exc:
            raise DestinationError(
                f"{self.path}: cannot finish the store's OPTIONS ({exc})"
            ) from exc

    def _settle_config(self) -> None:
        """rocksdict's config as the layout says (kept where the app's store holds one:
        ``kv.rocksdict_config``) or as it was before the driver opened the store (none in
        a store made here). Done as soon as the driver has written the file (when it
        opens the store, creates or drops a column family), so that a kill leaves none
        behind either."""
        config = self.path / CONFIG
        try:
            if self._keep_config:
                return  # the app's store holds the file: rocksdict's own, as it just wrote it
            if self._app_config is None:
                if config.is_file() and not config.is_symlink():
                    config.unlink()
            elif _read_config(self.path) != self._app_config:
                tmp = config.with_name(config.name + ".sm-tmp")
                tmp.write_bytes(self._app_config)
                os.replace(tmp, config)
        except OSError as exc:
            raise DestinationError(f"{self.path}: cannot settle {CONFIG} ({exc})") from exc

    # In-place methods (schema upgrades; scan and confirm_end come from _Scans).
    # RocksDB creates and drops column families outside its WriteBatches and cannot
    # rename them, so it declares neither transactional_ddl nor rename_table: an
    # upgrade builds new tables aside and switches through a journal in the metadata,
    # with sync() before each destructive step (writes go without the WAL, so only
    # flushed data survives a kill).

    def drop_table(self, name: str) -> None:
        # The kind goes first: a kill between the two steps leaves a table that the
        # upgrade journal drops again, never a stale kind for a later table.
        self.put_metadata({KIND_PREFIX + name: None})
        if name not in self._names():
            return
        self._handles.pop(name, None)
        gc.collect()
        with self.errors(failed=f"{{path}}: cannot drop table {name!r} ({{text}})"):
            self.db.drop_column_family(name)
        self._settle_config()

    def sync(self) -> None:
        """Flush the column families whose memtables hold writes (the others have none to lose)."""
        with self.errors(failed="{path}: flush failed ({text})"):
            for name in self._names():
                cf = self._cf(name)
                pending = cf.property_int_value("rocksdb.num-entries-active-mem-table") or 0
                pending += cf.property_int_value("rocksdb.num-entries-imm-mem-tables") or 0
                if pending:
                    cf.flush(True)
                del cf

    def backup(self, path: Path) -> None:
        """A copy of the store made while it is closed after a flush: table and blob files
        hard-linked where the file system allows (RocksDB never rewrites them), the rest
        copied, nothing followed out of the store (:func:`..snapshot.replicate`); the
        store reopens at once. Closed, because RocksDB's background compaction replaces
        table files at any time.
        """

        def way(f: snapshot.StoreFile) -> snapshot.Way:
            name = f.rel.name
            if name == "LOCK" or name.startswith("LOG"):
                return "skip"
            return "link" if name.endswith((".sst", ".blob")) else "copy"

        self.finish()
        self.close()
        try:
            snapshot.replicate(self.path, path, way)
        finally:
            self._open(create=False)
