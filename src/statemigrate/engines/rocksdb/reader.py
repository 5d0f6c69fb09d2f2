"""Reading a RocksDB store: a read-only instance over a private image of it (one snapshot)."""

from __future__ import annotations

import contextlib
import gc
import os
import stat
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import DestinationError, SourceError
from ...fsutil import crash_point
from ...model import METADATA_TABLE, TableInfo
from .. import snapshot
from ..base import META_KIND_PREFIX as KIND_PREFIX
from ..base import Reader, recorded_tables
from .families import CONFIG, DEFAULT_CF, DEFAULT_COMPAT, FamilyScans, check_store, driver_options
from .options_file import rewrite_options
from .scan import checked_read_options

if TYPE_CHECKING:
    from .engine import RocksdbEngine


def _shadow(path: Path) -> Path:
    """A private image of the store (:mod:`.snapshot`), opened instead of the store.

    rocksdict (re)writes ``rocksdict-config.json`` in the directory it opens, even
    read-only, and RocksDB may write its info ``LOG`` there: the source must not change
    at all (and a changed mtime would refuse every ``--resume``). Data files are read
    through hard links; across file systems table and blob files (never rewritten) are
    symbolic links to the store's files, checked regular just before, the rest copies
    (RocksDB's checkpoint copies those, and must copy what was checked). The config is
    copied; what the driver writes lands in the private directory. A link out of the
    store is refused (:func:`.snapshot.store_files`).
    """

    def way(f: snapshot.StoreFile) -> snapshot.Way:
        name = f.rel.name
        if len(f.rel.parts) > 1 or name == "LOCK" or name.startswith("LOG"):
            return "skip"  # RocksDB reads only the top level (and sees nothing below)
        if name == CONFIG:
            return "copy"
        return "link-or-symlink" if name.endswith((".sst", ".blob")) else "link"

    shadow = snapshot.private_dir("rocksdb")
    try:
        snapshot.replicate(path, shadow, way)
    except BaseException:
        snapshot.remove(shadow)
        raise
    return shadow


