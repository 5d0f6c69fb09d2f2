"""RocksDB through rocksdict in raw mode: one column family per table.

Versioned records store an 8-byte big-endian version before the value. The writer
uses WriteBatches with the WAL off and ``atomic_flush`` on, so that whatever
survives a crash of the private ``.partial`` directory is a consistent prefix: the
records of a batch and its checkpoint are flushed together or not at all.
Tables are written in table format 5 by default (readable since RocksDB 6.6).
"""

from __future__ import annotations

import gc
import os
import re
import shutil
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..errors import DestinationError, SourceError, StateMigrateError, StoreBusyError, UsageError
from ..locks import busy_message, fcntl_holder
from ..model import METADATA_TABLE, Batch, Record, TableInfo, TableKind
from .base import Capabilities, Engine, Reader, Writer, check_options

DEFAULT_CF = "default"
KIND_PREFIX = "kind:"
DEFAULT_FORMAT_VERSION = 5
# Block-based table formats the bundled RocksDB writes (it refuses 7 and up; 0 and 1
# are legacy formats that newer RocksDB releases no longer write).
FORMAT_VERSIONS = range(2, 7)
SHADOW_PREFIX = "statemigrate-rocksdb-ro-"


def _msg(exc: BaseException) -> str:
    return str(exc).split("\n")[0]


def _is_busy(exc: BaseException) -> bool:
    text = str(exc)
    return "lock" in text.lower() and ("LOCK" in text or "Resource temporarily unavailable" in text)


def _options(rd: Any, format_version: int = DEFAULT_FORMAT_VERSION, create: bool = False) -> Any:
    opts = rd.Options(raw_mode=True)
    opts.create_if_missing(create)
    table = rd.BlockBasedOptions()
    table.set_format_version(format_version)
    opts.set_block_based_table_factory(table)
    opts.set_atomic_flush(True)
    opts.set_paranoid_checks(True)
    return opts


def encode_versioned(batch: Batch) -> list[tuple[bytes, bytes]]:
    """``(key, value, version)`` records as stored: version big-endian, then value."""
    return [(k, ver.to_bytes(8, "big") + v) for k, v, ver in batch]


def decode_versioned(
    pairs: list[tuple[bytes, bytes]], where: str
) -> list[tuple[bytes, bytes, int]]:
    """Inverse of :func:`encode_versioned`."""
    out = [(k, v[8:], int.from_bytes(v[:8], "big")) for k, v in pairs]
    if any(len(v) < 8 for _k, v in pairs):
        raise SourceError(f"{where}: a versioned record is shorter than its 8-byte version")
    return out


def _shadow(path: Path) -> Path:
    """A private directory of symlinks to the store's files, opened instead of the store.

    rocksdict (re)writes ``rocksdict-config.json`` in the directory it opens, even
    read-only, and RocksDB may write its info ``LOG`` there: the source must not change
    at all (and a changed mtime would refuse every ``--resume``). Data files are read
    through the links; what the driver writes lands in the private directory.
    """
    # Named with the reader's pid: the directories of a reader killed mid-read (kill -9
    # leaves them) are swept by the next reader once that pid is gone. Only links and
    # the driver's own files are inside; rmtree removes links, never their targets.
    for old in Path(tempfile.gettempdir()).glob(SHADOW_PREFIX + "*"):
        pid, sep, _ = old.name[len(SHADOW_PREFIX) :].partition("-")
        if not (sep and pid.isdigit()) or int(pid) == os.getpid():
            continue  # not named with a pid (an older version's), or this process's
        try:
            os.kill(int(pid), 0)
            continue  # still running (or the pid was reused): leave it
        except ProcessLookupError:
            pass
        except OSError:
            continue  # alive under another account
        if old.is_dir() and not old.is_symlink():
            shutil.rmtree(old, ignore_errors=True)
    shadow = Path(tempfile.mkdtemp(prefix=f"{SHADOW_PREFIX}{os.getpid()}-"))
    for entry in os.scandir(path):
        if entry.name in ("LOCK", "rocksdict-config.json") or entry.name.startswith("LOG"):
            continue
        os.symlink(os.path.abspath(entry.path), shadow / entry.name)
    if (path / "rocksdict-config.json").is_file():
        shutil.copyfile(path / "rocksdict-config.json", shadow / "rocksdict-config.json")
    return shadow


