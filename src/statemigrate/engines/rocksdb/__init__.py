"""RocksDB through rocksdict in raw mode: one column family per table.

The writer is :mod:`.writer`; an app's own prefix layout (every table in one column
family, option ``layout``) is :mod:`.layout`.

Versioned records store an 8-byte big-endian version before the value (the model's
versioned codec). The writer uses WriteBatches with the WAL off and ``atomic_flush``
on, so that whatever survives a crash of the private ``.partial`` directory is a
consistent prefix: the records of a batch and its checkpoint are flushed together or
not at all. Tables are written in table format 5 by default (readable since RocksDB 6.6).

A store written is readable by the RocksDB option ``rocksdb_compat`` names (default 7.8,
Debian 12's): its OPTIONS files keep only the keys that release knows
(:mod:`.options_file`), and a table format it cannot read is refused. rocksdict's
own ``rocksdict-config.json``, which it writes in every directory it opens, is removed
from a store the writer made (and put back as it was in a store it opened). A store
whose comparator is not RocksDB's bytewise one is refused: its keys are not in byte order.
"""

from __future__ import annotations

import contextlib
import gc
import os
import stat
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import DestinationError, SourceError, UsageError
from ...fsutil import crash_point
from ...locks import LockProbe, SideFile, lock_holder, refuse_if_held
from ...model import METADATA_TABLE, Batch, TableInfo
from .. import snapshot
from ..base import META_KIND_PREFIX as KIND_PREFIX
from ..base import (
    AppHolder,
    Capabilities,
    Engine,
    NativeCopy,
    Reader,
    StoreAccess,
    StoreFacts,
    Writer,
    check_options,
    recorded_tables,
)
from ..errors import DriverErrors, Meaning, Rule
from ..options import EngineOptions, option, skip_foreign_tables_option
from .manifest import check_manifest
from .options_file import (
    COMPAT_CHOICES,
    MAX_FORMAT_VERSION,
    NEWEST,
    comparators,
    rewrite_options,
)
from .scan import checked_items, checked_read_options, confirm_scan_end, scan_batches

if TYPE_CHECKING:
    from ...layout import Layout

DEFAULT_CF = "default"
CONFIG = "rocksdict-config.json"
DEFAULT_FORMAT_VERSION = 5
DEFAULT_COMPAT = "7.8"  # Debian 12's RocksDB
BYTEWISE = "leveldb.BytewiseComparator"  # RocksDB's default comparator: keys in byte order
# Block-based table formats the bundled RocksDB writes (it refuses 7 and up; 0 and 1
# are legacy formats that newer RocksDB releases no longer write).
FORMAT_VERSIONS = range(2, 7)
LOCK_PROBES = (LockProbe("LOCK"),)


@dataclass(frozen=True)
class RocksdbOptions(EngineOptions):
    """The RocksDB engine's options (``--dest-option rocksdb_format_version=N``)."""

    rocksdb_format_version: int = option(
        DEFAULT_FORMAT_VERSION,
        "block-based table format written (5 is readable since RocksDB 6.6)",
        applies="dest",
        expects=f"a whole number from {FORMAT_VERSIONS[0]} to {FORMAT_VERSIONS[-1]}",
        choices=FORMAT_VERSIONS,
        flag="--rocksdb-format-version",
    )
    rocksdb_compat: str = option(
        DEFAULT_COMPAT,
        "the oldest RocksDB that must read the store written: its OPTIONS file keeps only "
        f"the keys that release knows ({NEWEST!r}: the bundled RocksDB's file as it is)",
        applies="dest",
        choices=COMPAT_CHOICES,
    )
    layout: str | None = option(
        None,
        "a layout file (TOML) saying how the app lays its state out in RocksDB, such as "
        "key prefixes in one column family (README: Your app's own layout)",
        expects="the path of a layout file",
    )
    skip_foreign_tables: bool = skip_foreign_tables_option(
        "with a layout: leave out records and column families the layout does not claim "
        "instead of refusing"
    )


