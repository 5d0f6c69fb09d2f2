"""The RocksDB engine's declared facts, and how it opens a reader and a writer."""

from __future__ import annotations

import contextlib
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import SourceError, UsageError
from ...locks import LockProbe, SideFile, lock_holder
from ..base import META_KIND_PREFIX as KIND_PREFIX
from ..base import AppHolder, Capabilities, KvLayoutEngine, NativeCopy, Reader, StoreFacts, Writer
from ..errors import DriverErrors, Meaning, Rule
from .families import DEFAULT_CF, driver_options
from .options import RocksdbOptions
from .options_file import MAX_FORMAT_VERSION, NEWEST, comparators
from .reader import RocksdbReader

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


class RocksdbEngine(KvLayoutEngine):
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
    facts = StoreFacts(
        errors=ROCKSDB_ERRORS, locks=(LockProbe("LOCK"),), private_metadata=(KIND_PREFIX,)
    )
    # A reader copies a private image of the store: an app writing it meanwhile would tear it.
    refuses_held = frozenset({"read"})
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
    def _open_reader(cls, path: Path, opts: RocksdbOptions) -> Reader:
        layout = cls._layout(opts)  # a bad layout file is refused before the store is read
        cls.check_source(path)
        if layout is not None:
            from .._kv_mapping import KvLayoutReader
            from .layout import RawRocksdbReader

            return KvLayoutReader(RawRocksdbReader(cls, path), layout, opts.skip_foreign_tables)
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
        return NativeCopy("RocksDB checkpoint", reader.copy_into, own_bytes=reader.holds_own_bytes)

    @classmethod
    def check_source(cls, path: Path) -> None:
        """Refuse a path that is not a RocksDB store directory (exit 4)."""
        if not path.is_dir():
            raise SourceError(f"{path}: not a RocksDB store (a RocksDB store is a directory)")
        if not cls.detect(path):
            raise SourceError(f"{path}: not a RocksDB store (no CURRENT and MANIFEST files)")

    @classmethod
    def guess_layout(cls, path: Path) -> str:
        """A layout file guessed from an existing store (``statemigrate layout init``)."""
        from .layout import guess_layout

        cls.check_source(path)
        return guess_layout(cls, path)

    @classmethod
    def compat(cls, opts: RocksdbOptions) -> str:
        """The ``rocksdb_compat`` option, checked against the table format asked for.

        Raises:
            UsageError: a table format that RocksDB release cannot read (exit 2).
        """
        compat = opts.rocksdb_compat
        most = MAX_FORMAT_VERSION.get(compat)
        fmt = opts.rocksdb_format_version
        if most is not None and fmt > most:
            raise UsageError(
                f"rocksdb_format_version={fmt} is not readable by RocksDB {compat} "
                f"(rocksdb_compat; it reads table formats up to {most})",
                hint=f"use rocksdb_format_version={most}, or rocksdb_compat={NEWEST} if no "
                f"RocksDB {compat} reads the store",
            )
        return compat

    @classmethod
    def _open_writer(cls, path: Path, opts: RocksdbOptions, create: bool) -> Writer:
        layout = cls._layout(opts)  # before anything is made
        config = cls._keeps_config(opts)
        fmt, compat = opts.rocksdb_format_version, cls.compat(opts)
        if layout is not None:
            from .._kv_mapping import KvLayoutWriter
            from .layout import RawRocksdbWriter

            raw = RawRocksdbWriter(cls, path, create, fmt, compat, config)
            return KvLayoutWriter(raw, layout, create)
        from .writer import RocksdbWriter

        return RocksdbWriter(cls, path, create, fmt, compat, config)

    @classmethod
    def _keeps_config(cls, opts: RocksdbOptions) -> bool:
        """Whether the layout says the store holds rocksdict's ``rocksdict-config.json``
        (``kv.rocksdict_config``; the default layout's file too, which ``_layout`` reads
        as no layout)."""
        if not opts.layout:
            return False
        from ...layout import load_layout

        return bool(load_layout(opts.layout, cls.name, cls.layout_family).kv.rocksdict_config)

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        """The MANIFEST, the lock holder, the column families (as the MANIFEST lists
        them) and each family's comparator (as the newest OPTIONS file names them; a
        family missing there shows as ``?``)."""
        current = (path / "CURRENT").read_text(errors="replace").strip()
        info: dict[str, Any] = {
            "manifest": current,
            "lock_holder_pid": lock_holder(path, cls.facts.locks),
        }
        families: list[str] | None = None
        with contextlib.suppress(Exception):  # a description: the read says what is wrong
            rd = cls.require_driver()
            families = list(rd.Rdict.list_cf(str(path), driver_options(rd)))  # reads the MANIFEST
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