def _read_options() -> Any:
    """Read options that check every block read against its checksum."""
    import rocksdict

    ro = rocksdict.ReadOptions()
    ro.set_verify_checksums(True)
    return ro


def damaged(exc: BaseException, where: str) -> SourceError | None:
    """The SourceError for an error in which RocksDB reports damaged data, else None."""
    # The reader opens a private link directory: name the file, not that directory.
    text = re.sub(r"\S*" + SHADOW_PREFIX + r"[^/\s]*/", "", _msg(exc))
    if text.startswith("Corruption") or "checksum mismatch" in text:
        return SourceError(f"{where}: the store is damaged ({text})")
    return None


def confirm_scan_end(view: Any, last: bytes | None, after: bytes | None, where: str) -> None:
    """Raise SourceError unless a scan that ended after ``last`` reached the real end.

    rocksdict's ``items()`` stops at the first position its iterator cannot read (a
    block that fails its checksum) exactly as at the end of the data, and hides the
    iterator's status. A second iterator over the same snapshot is positioned on the
    last key the scan returned and stepped once: at the real end it is invalid with
    an OK status; after a damaged block its status raises the engine's error.

    Args:
        view: the snapshot (or column family) the scan read.
        last: the last key the scan returned, or None when it returned nothing.
        after: where the scan started (exclusive), or None for the start.
        where: the store and table, for the message.
    """
    it = view.iter(_read_options())
    try:
        try:
            if last is not None:
                it.seek(last)
                if not (it.valid() and it.key() == last):
                    it.status()
                    raise SourceError(f"{where}: the last key read is gone (damaged store)")
                it.next()
            elif after is not None:
                it.seek(after)
                if it.valid() and it.key() == after:
                    it.next()
            else:
                it.seek_to_first()
            stopped_early = it.valid()
            it.status()
        except StateMigrateError:
            raise
        except Exception as exc:  # rocksdict raises plain Exception
            raise damaged(exc, where) or SourceError(
                f"{where}: the scan stopped early ({_msg(exc)})"
            ) from exc
        if stopped_early:
            raise SourceError(f"{where}: the scan stopped before the last record")
    finally:
        del it


def checked_items(view: Any, where: str) -> Iterator[tuple[bytes, bytes]]:
    """Every pair of a (small) column family, the scan confirmed to have reached the end."""
    last = None
    for key, value in view.items(read_opt=_read_options()):
        last = key
        yield key, value
    confirm_scan_end(view, last, None, where)


def scan_batches(
    cf: Any,
    table: TableInfo,
    after: bytes | None,
    max_records: int,
    max_bytes: int,
    where: str = "",
) -> Iterator[Batch]:
    """Bounded batches of a column family in key order, strictly after ``after``.

    Rows are taken and versions decoded in the native extension, one call per batch.
    Everything is read from one snapshot, and the end of the scan is confirmed
    (:func:`confirm_scan_end`): a damaged block raises SourceError, never a short table.
    """
    from .. import _native

    view = cf.snapshot()
    try:
        items = view.items(from_key=after, read_opt=_read_options())
        decode = "be_version_prefix" if table.versioned else "as_is"
        skip = after
        last = None
        while True:
            batch, _nbytes = _native.take_batch(items, max_records, max_bytes, decode)
            if not batch:
                break
            last = batch[-1][0]
            if skip is not None:
                if batch[0][0] == skip:
                    batch = batch[1:]
                skip = None
                if not batch:
                    continue
            yield batch
        del items
        confirm_scan_end(view, last, after, where or repr(table.name))
    finally:
        del view