class RocksdbReader(FamilyScans, Reader):
    """A read-only instance: it sees the store as it was when opened (one snapshot)."""

    threadsafe_reads = True

    def __init__(self, engine: type[RocksdbEngine], path: Path):
        self.rd = rd = engine.require_driver()
        self.path = path
        self.facts = engine.facts
        self.db: Any = None
        self._cfs: dict[str, Any] = {}
        # A held store was refused before (RocksdbEngine.refuses_held).
        opts = driver_options(rd)
        try:
            self.shadow: Path | None = _shadow(path)
        except OSError as exc:
            raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
        try:
            # The image's files, checked regular as they were linked or copied: what
            # RocksDB reads next (the store's could be swapped for a link meanwhile).
            check_store(self.shadow, path)
        except BaseException:
            self.close()
            raise
        # On a failure, close() removes the private link directory: they must not pile up.
        with self.opening(failed="{path}: not a readable RocksDB store ({text})"):
            names = rd.Rdict.list_cf(str(self.shadow), opts)
            families = {n: opts for n in names if n != DEFAULT_CF}
            read_only = rd.AccessType.read_only()
            self.db = rd.Rdict(
                str(self.shadow), opts, column_families=families, access_type=read_only
            )
            self.snapshot_metadata = self._read_meta(names)
            self.snapshot_tables = self._list(names)
        # Records only a write-ahead log holds (see RocksdbEngine.native_copy).
        self.logged = self._replayed_from_the_log(names)

    def _replayed_from_the_log(self, names: list[str]) -> bool:
        """Whether opening replayed records from the write-ahead log into memtables.

        A read-only instance replays only what no table file holds yet; a log whose
        records were all flushed (a column family that never flushed again keeps it
        alive) replays nothing. An answer RocksDB does not give counts as a yes.
        """
        for name in names:
            for prop in ("num-entries-active-mem-table", "num-entries-imm-mem-tables"):
                value = None  # a property the build lacks: assume records are there
                with contextlib.suppress(Exception):
                    value = self._cf(name).property_int_value(f"rocksdb.{prop}")
                if value is None or value > 0:
                    return True
        return False

    def _list(self, names: list[str]) -> list[TableInfo]:
        # The default family always exists: a table when it has data or a kind.
        empty_default = (
            DEFAULT_CF in names
            and KIND_PREFIX + DEFAULT_CF not in self.snapshot_metadata
            and self._is_empty(DEFAULT_CF)
        )
        return recorded_tables(
            self.snapshot_metadata, [n for n in names if n != DEFAULT_CF or not empty_default]
        )

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        """RocksDB's ``estimate-num-keys`` of the column family: an estimate."""
        with contextlib.suppress(Exception):  # progress only: a failure here is no error
            value = self._cf(table.name).property_int_value("rocksdb.estimate-num-keys")
            return (int(value), False) if value is not None else None
        return None

    def _cf(self, name: str) -> Any:
        if name not in self._cfs:
            self._cfs[name] = self.db if name == DEFAULT_CF else self.db.get_column_family(name)
        return self._cfs[name]

    def _is_empty(self, name: str) -> bool:
        where = f"{self.path} table {name!r}"
        with self.errors(where=where, failed="{where}: read failed ({text})"):
            it = self._cf(name).iter(checked_read_options())
            try:
                it.seek_to_first()
                if it.valid():
                    return False
                it.status()  # an unreadable first block is damage, not an empty table
                return True
            finally:
                del it

    def _read_meta(self, names: list[str]) -> dict[str, bytes]:
        if METADATA_TABLE not in names:
            return {}
        pairs = self._meta_items()
        try:
            return {k.decode("utf-8"): v for k, v in pairs}
        except UnicodeDecodeError as exc:
            raise SourceError(f"{self.path} metadata: a key is not UTF-8 ({exc})") from exc

    def copy_into(self, path: Path) -> None:
        """RocksDB's checkpoint of this read's instance into a new directory ``path``.

        The checkpoint holds the live files of the version this reader opened: table
        files hard-linked (through the private image, to the source's own files), the
        MANIFEST, OPTIONS and CURRENT copied, the write-ahead log's live records with
        them. Each link is then replaced by a copy: the new store shares no file with
        the source (``--overwrite`` gives a new store the replaced one's owner, which on
        a shared file would change the source). It is made in a directory inside
        ``path`` and moved up, so that a kill leaves nothing beside ``path``.
        """
        rd = self.rd
        try:
            path.mkdir()
        except OSError as exc:
            raise DestinationError(f"{path}: cannot create ({exc.strerror})") from exc
        staging = path / "checkpoint"
        failed = "{path}: copy failed ({text})"
        with self.facts.mapped(path, "copying", writing=True, source=False, failed=failed):
            rd.Checkpoint(self.db).create_checkpoint(str(staging))
            crash_point("native copy")
            for entry in os.scandir(staging):
                _own_file(Path(entry.path), path / entry.name, self.path)
            staging.rmdir()
        try:
            # rocksdict saves its config into a checkpoint: the copy has the source's
            # own file (an app that opens its store with rocksdict), or none.
            (path / CONFIG).unlink(missing_ok=True)
            if (self.path / CONFIG).is_file() and not (self.path / CONFIG).is_symlink():
                snapshot.copy_file(self.path, Path(CONFIG), path / CONFIG)
            rewrite_options(path, DEFAULT_COMPAT)  # a native copy is one without options
        except (OSError, ValueError) as exc:
            raise DestinationError(f"{path}: cannot finish the store's own files ({exc})") from exc

    def holds_own_bytes(self, path: Path) -> bool:
        """Whether the checkpoint :meth:`copy_into` made at ``path`` is this read's own
        files, byte for byte: every file but those the copy writes anew (``OPTIONS-*``,
        rocksdict's config, a ``LOCK``, info ``LOG``) the same bytes as the image's file of
        that name. Records are what the MANIFEST, the table files and a log hold, so the
        copy then holds this read's records, and reading it back is the one walk its
        verification needs (:attr:`~statemigrate.engines.base.NativeCopy.own_bytes`).
        """
        if self.shadow is None:
            return False
        rels = [Path(e.name) for e in os.scandir(path) if not _written_anew(e.name)]
        return snapshot.same_bytes(self.shadow, path, rels)

    def close(self) -> None:
        db = getattr(self, "db", None)
        if db is not None:
            # rocksdict keeps the LOCK while any column-family handle is alive.
            self._cfs.clear()
            gc.collect()
            db.close()
            self.db = None
        snapshot.remove(getattr(self, "shadow", None))
        self.shadow = None


def _written_anew(name: str) -> bool:
    """A file of a checkpoint that is not the image's bytes by design."""
    return name.startswith(("OPTIONS-", "LOG")) or name in (CONFIG, "LOCK")


def _own_file(made: Path, final: Path, store: Path) -> None:
    """Move a checkpoint's file to ``final``; a link becomes a copy of its own: a hard
    one, of the file; a symbolic one (the private image's, across file systems), of the
    store's file it names, read without following a link (:func:`.snapshot.copy_file`)."""
    st = os.lstat(made)
    if stat.S_ISLNK(st.st_mode):
        named = Path(os.readlink(made))
        snapshot.copy_file(store, named.relative_to(os.path.abspath(store)), final)
        os.unlink(made)
    elif st.st_nlink > 1:
        snapshot.copy_file(made.parent, Path(made.name), final)
        os.unlink(made)
    else:
        os.replace(made, final)