# rocksdict raises plain Exception; RocksDB's status is in the message.
ROCKSDB_ERRORS = DriverErrors(
    rules=(
        Rule(
            Meaning.OUTSIDE_MODEL,
            types=("builtins.ValueError", "builtins.OverflowError"),
            message="{where}: {text}",
        ),
        # A store whose OPTIONS file is gone, opened with the bytewise comparator.
        Rule(
            Meaning.UNSUPPORTED,
            words=("does not match existing comparator",),
            message="{path}: the store's RocksDB comparator is not bytewise: not supported "
            "({text})",
        ),
        Rule(Meaning.DAMAGED, words=("corruption", "checksum mismatch")),
        Rule(Meaning.BUSY, words=("while lock file", "resource temporarily unavailable")),
        Rule(Meaning.FULL, words=("no space", "enospc")),
    ),
    scan_failed="{where}: read failed ({text})",
)
ROCKSDB_FACTS = StoreFacts(
    errors=ROCKSDB_ERRORS, locks=LOCK_PROBES, private_metadata=(KIND_PREFIX,)
)


# The writer's memory bounds. RocksDB keeps the index and filter blocks of every table
# file it opens outside any cache (so they grow with the store) and two 64 MiB memtables
# per column family: in an 8 MiB block cache and with 32 MiB memtables, peak anonymous
# memory of SQLite -> RocksDB was 96-124 MiB at 1M and 4M records, against 147-187 MiB
# (benchmarks/rss.py; no time cost measurable on a shared machine).
WRITER_BLOCK_CACHE_BYTES = 8 << 20
WRITER_MEMTABLE_BYTES = 32 << 20


def _options(
    rd: Any,
    format_version: int = DEFAULT_FORMAT_VERSION,
    create: bool = False,
    writer: bool = False,
) -> Any:
    opts = rd.Options(raw_mode=True)
    opts.create_if_missing(create)
    table = rd.BlockBasedOptions()
    table.set_format_version(format_version)
    if writer:
        table.set_cache_index_and_filter_blocks(True)
        table.set_block_cache(rd.Cache(WRITER_BLOCK_CACHE_BYTES))
        opts.set_write_buffer_size(WRITER_MEMTABLE_BYTES)
    opts.set_block_based_table_factory(table)
    opts.set_atomic_flush(True)
    opts.set_paranoid_checks(True)
    return opts


def check_comparators(store: Path, shown: Path, error: type[SourceError] = SourceError) -> None:
    """Refuse a store whose column families are not ordered by RocksDB's bytewise
    comparator, as its newest OPTIONS file names them (statemigrate's model is keys in
    byte order; rocksdict's default mode, for one, orders its encoded objects with its
    own comparator, "rocksdict"). A store without OPTIONS file is RocksDB's to refuse
    when opened (:data:`ROCKSDB_ERRORS`).

    Raises:
        SourceError: (or ``error``) a comparator that is not bytewise (exit 4).
    """
    try:
        found = comparators(store)
    except (OSError, ValueError):
        return  # no readable OPTIONS file: the open says what the comparator is
    for family, name in sorted(found.items()):
        if name != BYTEWISE:
            raise error(_comparator_refusal(shown, name, family))


def _comparator_refusal(path: Path, name: str, family: str | None = None) -> str:
    where = f" (column family {family!r})" if family else ""
    return (
        f"{path}: RocksDB comparator {name!r}{where} is not bytewise: not supported "
        f"(statemigrate reads and writes keys in byte order, RocksDB's {BYTEWISE})"
    )


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


class _Scans(StoreAccess):
    """The read both sides share: scan a column family, confirm its end."""

    facts = ROCKSDB_FACTS

    def _cf(self, name: str) -> Any:
        """The column family of table ``name`` (each side opens it its way)."""
        raise NotImplementedError

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        return scan_batches(self._cf(table.name), table, after, max_records, max_bytes)

    def confirm_end(self, table: TableInfo, after: bytes | None, last: bytes | None) -> None:
        where = f"{self.path} table {table.name!r}"
        with self.errors(where=where, failed="{where}: the scan stopped early ({text})"):
            confirm_scan_end(self._cf(table.name), last, after, where)