class RocksdbReader(Reader):
    """A read-only instance: it sees the store as it was when opened (one snapshot)."""

    threadsafe_reads = True

    def __init__(self, engine: type[RocksdbEngine], path: Path):
        rd = engine.require_driver()
        self.path = path
        holder = fcntl_holder(path / "LOCK")
        if holder is not None:
            raise StoreBusyError(busy_message(path, holder))
        opts = _options(rd)
        try:
            self.shadow: Path | None = _shadow(path)
        except OSError as exc:
            raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
        try:
            names = rd.Rdict.list_cf(str(self.shadow), opts)
            self.db = rd.Rdict(
                str(self.shadow),
                opts,
                column_families={n: opts for n in names if n != DEFAULT_CF},
                access_type=rd.AccessType.read_only(),
            )
        except Exception as exc:  # rocksdict raises plain Exception
            shutil.rmtree(self.shadow, ignore_errors=True)
            raise SourceError(f"{path}: not a readable RocksDB store ({_msg(exc)})") from exc
        self._cfs: dict[str, Any] = {}
        try:
            self._meta = self._read_meta(names)
            self._tables = self._list(names)
        except BaseException:
            self.close()  # the private link directory must not pile up
            raise

    def _list(self, names: list[str]) -> list[TableInfo]:
        tables = []
        for name in names:
            if name == METADATA_TABLE:
                continue
            if name == DEFAULT_CF and KIND_PREFIX + name not in self._meta and self._is_empty(name):
                continue  # the default family always exists: a table when it has data or a kind
            kind = (
                TableKind.VERSIONED
                if self._meta.get(KIND_PREFIX + name) == b"versioned"
                else TableKind.PLAIN
            )
            tables.append(TableInfo(name, kind))
        return tables

    def _cf(self, name: str) -> Any:
        if name not in self._cfs:
            self._cfs[name] = self.db if name == DEFAULT_CF else self.db.get_column_family(name)
        return self._cfs[name]

    def _is_empty(self, name: str) -> bool:
        where = f"{self.path} table {name!r}"
        it = self._cf(name).iter(_read_options())
        try:
            it.seek_to_first()
            if it.valid():
                return False
            it.status()  # an unreadable first block is damage, not an empty table
            return True
        except Exception as exc:
            raise damaged(exc, where) or SourceError(f"{where}: read failed ({_msg(exc)})") from exc
        finally:
            del it

    def _read_meta(self, names: list[str]) -> dict[str, bytes]:
        if METADATA_TABLE not in names:
            return {}
        where = f"{self.path} metadata"
        try:
            return {k.decode("utf-8"): v for k, v in checked_items(self._cf(METADATA_TABLE), where)}
        except StateMigrateError:
            raise
        except UnicodeDecodeError as exc:
            raise SourceError(f"{where}: a key is not UTF-8 ({exc})") from exc
        except Exception as exc:
            raise damaged(exc, where) or SourceError(f"{where}: read failed ({_msg(exc)})") from exc

    def list_tables(self) -> list[TableInfo]:
        return list(self._tables)

    def metadata(self) -> dict[str, bytes]:
        return {k: v for k, v in self._meta.items() if not k.startswith(KIND_PREFIX)}

    def iter_records(self, table: TableInfo, after: bytes | None = None) -> Iterator[Record]:
        for batch in self.read_batches(table, after):
            yield from batch

    def read_batches(self, table, after=None, *, max_records=10_000, max_bytes=8 << 20):  # type: ignore[override]
        cf = self._cf(table.name)
        where = f"{self.path} table {table.name!r}"
        try:
            yield from scan_batches(cf, table, after, max_records, max_bytes, where)
        except StateMigrateError:
            raise
        except ValueError as exc:
            raise SourceError(f"{where}: {exc}") from exc
        except Exception as exc:
            raise damaged(exc, where) or SourceError(f"{where}: read failed ({_msg(exc)})") from exc

    def close(self) -> None:
        db = getattr(self, "db", None)
        if db is not None:
            # rocksdict keeps the LOCK while any column-family handle is alive.
            self._cfs.clear()
            gc.collect()
            db.close()
            self.db = None
        shadow = getattr(self, "shadow", None)
        if shadow is not None:
            shutil.rmtree(shadow, ignore_errors=True)
            self.shadow = None


