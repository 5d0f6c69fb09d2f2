"""What every engine provides: a reader and a writer over the state model.

The plumbing (batching, digests, checkpoints, verification, renaming into place)
lives once in :mod:`statemigrate.pipeline`; an engine only lists its tables, reads a
table's records in key order from one consistent snapshot, and writes batches. The
reader's and writer's part of that contract is :mod:`.access` (re-exported here); the
engine's declared facts are :class:`Engine` and :class:`Capabilities`.
Engine modules import their driver lazily, inside methods, so that loading the
registry or ``statemigrate --help`` never imports a driver.
"""

from __future__ import annotations

import dataclasses
import importlib
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, ClassVar, final

from ..errors import MissingDriverError
from ..locks import SideFile
from ..model import (
    BATCH_BYTES,
    BATCH_RECORDS,
    META_CHECKPOINT,
    META_KIND_PREFIX,
    META_REVISION,
    META_SCHEMA,
    META_TABLE_PREFIX,
    METADATA_TABLE,
    TMP_TABLE_PREFIX,
    TableInfo,
    facts_differ,
    physical_facts,
    shown_name,
    table_name_problem,
)
from .access import (
    Reader,
    StoreAccess,
    StoreFacts,
    Writer,
    public_metadata,
    recorded_tables,
    take_batches,
)
from .options import EngineOptions, Side

if TYPE_CHECKING:
    from ..layout import Layout

__all__ = [
    "DEFAULT_BATCH_BYTES",
    "DEFAULT_BATCH_RECORDS",
    "META_CHECKPOINT",
    "META_KIND_PREFIX",
    "META_REVISION",
    "META_SCHEMA",
    "META_TABLE_PREFIX",
    "AppHolder",
    "Capabilities",
    "Engine",
    "KvLayoutEngine",
    "NativeCopy",
    "Reader",
    "SideFile",
    "StoreAccess",
    "StoreFacts",
    "Writer",
    "check_options",
    "public_metadata",
    "recorded_tables",
    "take_batches",
]

# The model's batch bounds, under the names the plumbing imports.
DEFAULT_BATCH_RECORDS = BATCH_RECORDS
DEFAULT_BATCH_BYTES = BATCH_BYTES