class RocksdbReader(_Scans, Reader):
    """A read-only instance: it sees the store as it was when opened (one snapshot)."""

    threadsafe_reads = True

    def __init__(self, engine: type[RocksdbEngine], path: Path):
        rd = engine.require_driver()
        self.path = path
        self.db: Any = None
        self._cfs: dict[str, Any] = {}
        refuse_if_held(path, LOCK_PROBES)
        opts = _options(rd)
        try:
            self.shadow: Path | None = _shadow(path)
        except OSError as exc:
            raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
        try:
            # The image's files, checked regular as they were linked or copied: what
            # RocksDB reads next (the store's could be swapped for a link meanwhile).
            check_manifest(self.shadow, shown=path)
            check_comparators(self.shadow, path)
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
        where = f"{self.path} metadata"
        with self.errors(where=where, failed="{where}: read failed ({text})"):
            pairs = list(checked_items(self._cf(METADATA_TABLE), where))
        try:
            return {k.decode("utf-8"): v for k, v in pairs}
        except UnicodeDecodeError as exc:
            raise SourceError(f"{where}: a key is not UTF-8 ({exc})") from exc

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
        rd = RocksdbEngine.require_driver()
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
    options = RocksdbOptions
    layout_family = "kv"
    layout_shape_fields = ("rocksdict_config",)  # the store's own files: rocksdict's config
    main_namespace = DEFAULT_CF
    space_factor = 1.3
    suffixes = (".rocksdb",)
    # The database open with all its column families: its LOCK file keeps readers out.
    app_holder = AppHolder(
        "import rocksdict\n"
        "o = rocksdict.Options(raw_mode=True)\n"
        "names = rocksdict.Rdict.list_cf(sys.argv[1], o)\n"
        "db = rocksdict.Rdict(sys.argv[1], o, column_families={n: o for n in names if n != 'default'})\n",
        blocks_readers=True,
    )
    # The lock file, and the info log that RocksDB rewrites on every open.
    volatile_files = ("LOCK", "LOG*")
    # DB::Open creates LOCK (O_CREAT, then a lock), renames LOG aside and makes a new
    # one, reads IDENTITY (and writes it where it is missing).
    side_files = (
        SideFile("LOCK", "RocksDB's lock file", made=True),
        SideFile("LOG", "RocksDB's info log"),
        SideFile("IDENTITY", "RocksDB's identity file"),
    )

    @classmethod
    def detect(cls, path: Path) -> bool:
        return path.is_dir() and (path / "CURRENT").is_file() and any(path.glob("MANIFEST-*"))

    @classmethod
    def open_reader(cls, path: Path, options: Mapping[str, Any] | None = None) -> Reader:
        opts = check_options(cls, options, "source")
        layout = cls._layout(opts)  # a bad layout file is refused before the store is read
        cls.check_source(path)
        if layout is not None:
            from .._kv_mapping import KvLayoutReader
            from .layout import RawRocksdbReader

            skip = bool(opts["skip_foreign_tables"])
            return KvLayoutReader(RawRocksdbReader(cls, path), layout, skip)
        return RocksdbReader(cls, path)

    @classmethod
    def native_copy(
        cls, reader: Reader, options: Mapping[str, Any] | None = None
    ) -> NativeCopy | None:
        """RocksDB's checkpoint of the reader's instance, every file the new store's own."""
        if options or type(reader) is not RocksdbReader:  # a prefix layout's: the batch loop
            return None
        if reader.logged:
            # A checkpoint of a read-only instance leaves out what only the write-ahead
            # log holds (an app killed before a flush): measured, the copy came out
            # empty, which the verification refused. Such a store takes the batch loop;
            # a log whose records all reached table files does not count.
            return None
        return NativeCopy("RocksDB checkpoint", reader.copy_into)

    @classmethod
    def check_source(cls, path: Path) -> None:
        """Refuse a path that is not a RocksDB store directory (exit 4)."""
        if not path.is_dir():
            raise SourceError(f"{path}: not a RocksDB store (a RocksDB store is a directory)")
        if not cls.detect(path):
            raise SourceError(f"{path}: not a RocksDB store (no CURRENT and MANIFEST files)")

    @classmethod
    def _layout(cls, opts: Mapping[str, Any]) -> Layout | None:
        """The layout the options name, loaded and checked (exit 2); None for none or
        for a layout file that describes the default layout."""
        from .._kv_mapping import kv_layout

        return kv_layout(cls, opts)

    @classmethod
    def guess_layout(cls, path: Path) -> str:
        """A layout file guessed from an existing store (``statemigrate layout init``)."""
        from .layout import guess_layout

        cls.check_source(path)
        return guess_layout(cls, path)

    @classmethod
    def check_tables(cls, tables: list[TableInfo], options: Mapping[str, Any] | None) -> None:
        """The names (as every engine), and what the destination's layout cannot hold."""
        layout = cls._layout(check_options(cls, options, "dest"))
        if layout is not None:
            from .._kv_mapping import check_kv_tables

            check_kv_tables(layout, tables)
        super().check_tables(tables, options)

    @classmethod
    def format_version(cls, options: Mapping[str, Any] | None) -> int:
        """The ``rocksdb_format_version`` option, checked (UsageError when it is not one).

        Args:
            options: the writer's engine options.

        Returns:
            The block-based table format to write (5 when not given).
        """
        return int(check_options(cls, options, "dest")["rocksdb_format_version"])

    @classmethod
    def compat(cls, options: Mapping[str, Any] | None) -> str:
        """The ``rocksdb_compat`` option, checked against the table format asked for.

        Raises:
            UsageError: a table format that RocksDB release cannot read (exit 2).
        """
        opts = check_options(cls, options, "dest")
        compat = str(opts["rocksdb_compat"])
        most = MAX_FORMAT_VERSION.get(compat)
        fmt = int(opts["rocksdb_format_version"])
        if most is not None and fmt > most:
            raise UsageError(
                f"rocksdb_format_version={fmt} is not readable by RocksDB {compat} "
                f"(rocksdb_compat; it reads table formats up to {most})",
                hint=f"use rocksdb_format_version={most}, or rocksdb_compat={NEWEST} if no "
                f"RocksDB {compat} reads the store",
            )
        return compat

    @classmethod
    def create_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        return cls._writer(path, True, options)

    @classmethod
    def open_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        return cls._writer(path, False, options)

    @classmethod
    def _writer(cls, path: Path, create: bool, options: Mapping[str, Any] | None) -> Writer:
        opts = check_options(cls, options, "dest")
        layout = cls._layout(opts)  # before anything is made
        config = cls._keeps_config(opts)
        fmt, compat = cls.format_version(options), cls.compat(options)
        if layout is not None:
            from .._kv_mapping import KvLayoutWriter
            from .layout import RawRocksdbWriter

            raw = RawRocksdbWriter(cls, path, create, fmt, compat, config)
            return KvLayoutWriter(raw, layout, create)
        from .writer import RocksdbWriter

        return RocksdbWriter(cls, path, create, fmt, compat, config)

    @classmethod
    def _keeps_config(cls, opts: Mapping[str, Any]) -> bool:
        """Whether the layout says the store holds rocksdict's ``rocksdict-config.json``
        (``kv.rocksdict_config``; the default layout's file too, which ``_layout`` reads
        as no layout)."""
        if not opts.get("layout"):
            return False
        from ...layout import load_layout

        return bool(load_layout(opts["layout"], cls.name, cls.layout_family).kv.rocksdict_config)

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        """The MANIFEST, the lock holder, the column families (as the MANIFEST lists
        them) and each family's comparator (as the newest OPTIONS file names them; a
        family missing there shows as ``?``)."""
        current = (path / "CURRENT").read_text(errors="replace").strip()
        info: dict[str, Any] = {
            "manifest": current,
            "lock_holder_pid": lock_holder(path, LOCK_PROBES),
        }
        families: list[str] | None = None
        with contextlib.suppress(Exception):  # a description: the read says what is wrong
            rd = cls.require_driver()
            families = list(rd.Rdict.list_cf(str(path), _options(rd)))  # reads the MANIFEST
        found: dict[str, str] = {}
        with contextlib.suppress(OSError, ValueError):
            found = comparators(path)
        if families is not None:
            info["column_families"] = families
        names = families if families is not None else sorted(found)
        shown = {found.get(n, "?") for n in names}
        if len(shown) == 1:
            info["comparator"] = shown.pop()
        elif shown:
            info["comparators"] = {n: found.get(n, "?") for n in names}
        return info