class RocksdbWriter(Writer):
    """Large WriteBatches, WAL off, atomic flushes; flushed and closed in finish()."""

    def __init__(self, engine: type[RocksdbEngine], path: Path, create: bool, format_version: int):
        rd = engine.require_driver()
        self.rd = rd
        self.path = path
        self.opts = _options(rd, format_version, create=create)
        try:
            names = [] if create else rd.Rdict.list_cf(str(path), self.opts)
            self.db = rd.Rdict(
                str(path),
                self.opts,
                column_families={n: self.opts for n in names if n != DEFAULT_CF},
            )
            if METADATA_TABLE not in names:
                self.db.create_column_family(METADATA_TABLE, self.opts)
        except Exception as exc:
            if _is_busy(exc):
                raise StoreBusyError(busy_message(path, fcntl_holder(path / "LOCK"))) from exc
            raise DestinationError(
                f"{path}: cannot open RocksDB for writing ({_msg(exc)})"
            ) from exc
        self.write_opts = rd.WriteOptions()
        self.write_opts.disable_wal = True
        self.wal_opts = rd.WriteOptions()
        self._handles: dict[str, Any] = {}

    def _handle(self, name: str) -> Any:
        if name not in self._handles:
            self._handles[name] = self.db.get_column_family_handle(name)
        return self._handles[name]

    def _meta_cf(self) -> Any:
        return self.db.get_column_family(METADATA_TABLE)

    def _meta_items(self) -> list[tuple[bytes, bytes]]:
        """The metadata column family, read whole and checked (damage is SourceError)."""
        where = f"{self.path} metadata"
        cf = self._meta_cf()
        try:
            return list(checked_items(cf, where))
        except StateMigrateError:
            raise
        except Exception as exc:
            raise damaged(exc, where) or DestinationError(
                f"{where}: read failed ({_msg(exc)})"
            ) from exc
        finally:
            del cf

    def metadata(self) -> dict[str, bytes]:
        return {
            k.decode("utf-8"): v
            for k, v in self._meta_items()
            if not k.startswith(KIND_PREFIX.encode())
        }

    def list_tables(self) -> list[TableInfo]:
        versioned = {
            k[len(KIND_PREFIX) :].decode()
            for k, _v in self._meta_items()
            if k.startswith(KIND_PREFIX.encode())
        }
        names = self.rd.Rdict.list_cf(str(self.path), self.opts)
        return [
            TableInfo(n, TableKind.VERSIONED if n in versioned else TableKind.PLAIN)
            for n in names
            if n not in (METADATA_TABLE, DEFAULT_CF)
        ]

    def create_table(self, table: TableInfo) -> None:
        # The kind goes first and through the WAL: a column family is durable as soon
        # as it is created, while WAL-off writes survive a kill only once flushed, and a
        # table found after a kill must not read back as plain. Always written, so a
        # kind left by a dropped table of the same name never sticks.
        # The default family exists even when empty: its kind is always written, so
        # that an empty table ``default`` still reads back as a table.
        kind = b"versioned" if table.versioned else b"plain" if table.name == DEFAULT_CF else None
        self._write(None, [], {KIND_PREFIX + table.name: kind}, wal=True)
        try:
            if table.name != DEFAULT_CF:
                self.db.create_column_family(table.name, self.opts)
        except Exception as exc:
            raise DestinationError(
                f"{self.path}: cannot create table {table.name!r} ({_msg(exc)})"
            ) from exc

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
        try:
            self.db.write(wb, self.wal_opts if wal else self.write_opts)
        except Exception as exc:
            text = _msg(exc)
            if "No space" in text or "ENOSPC" in text:
                raise DestinationError(f"{self.path}: disk full ({text})") from exc
            raise DestinationError(f"{self.path}: write failed ({text})") from exc

    def write_batch(self, table: TableInfo, batch: Batch, metadata=None) -> None:  # type: ignore[override]
        self._write(table, batch, metadata)

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        self._write(None, [], metadata)

    def finish(self) -> None:
        try:
            names = self.rd.Rdict.list_cf(str(self.path), self.opts)
            for name in names:
                cf = self.db if name == DEFAULT_CF else self.db.get_column_family(name)
                cf.flush(True)
                del cf
        except Exception as exc:
            raise DestinationError(f"{self.path}: flush failed ({_msg(exc)})") from exc

    def close(self) -> None:
        db = getattr(self, "db", None)
        if db is not None:
            self._handles.clear()
            gc.collect()
            self.db = None
            try:
                db.close()  # flushes what is left: a full disk can meet it here
            except Exception as exc:
                raise DestinationError(f"{self.path}: closing failed ({_msg(exc)})") from exc
            finally:
                gc.collect()

    # In-place methods (schema upgrades). RocksDB creates and drops column families
    # outside its WriteBatches and cannot rename them, so it declares neither
    # transactional_ddl nor rename_table: an upgrade builds new tables aside and
    # switches through a journal in the metadata, with sync() before each destructive
    # step (writes go without the WAL, so only flushed data survives a kill).

    def read_batches(self, table, after=None, *, max_records=10_000, max_bytes=8 << 20):  # type: ignore[override]
        where = f"{self.path} table {table.name!r}"
        cf = self.db if table.name == DEFAULT_CF else self.db.get_column_family(table.name)
        try:
            yield from scan_batches(cf, table, after, max_records, max_bytes, where)
        except StateMigrateError:
            raise
        except (ValueError, OverflowError) as exc:
            raise SourceError(f"{where}: a record outside the model ({exc})") from exc
        except Exception as exc:
            raise damaged(exc, where) or DestinationError(
                f"{where}: read failed ({_msg(exc)})"
            ) from exc
        finally:
            del cf

    def drop_table(self, name: str) -> None:
        # The kind goes first: a kill between the two steps leaves a table that the
        # upgrade journal drops again, never a stale kind for a later table.
        self.put_metadata({KIND_PREFIX + name: None})
        if name not in self.rd.Rdict.list_cf(str(self.path), self.opts):
            return
        self._handles.pop(name, None)
        gc.collect()
        try:
            self.db.drop_column_family(name)
        except Exception as exc:
            raise DestinationError(
                f"{self.path}: cannot drop table {name!r} ({_msg(exc)})"
            ) from exc

    def sync(self) -> None:
        """Flush the column families whose memtables hold writes (the others have none to lose)."""
        try:
            for name in self.rd.Rdict.list_cf(str(self.path), self.opts):
                cf = self.db if name == DEFAULT_CF else self.db.get_column_family(name)
                pending = cf.property_int_value("rocksdb.num-entries-active-mem-table") or 0
                pending += cf.property_int_value("rocksdb.num-entries-imm-mem-tables") or 0
                if pending:
                    cf.flush(True)
                del cf
        except Exception as exc:
            raise DestinationError(f"{self.path}: flush failed ({_msg(exc)})") from exc

    def backup(self, path: Path) -> None:
        """A RocksDB checkpoint (hard links where possible)."""
        try:
            self.finish()
            cp = self.rd.Checkpoint(self.db)
            cp.create_checkpoint(str(path))
            del cp
        except Exception as exc:
            raise DestinationError(f"{path}: RocksDB checkpoint failed ({_msg(exc)})") from exc


