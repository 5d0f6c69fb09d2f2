"""The LMDB engine's declared facts, and how it opens a reader and a writer."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import DestinationError, SourceError
from ...locks import SideFile, lock_holder
from ...model import TableInfo
from ..base import META_KIND_PREFIX as KIND_PREFIX
from ..base import (
    AppHolder,
    Capabilities,
    KvLayoutEngine,
    NativeCopy,
    Reader,
    StoreFacts,
    Writer,
)
from ..errors import DriverErrors, Meaning, Rule
from .file import data_file, is_single_file
from .flags import Codec, flags_of, table_meta
from .lockfile import LOCK_FILE, LOCK_PROBES, SINGLE_LOCK_PROBES, SINGLE_LOCK_SUFFIX, probes
from .options import LmdbOptions
from .reader import LmdbReader
from .writer import LmdbWriter

_FULL = "{path}: disk full: not enough free space ({text})"
_KEY_REFUSED = "{path}: LMDB refused a key: empty or over 511 bytes"
_MAP_FULL = "{path}: the map filled inside one upgrade transaction ({map_size} bytes)"
_FULL_HINT = "free some space, then run the same command with --resume"
LMDB_ERRORS = DriverErrors(
    rules=(
        Rule(Meaning.OUTSIDE_MODEL, types=("builtins.ValueError",), message="{where}: {text}"),
        # py-lmdb turns a damaged meta or branch page's huge size into an OverflowError.
        Rule(Meaning.DAMAGED, types=("builtins.OverflowError",)),
        Rule(Meaning.TOO_BIG, types=("lmdb.BadValsizeError",), message=_KEY_REFUSED),
        Rule(Meaning.TOO_BIG, types=("lmdb.MapFullError",), message=_MAP_FULL),
        # LMDB reports a short write on a full disk as EIO, so the free space is looked at.
        Rule(Meaning.FULL, words=("no space", "enospc"), message=_FULL, hint=_FULL_HINT),
        Rule(Meaning.FULL, nearly_full=True, message=_FULL, hint=_FULL_HINT),
    ),
    driver=("lmdb.Error", "builtins.ValueError", "builtins.OverflowError"),
    scan_failed="{where}: read failed ({text})",
)


class LmdbEngine(KvLayoutEngine):
    """LMDB through py-lmdb: the default layout's reader and writer, or a layout's."""

    name = "lmdb"
    extra = "lmdb"
    driver_module = "lmdb"
    description = "LMDB (py-lmdb): one named database per table, a directory holding data.mdb"
    capabilities = Capabilities(
        atomic_multi_table=True,
        read_only_open=True,
        multi_process_readers=True,
        directory=True,
        min_key_len=1,
        max_key_len=511,
        in_place=True,
        transactional_ddl=True,
    )
    options = LmdbOptions
    facts = StoreFacts(
        errors=LMDB_ERRORS,
        locks=LOCK_PROBES,
        private_metadata=(KIND_PREFIX,),
        busy_hint="stop the app, then run the same command",
    )
    # Even an idle app: it holds handles (DBIs) of the tables it knows, which change or
    # vanish under a writer (its next write can bring back a dropped table, or MDB_BAD_DBI).
    refuses_held = frozenset({"write"})
    # [kv] subdir: a single-file environment or a directory (kv_layout refuses it elsewhere).
    layout_shape_fields = ("subdir",)
    space_factor = 1.6
    # A table's name is a key of LMDB's main database (1-511 bytes; a NUL would end it,
    # which the model's rules already refuse).
    max_table_name_bytes = 511
    suffixes = (".lmdb",)
    # The environment open (lmdb.open), one read transaction done; a single file
    # (MDB_NOSUBDIR) opened as one.
    app_holder = AppHolder(
        "import lmdb, os\n"
        "env = lmdb.open(sys.argv[1], subdir=os.path.isdir(sys.argv[1]), max_dbs=64)\n"
        "with env.begin() as txn:\n"
        "    txn.stat()\n"
        "if sys.argv[2] == 'write':\n"
        "    held = env.begin(write=True)\n"
    )
    # The reader table, which an app holding the environment rewrites (a directory
    # store's lock.mdb, a single file's PATH-lock).
    volatile_files = ("lock.mdb", "*" + SINGLE_LOCK_SUFFIX)
    # Beside a single-file environment: its lock file (LMDB makes it at every open with
    # a lock). A convert's DST.partial-lock is removed before the store is placed.
    sidecar_suffixes = (SINGLE_LOCK_SUFFIX,)
    # mdb_env_open opens both O_CREAT|O_RDWR, and writes the lock table at every open.
    side_files = (
        SideFile(LOCK_FILE, "LMDB's lock file", made=True),
        SideFile("data.mdb", "LMDB's data file"),
    )
    # A single-file environment's: its lock file beside it (the data file is the store).
    single_file_side_files = (SideFile(SINGLE_LOCK_SUFFIX, "LMDB's lock file", made=True),)

    @classmethod
    def detect(cls, path: Path) -> bool:
        """A directory holding ``data.mdb``, or a single-file environment (``MDB_NOSUBDIR``,
        Postfix's ``FILE.lmdb``): a regular file that starts with an LMDB meta page."""
        return (path.is_dir() and (path / "data.mdb").is_file()) or is_single_file(path)

    @classmethod
    def refuse_linked_side_files(cls, path: Path, *, make: bool = False) -> None:
        """As every engine's, with the side files of the store's own shape: ``lock.mdb``
        and ``data.mdb`` inside a directory, ``PATH-lock`` beside a single file. A store
        that does not exist yet is checked as both (nothing is inside it; ``PATH-lock``
        must not be a link)."""
        from ...locks import refuse_linked_side_files

        if path.is_dir() and not path.is_symlink():
            refuse_linked_side_files(path, cls.side_files, directory=True, make=make)
        else:
            files = cls.single_file_side_files
            refuse_linked_side_files(path, files, directory=False, make=make and path.exists())

    @classmethod
    def table_type(cls, facts: Any) -> str | None:
        """A database's flags in LMDB's words: ``DUPSORT (multimap), INTEGERKEY``."""
        if not isinstance(facts, dict) or not isinstance(facts.get("flags"), list):
            return None
        words = [
            str(f).upper().replace("_", "") + (" (multimap)" if f == "dupsort" else "")
            for f in facts["flags"]
        ]
        return "LMDB " + ", ".join(words) if words else None

    @classmethod
    def held_facts(cls, table: TableInfo) -> dict[str, Any]:
        """A database's flags, which it is made with: those its table's meta records."""
        return table_meta(flags_of(table.meta, table.name))

    @classmethod
    def check_key(cls, table: TableInfo, key: bytes) -> None:
        """A flagged database's record is checked as the pair it is stored as (a
        multimap record's key and value, each 511 bytes at most), others as any key."""
        flags = flags_of(table.meta, table.name)
        if not flags:
            super().check_key(table, key)
            return
        codec = Codec(flags)
        where = f"the lmdb engine cannot store a record of table {table.name!r}"
        try:
            stored, dup = codec.from_model(key, b"")
        except ValueError as exc:
            raise DestinationError(f"{where} ({key[:64].hex()}): {exc}") from exc
        limit = cls.capabilities.max_key_len or 511
        if not 1 <= len(stored) <= limit:
            raise DestinationError(
                f"{where}: its key {stored[:64].hex() or '(empty)'} is {len(stored)} bytes, "
                f"outside 1..{limit}"
            )
        if codec.dupsort and len(dup) > limit:
            raise DestinationError(
                f"{where}: a DUPSORT database's value is a key of LMDB's, and "
                f"{dup[:64].hex()} is {len(dup)} bytes, over {limit}"
            )

    @classmethod
    def store_directory(cls, path: Path) -> bool:
        """Whether the store at ``path`` is a directory: LMDB's are by default
        (``capabilities.directory``), a single-file environment is one file."""
        return not (path.exists() and not path.is_dir())

    @classmethod
    def native_copy(
        cls, reader: Reader, options: Mapping[str, Any] | None = None
    ) -> NativeCopy | None:
        """LMDB's compacting copy (what ``mdb_copy -c`` does) of the reader's transaction,
        into a directory or, with ``subdir = false`` alone, a single file."""
        options = dict(options or {})
        subdir = options.pop("subdir", None)
        if options or not isinstance(reader, LmdbReader):
            return None
        flat = subdir is not None and str(subdir).lower() in ("false", "0", "no")
        # py-lmdb leaves the GIL while LMDB copies; the page walk reads the file.
        run = functools.partial(reader.copy_into, subdir=not flat)
        return NativeCopy("LMDB compacting copy", run, digest_alongside=True)

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        every, opened = probes(path)
        return {
            "single_file": not path.is_dir(),
            "data_bytes": data_file(path).stat().st_size,
            "open_by_pid": lock_holder(path, opened),
            "writer_pid": lock_holder(path, every[:1]),
        }

    @classmethod
    def check_source(cls, path: Path) -> None:
        """Refuse a path that is not an LMDB store directory (exit 4)."""
        if not cls.detect(path):
            raise SourceError(
                f"{path}: not an LMDB store (a directory holding data.mdb, or a single-file "
                "environment)"
            )

    @classmethod
    def store_facts(cls, path: Path) -> StoreFacts:
        """:attr:`facts`; a single-file environment's lock file is ``PATH-lock``, beside it."""
        if path.exists() and not path.is_dir():
            return dataclasses.replace(cls.facts, locks=SINGLE_LOCK_PROBES)
        return cls.facts

    @classmethod
    def _open_reader(cls, path: Path, opts: LmdbOptions) -> Reader:
        from .._kv_mapping import KvLayoutReader

        layout = cls._layout(opts)  # a bad layout file is refused before the store is read
        cls.check_source(path)
        if layout is None:
            return LmdbReader(cls, path)
        from .layout import RawLmdbReader

        return KvLayoutReader(RawLmdbReader(cls, path), layout, opts.skip_foreign_tables)

    @classmethod
    def _open_writer(cls, path: Path, opts: LmdbOptions, create: bool) -> Writer:
        from .._kv_mapping import KvLayoutWriter

        layout = cls._layout(opts)  # before anything is made
        subdir = cls.wanted_subdir(opts)
        if layout is None:
            return LmdbWriter(cls, path, create=create, subdir=subdir)
        from .layout import RawLmdbWriter

        return KvLayoutWriter(RawLmdbWriter(cls, path, create, subdir), layout, create)

    @classmethod
    def wanted_subdir(cls, opts: LmdbOptions) -> bool | None:
        """The shape a writer is asked for: the ``subdir`` option, else the layout's
        ``[kv] subdir``, else None (a new store a directory, an existing one as it is)."""
        if opts.subdir is not None:
            return opts.subdir
        if opts.layout:
            from ...layout import load_layout

            spec = load_layout(opts.layout, cls.name, cls.layout_family).kv
            return getattr(spec, "subdir", None)
        return None

    @classmethod
    def guess_layout(cls, path: Path) -> str:
        """A layout file guessed from an existing store (``statemigrate layout init``)."""
        from .layout import guess_layout

        cls.check_source(path)
        return guess_layout(cls, path)