@dataclass(frozen=True)
class Capabilities:
    """What an engine has, declared rather than probed.

    Attributes:
        atomic_multi_table: one commit covers records of several tables and the metadata.
        read_only_open: the driver opens a store without write access or repair.
        multi_process_readers: readers in other processes may open it while it is held.
        directory: the store is a directory rather than one file.
        min_key_len: shortest key accepted (1 where empty keys are rejected).
        max_key_len: longest key accepted, or None.
        typed_keys: tables may carry typed keys mapped to bytes (see TableInfo.meta).
        sql: the engine speaks SQL (``op.execute`` in upgrades).
        in_place: the writer implements the in-place methods that schema upgrades use
            (:meth:`Writer.read_batches`, :meth:`Writer.drop_table`).
        transactional_ddl: :meth:`Writer.transaction` makes table creation, drops,
            renames, records and metadata one atomic commit (SQLite, redb, LMDB).
        rename_table: :meth:`Writer.rename_table` renames a table cheaply; without it an
            upgrade moves a rebuilt table into place by copying it.
    """

    atomic_multi_table: bool
    read_only_open: bool
    multi_process_readers: bool
    directory: bool
    min_key_len: int = 0
    max_key_len: int | None = None
    typed_keys: bool = False
    sql: bool = False
    in_place: bool = False
    transactional_ddl: bool = False
    rename_table: bool = False

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly form, for ``statemigrate engines``."""
        return dict(self.__dict__)


@dataclass(frozen=True)
class NativeCopy:
    """An engine's own copy of one reader's snapshot into a new store (:meth:`Engine.native_copy`).

    Attributes:
        method: what the engine copies with, for progress ("SQLite backup").
        run: copies the snapshot to the path it is given, which does not exist yet;
            driver errors come out as the contract's (a full disk is exit 5).
        digest_alongside: the reader's :meth:`~Reader.native_digests` may run on a
            second thread while ``run`` copies (neither holds the GIL, nor shares a
            driver handle with the other): the source is digested during the copy.
        twin: opens a second reader of the same snapshot on a driver handle of its own,
            or gives None when the engine cannot promise that for this store: ``run``
            then copies on a second thread while the source is digested through it,
            called as ``run(path, stop)``, where ``stop()`` turns true when that digest
            failed or was stopped (``run`` may end early then, raising).
        own_bytes: given the path ``run`` copied to, whether the copy is made of the
            snapshot's own bytes (its files the same bytes as the snapshot's: a RocksDB
            checkpoint). Verification is then one walk: the copy read back, its digests
            the report's; the source is not walked. When it answers False the source is
            walked and compared, as for any copy.
    """

    method: str
    run: Callable[..., None]
    digest_alongside: bool = False
    twin: Callable[[], Reader | None] | None = None
    own_bytes: Callable[[Path], bool] | None = None


@dataclass(frozen=True)
class AppHolder:
    """How an application holds a store of this engine open (:attr:`Engine.app_holder`).

    Documentation an operator can run, and what the busy tests of
    :mod:`statemigrate.testing.holders` start as "the app".

    Attributes:
        code: Python statements run after ``import sys``, with ``sys.argv[1]`` the
            store and ``sys.argv[2]`` ``idle`` or ``write``: they open the store with the
            engine's own driver the way an application does (never through
            statemigrate's writers) and do one read; with ``write`` they also enter a
            write transaction where the engine has them. The app then holds the store
            until it is stopped.
        blocks_readers: the app's lock keeps every other process out, readers too: a
            read beside it is refused (exit 3, naming the app's pid).
        unseen: why an app holding the store leaves nothing another process can see
            (no lock), or empty: a documented limit the busy tests expect.
    """

    code: str
    blocks_readers: bool = False
    unseen: str = ""


class Engine(ABC):
    """A storage engine: detection, driver, capabilities, reader and writer."""

    name: ClassVar[str]
    extra: ClassVar[str]
    driver_module: ClassVar[str]
    description: ClassVar[str]
    capabilities: ClassVar[Capabilities]
    # The engine's options, typed (see statemigrate.engines.options); none by default.
    options: ClassVar[type[EngineOptions]] = EngineOptions
    # Which layout files describe this engine's stores (statemigrate.layout): "sql" (a
    # [sql] section, mapped by engines/_sql_layout.py) or "kv" (a [kv] section, mapped
    # by engines/_kv_mapping.py over the engine's raw namespaces); None: its default
    # layout only.
    layout_family: ClassVar[str | None] = None
    # The name by which a layout may also call the engine's main namespace ("" in a
    # [kv] layout): RocksDB's "default" column family.
    main_namespace: ClassVar[str | None] = None
    # Destination bytes per payload byte, for the pre-flight free-space check.
    space_factor: ClassVar[float] = 1.5
    # Table-name rules beyond the model's, declared (never probed) and checked before
    # writing by check_table_names: names equal after fold_table_name are one table
    # there (table_name_folding says why, after "same name as 'a'"), and these exact
    # names and prefixes, compared folded, are reserved, each with its reason.
    reserved_table_names: ClassVar[Mapping[str, str]] = {}
    reserved_table_prefixes: ClassVar[Mapping[str, str]] = {}
    max_table_name_bytes: ClassVar[int | None] = None
    table_name_folding: ClassVar[str] = ""
    # Suffixes (lower case, with the dot) that name a new store of this engine, the
    # usual one first: a destination path ending in one needs no --to.
    suffixes: ClassVar[tuple[str, ...]] = ()
    # Names (shell patterns) of the store's files and side files that hold no state:
    # locks, info logs, shared-memory indexes. An app holding the store rewrites them
    # without changing a record, so the source's fingerprint leaves them out.
    volatile_files: ClassVar[tuple[str, ...]] = ()
    # Of the engines whose detect() accepts one path, the highest wins; the more
    # general engine declares more (a SQLite file is also a libSQL and a Turso file).
    detect_priority: ClassVar[int] = 0
    # How an app holds a store of this engine (the busy tests' "app"); None: no app
    # process can hold one.
    app_holder: ClassVar[AppHolder | None] = None
    # What the engine's readers and writers know of its stores (what the driver's errors
    # mean, where a process holding a store shows, the engine's private metadata, the
    # busy hint): declared once, here; readers and writers take them from the engine
    # (:meth:`store_facts`).
    facts: ClassVar[StoreFacts] = StoreFacts()
    # Which opens refuse a store another process holds (exit 3, naming it as the lock
    # probes of :attr:`facts` see it), checked once by the templates below before the
    # engine opens anything: "read" where a reader copies a private image that an app
    # writing meanwhile would tear (RocksDB, fjall), "write" where a writer of an existing
    # store must be the only process there (LMDB's writer mutex, fjall's lock).
    refuses_held: ClassVar[frozenset[str]] = frozenset()
    # The side whose options a reader accepts: "source", or None for every option (redb
    # readers accept their writer's options too).
    reader_options: ClassVar[Side | None] = "source"
    # Documented limits, as the conformance case (statemigrate.testing.conformance) or
    # the other suite's check (its SUITE_LIMITS) each one fails, and why: strict xfails.
    known_limits: ClassVar[Mapping[str, str]] = {}

    @classmethod
    def driver_available(cls) -> bool:
        """Whether the engine's driver imports."""
        try:
            cls.require_driver()
        except MissingDriverError:
            return False
        return True

    @classmethod
    def require_driver(cls) -> Any:
        """Import and return the driver module, or raise naming the pip extra."""
        try:
            return importlib.import_module(cls.driver_module)
        except ImportError as exc:
            raise MissingDriverError(cls.name, cls.extra) from exc

    @classmethod
    @abstractmethod
    def detect(cls, path: Path) -> bool:
        """Whether ``path`` holds a store of this engine (by signature; changes nothing)."""

    # Files that live beside a single-file store (``-wal``, ``-shm`` …).
    sidecar_suffixes: ClassVar[tuple[str, ...]] = ()
    # The files a writer of this engine opens at a store besides the store's own path
    # (its lock file, journals, logs: locks.SideFile). No verb's writer opens a store
    # while a symbolic link or anything but a regular file is at one of them
    # (open_for_writing); those marked ``made`` are created first, never through a link.
    side_files: ClassVar[tuple[SideFile, ...]] = ()

    @classmethod
    def store_facts(cls, path: Path) -> StoreFacts:
        """The facts of the store at ``path``: :attr:`facts`, unless the engine's stores
        differ by shape (an LMDB single-file environment's lock file is beside it)."""
        return cls.facts

    @classmethod
    def parse_options(
        cls, options: Mapping[str, Any] | EngineOptions | None, side: Side | None
    ) -> Any:
        """``options`` as an instance of :attr:`options`, typed and checked (exit 2).

        Args:
            options: option name -> value (a Python value or its text), the instance, or None.
            side: ``source`` (a reader's), ``dest`` (a writer's) or None (every option).

        Raises:
            UsageError: an unknown option, one for the other side, or a bad value (exit 2).
        """
        return cls.options.parse(cls.name, options, side)

    @final
    @classmethod
    def refuse_if_held(cls, path: Path) -> None:
        """Refuse (exit 3, naming the pid) the store at ``path`` when another process holds
        it, as the lock probes of :meth:`store_facts` see it; nothing without probes."""
        facts = cls.store_facts(path)
        if facts.locks:
            from ..locks import refuse_if_held

            refuse_if_held(path, facts.locks, hint=facts.busy_hint)

    @final
    @classmethod
    def open_reader(cls, path: Path, options: Mapping[str, Any] | None = None) -> Reader:
        """Open ``path`` read-only at one consistent snapshot; never modifies it.

        The options are parsed once (:meth:`parse_options`), a held store is refused
        where the engine says so (:attr:`refuses_held`), then :meth:`_open_reader` opens.

        Raises:
            UsageError: a bad option (exit 2).
            StoreBusyError: another process holds the store (exit 3).
        """
        opts = cls.parse_options(options, cls.reader_options)
        if "read" in cls.refuses_held:
            cls.refuse_if_held(path)
        return cls._open_reader(path, opts)

    @final
    @classmethod
    def create_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        """Create a new store at ``path`` (which does not exist) and open it for writing.

        Raises:
            UsageError: a bad option (exit 2).
        """
        return cls._open_writer(path, cls.parse_options(options, "dest"), create=True)

    @final
    @classmethod
    def open_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        """Open an existing store for writing (resume, upgrade).

        Raises:
            UsageError: a bad option (exit 2).
            StoreBusyError: another process holds the store, where the engine's writer
                must be alone (:attr:`refuses_held`; exit 3).
        """
        opts = cls.parse_options(options, "dest")
        if "write" in cls.refuses_held:
            cls.refuse_if_held(path)
        return cls._open_writer(path, opts, create=False)

    @classmethod
    @abstractmethod
    def _open_reader(cls, path: Path, opts: Any) -> Reader:
        """The engine's reader of ``path``, with ``opts`` an instance of :attr:`options`."""

    @classmethod
    @abstractmethod
    def _open_writer(cls, path: Path, opts: Any, create: bool) -> Writer:
        """The engine's writer of a new store at ``path`` (``create``: nothing is there
        yet) or of the existing one, with ``opts`` an instance of :attr:`options`."""

    @classmethod
    def refuse_linked_side_files(cls, path: Path, *, make: bool = False) -> None:
        """Refuse (exit 5) a store whose writer would write through a link: the store's
        own path, or one of :attr:`side_files` (:func:`~statemigrate.locks.refuse_linked_side_files`).

        Args:
            path: the store (it may not exist yet).
            make: create the side files the driver creates on every open (the store exists).

        Raises:
            LinkRefusedError: a link or another kind of file there, named (exit 5).
        """
        from ..locks import refuse_linked_side_files

        directory = cls.capabilities.directory
        refuse_linked_side_files(path, cls.side_files, directory=directory, make=make)

    @classmethod
    def side_file_state(cls, side: Path) -> str | None:
        """What a side file of :attr:`sidecar_suffixes` holds that the driver would apply to
        whatever file it next finds at the store's path: "committed" (pages a write-ahead
        log holds that the store has not taken in), "hot" (a write cut short), or None
        (nothing: the default, for engines whose side files hold no state)."""
        return None

    @classmethod
    def store_directory(cls, path: Path) -> bool:
        """Whether the store at ``path`` (existing or not) is a directory: the engine's
        :attr:`Capabilities.directory`, unless it has stores of both shapes (LMDB's
        single-file environments) and says so per store."""
        return cls.capabilities.directory

    @final
    @classmethod
    def open_for_writing(
        cls, path: Path, options: Mapping[str, Any] | None = None, *, create: bool = False
    ) -> Writer:
        """The writer of every verb that writes a store (``stamp``, ``upgrade``,
        ``downgrade``, a convert's ``.partial``): :meth:`create_writer` (``create``) or
        :meth:`open_writer`, after :meth:`refuse_linked_side_files`.

        Raises:
            LinkRefusedError: a link where the writer would open a file (exit 5).
        """
        cls.refuse_linked_side_files(path, make=not create)
        return cls.create_writer(path, options) if create else cls.open_writer(path, options)

    @classmethod
    def store_paths(cls, path: Path) -> list[Path]:
        """The store's file or directory and the sidecar files that exist beside it (a
        layout's metadata side file too, :func:`._kv_mapping.metadata_side_file`)."""
        from ._side_metadata import metadata_side_file

        out = [path] if path.exists() or path.is_symlink() else []
        out += [p for p in (Path(str(path) + s) for s in cls.sidecar_suffixes) if p.exists()]
        side = metadata_side_file(path)  # a layout's metadata kept out of the store
        if side.exists():
            out.append(side)
        return out

    @classmethod
    def held_by(cls, path: Path) -> int | None:
        """Another process that has the store at ``path`` open: its pid (-1: unknown), or None.

        Every file of the store and its side files is probed, and shared locks count (an
        idle SQLite connection in WAL mode or an LMDB environment holds only those).
        Engines whose apps take no lock add what else shows them.
        """
        from ..locks import store_holder

        return store_holder(cls.store_paths(path), readers=True)

    @classmethod
    def native_copy(
        cls, reader: Reader, options: Mapping[str, Any] | None = None
    ) -> NativeCopy | None:
        """The engine's own copy of ``reader``'s snapshot, where it has one for this store.

        Asked only for a convert to the same engine with no ``--tables``, no source
        options and the metadata carried as it is; the pipeline still digests the source
        and reads the copy back. Deciding creates nothing.

        Args:
            reader: this engine's reader, open at the snapshot to copy.
            options: the destination's engine options; an engine declines (None) any
                whose result its copy would not give exactly as the batch path does.

        Returns:
            The copy, or None (the default) when the engine has none or the store holds
            something the batch path would leave out: the batch path runs instead.
        """
        return None

    @classmethod
    def table_type(cls, facts: Any) -> str | None:
        """A table's typed facts (``TableInfo.meta[name]``) in words for ``inspect``, or
        None for the generic form."""
        return None

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        """Facts for ``inspect`` (format version, journal mode …)."""
        return {}

    @classmethod
    def check_key(cls, table: TableInfo, key: bytes) -> None:
        """Raise if the engine cannot store ``key`` (checked before anything is written)."""
        caps = cls.capabilities
        if len(key) < caps.min_key_len or (
            caps.max_key_len is not None and len(key) > caps.max_key_len
        ):
            from ..errors import DestinationError

            limit = f"{caps.min_key_len}..{caps.max_key_len}"
            raise DestinationError(
                f"the {cls.name} engine cannot store key {key[:64].hex() or '(empty)'} "
                f"of table {table.name!r}: length {len(key)} is outside {limit} bytes",
                hint=f"leave table {table.name!r} out with --tables (naming the tables to "
                "convert), or convert to an engine that stores such keys",
            )

    @classmethod
    def fold_table_name(cls, name: str) -> str:
        """The form under which the engine compares table names (names equal in it are one table)."""
        return name

    @classmethod
    def _reserved_problem(cls, name: str) -> str | None:
        """Why the engine's declared rules refuse ``name`` alone, or None."""
        if cls.max_table_name_bytes is not None:
            size = len(name.encode("utf-8"))
            if size > cls.max_table_name_bytes:
                return f"{size} bytes, over the {cls.max_table_name_bytes} {cls.name} allows"
        folded = cls.fold_table_name(name)
        names = {METADATA_TABLE: "reserved for statemigrate's metadata"}
        names.update(cls.reserved_table_names)
        for reserved, why in names.items():
            if folded == cls.fold_table_name(reserved):
                if name == reserved:
                    return why
                return f"same name as {reserved!r} {cls.table_name_folding}; {why}"
        prefixes = {TMP_TABLE_PREFIX: "reserved for upgrades in progress"}
        prefixes.update(cls.reserved_table_prefixes)
        for prefix, why in prefixes.items():
            if folded.startswith(cls.fold_table_name(prefix)):
                return why
        return None

    @classmethod
    def table_name_problems(cls, names: Iterable[str]) -> dict[str, str]:
        """Every name of ``names`` this engine cannot hold, with the reason.

        The model's rules (:func:`~statemigrate.model.table_name_problem`), then the
        engine's declared ones; of two names that are one table here, the later one
        (in the order given) is the offender.

        Args:
            names: the table names a store would hold together.

        Returns:
            Offending name -> reason, in the order given (empty when all can be held).
        """
        problems: dict[str, str] = {}
        first: dict[str, str] = {}
        for name in names:
            problem = table_name_problem(name) or cls._reserved_problem(name)
            if problem is None:
                other = first.setdefault(cls.fold_table_name(name), name)
                if other != name:
                    problem = f"same name as {shown_name(other)} {cls.table_name_folding}"
            if problem is not None:
                problems.setdefault(name, problem)
        return problems

    @classmethod
    def check_table_names(cls, tables: list[TableInfo]) -> None:
        """Refuse, before anything is written, tables this engine cannot hold together.

        Args:
            tables: the tables a store of this engine is about to get.

        Raises:
            DestinationError: one error listing every offending table and why (exit 5).
        """
        problems = cls.table_name_problems(t.name for t in tables)
        if not problems:
            return
        from ..errors import DestinationError

        listed = ", ".join(f"{shown_name(n)} ({why})" for n, why in problems.items())
        one = len(problems) == 1
        raise DestinationError(
            f"the {cls.name} engine cannot hold {'this table' if one else 'these tables'}: {listed}",
            hint=f"rename {'it' if one else 'them'} in the app first, or leave "
            f"{'it' if one else 'them'} out with --tables",
        )

    @classmethod
    def check_tables(cls, tables: list[TableInfo], options: Mapping[str, Any] | None) -> None:
        """Refuse, before anything is created, tables a new store of this engine cannot hold.

        The default checks the names (:meth:`check_table_names`); engines whose
        destination options or table types decide more (redb) extend it.

        Args:
            tables: the tables a new store of this engine is about to get.
            options: the destination options the store would be created with.

        Raises:
            DestinationError: one error listing every offending table and why (exit 5).
        """
        cls.check_table_names(tables)

    @classmethod
    def check_own_copy(cls, tables: list[TableInfo], options: Mapping[str, Any] | None) -> None:
        """:meth:`check_tables` for a convert that this engine's own copy
        (:meth:`native_copy`) writes: the tables as the source's store holds them.

        The default is :meth:`check_tables`. An engine may check less where only its
        batch loop needs more (redb: user-defined key orders, which its own copy keeps),
        never the names: a store can hold names the contract refuses.

        Raises:
            DestinationError: as :meth:`check_tables` (exit 5).
        """
        cls.check_tables(tables, options)

    @classmethod
    def _layout(cls, opts: EngineOptions) -> Layout | None:
        """The layout file the options name, loaded and checked (exit 2), or None: the
        engine's default layout (an engine without layouts has no ``layout`` option)."""
        given = getattr(opts, "layout", None)
        if not given or cls.layout_family is None:
            return None
        from ..layout import load_layout

        return load_layout(given, cls.name, cls.layout_family)

    @classmethod
    def held_facts(cls, table: TableInfo) -> dict[str, Any]:
        """The part of ``table``'s meta that a store of this engine keeps in its own
        shape, without statemigrate's metadata (LMDB: a database's flags); none by default.

        What :meth:`check_facts_kept` compares with the table's facts (:func:`physical_facts`)
        for a destination whose layout keeps no metadata.
        """
        return {}

    @classmethod
    def check_facts_kept(cls, tables: list[TableInfo], options: Mapping[str, Any] | None) -> None:
        """Refuse, before anything is written, table facts a destination would lose.

        A layout with ``metadata = "none"`` keeps what a writer records in a side file
        that goes when the store is placed (DESIGN.md, "The app's own shape"), so a fact
        the engine's own shape cannot hold (a multimap table, LMDB's flags, redb's type
        names: what :func:`~statemigrate.model.facts_differ` compares) would not come back
        when the state returns to its engine, whose app would not read it as it did.

        Raises:
            DestinationError: every such table with its facts, and what would keep them
                (exit 5).
        """
        layout = cls._layout(cls.parse_options(options, "dest"))
        if layout is None or layout.metadata_in_store:
            return  # the engine's default layout keeps its metadata in the store
        lost = [
            f"{shown_name(t.name)} ({physical_facts(t)})"
            for t in tables
            if facts_differ(t, TableInfo(t.name, t.kind, cls.held_facts(t)))
        ]
        if lost:
            from ..errors import DestinationError

            raise DestinationError(
                f"{layout.describe()} keeps no metadata (metadata 'none'), so the facts of "
                f"{', '.join(lost)} would not come back when the state returns to its "
                "engine",
                hint='set metadata = "store" (or "inline" in a key-value prefix layout) in '
                "the layout file, convert into an engine that holds them, or leave the "
                "table out with --tables",
            )


class KvLayoutEngine(Engine):
    """An engine of the ``kv`` layout family (LMDB, RocksDB): its ``layout`` option names a
    ``[kv]`` layout file, mapped by engines/_kv_mapping.py over its raw namespaces."""

    layout_family: ClassVar[str | None] = "kv"

    @classmethod
    def _layout(cls, opts: EngineOptions) -> Layout | None:
        """The layout the options name, loaded and checked (exit 2); None for none or
        for a layout file that describes the default layout."""
        from ._kv_mapping import kv_layout

        return kv_layout(cls, getattr(opts, "layout", None))

    @classmethod
    def check_tables(cls, tables: list[TableInfo], options: Mapping[str, Any] | None) -> None:
        """The names (as every engine), and what the destination's layout cannot hold."""
        from ._kv_mapping import check_kv_tables

        layout = cls._layout(cls.parse_options(options, "dest"))
        if layout is not None:
            check_kv_tables(layout, tables)
        super().check_tables(tables, options)


def check_options(
    engine: type[Engine],
    options: Mapping[str, Any] | EngineOptions | None,
    side: Side | None = None,
) -> dict[str, Any]:
    """Parse options through the engine's declared dataclass (:attr:`Engine.options`).

    Args:
        engine: the engine whose options these are.
        options: option name -> value (a Python value or its text), or the dataclass.
        side: ``source`` for a reader, ``dest`` for a writer (options declared for the
            other side only are refused); None accepts all of the engine's options.

    Returns:
        Every option of the engine, converted to its type, defaults filled in, as a
        mapping (for listings; engines read the typed instance, :meth:`Engine.parse_options`).

    Raises:
        UsageError: an unknown option (the engine's options listed), one for the other
            side, or a value not of the option's type (exit 2).
    """
    return dataclasses.asdict(engine.parse_options(options, side))