class RocksdbEngine(Engine):
    """RocksDB through rocksdict."""

    name = "rocksdb"
    extra = "rocksdb"
    driver_module = "rocksdict"
    description = "RocksDB (rocksdict, raw mode): one column family per table"
    capabilities = Capabilities(
        atomic_multi_table=True,
        read_only_open=True,
        multi_process_readers=True,
        directory=True,
        in_place=True,
    )
    space_factor = 1.3
    suffixes = (".rocksdb",)
    # The lock file, and the info log that RocksDB rewrites on every open.
    volatile_files = ("LOCK", "LOG*")

    @classmethod
    def detect(cls, path: Path) -> bool:
        return path.is_dir() and (path / "CURRENT").is_file() and any(path.glob("MANIFEST-*"))

    @classmethod
    def open_reader(cls, path: Path, options: Mapping[str, Any] | None = None) -> Reader:
        check_options(cls, options, set())
        if not path.is_dir():
            raise SourceError(f"{path}: not a RocksDB store (a RocksDB store is a directory)")
        if not cls.detect(path):
            raise SourceError(f"{path}: not a RocksDB store (no CURRENT and MANIFEST files)")
        return RocksdbReader(cls, path)

    @classmethod
    def format_version(cls, options: Mapping[str, Any] | None) -> int:
        """The ``rocksdb_format_version`` option, checked (UsageError when it is not one).

        Args:
            options: the writer's engine options.

        Returns:
            The block-based table format to write (5 when not given).
        """
        opts = check_options(cls, options, {"rocksdb_format_version"})
        value = opts.get("rocksdb_format_version")
        if value is None:
            return DEFAULT_FORMAT_VERSION
        text = str(value).strip()
        if isinstance(value, bool) or not text.isdigit() or int(text) not in FORMAT_VERSIONS:
            accepted = f"{FORMAT_VERSIONS[0]} to {FORMAT_VERSIONS[-1]}"
            raise UsageError(
                f"rocksdb_format_version must be a whole number from {accepted}, not {value!r}"
            )
        return int(text)

    @classmethod
    def create_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        return RocksdbWriter(cls, path, True, cls.format_version(options))

    @classmethod
    def open_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        return RocksdbWriter(cls, path, False, cls.format_version(options))

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        current = (path / "CURRENT").read_text(errors="replace").strip()
        return {"manifest": current, "lock_holder_pid": fcntl_holder(path / "LOCK")}
