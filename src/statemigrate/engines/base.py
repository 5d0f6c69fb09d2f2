"""What every engine provides: a reader and a writer over the state model.

The plumbing (batching, digests, checkpoints, verification, renaming into place)
lives once in :mod:`statemigrate.pipeline`; an engine only lists its tables, reads a
table's records in key order from one consistent snapshot, and writes batches.
Engine modules import their driver lazily, inside methods, so that loading the
registry or ``statemigrate --help`` never imports a driver.
"""

from __future__ import annotations

import contextlib
import importlib
import json
from abc import ABC, abstractmethod
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, final

from typing_extensions import Self

from ..errors import MissingDriverError, UsageError
from ..locks import LockProbe, lock_holder
from ..model import (
    BATCH_BYTES,
    BATCH_RECORDS,
    METADATA_TABLE,
    TMP_TABLE_PREFIX,
    Batch,
    Record,
    TableInfo,
    TableKind,
    shown_name,
    table_name_problem,
)
from .errors import DriverErrors

# The model's batch bounds, under the names the plumbing imports.
DEFAULT_BATCH_RECORDS = BATCH_RECORDS
DEFAULT_BATCH_BYTES = BATCH_BYTES

# Keys of the store metadata (the ``__statemigrate__`` table of each engine).
META_SCHEMA = "schema"
META_REVISION = "revision"  # JSON list of revision ids
META_CHECKPOINT = "checkpoint"  # JSON, only while a conversion runs
META_TABLE_PREFIX = "table:"  # + table name: JSON of TableInfo.meta
# + table name: b"versioned", where the layout cannot show a table's kind (DESIGN.md);
# engine-private (see StoreFacts.private_metadata).
META_KIND_PREFIX = "kind:"


def recorded_tables(meta: Mapping[str, bytes], names: Iterable[str]) -> list[TableInfo]:
    """Tables ``names`` with the kinds the metadata records (``kind:<table>``).

    Args:
        meta: the store's metadata, private entries included.
        names: the store's table names; the metadata's own table is left out.
    """
    return [
        TableInfo(
            n,
            TableKind.VERSIONED
            if meta.get(META_KIND_PREFIX + n) == b"versioned"
            else TableKind.PLAIN,
        )
        for n in names
        if n != METADATA_TABLE
    ]


def public_metadata(meta: Mapping[str, bytes], private: tuple[str, ...]) -> dict[str, bytes]:
    """The metadata entries but the engine's private ones (keys starting with ``private``).

    Engines keep facts of their own layout in the metadata table (``kind:<table>``,
    ``sql.name:<table>`` …); a reader or writer hides them from :meth:`Reader.metadata`
    by declaring their prefixes (``private_metadata``).

    Args:
        meta: every entry of the store's metadata.
        private: the engine's private key prefixes.
    """
    if not private:
        return dict(meta)
    return {k: v for k, v in meta.items() if not k.startswith(private)}


def take_batches(
    rows: Iterable[Any], max_records: int, max_bytes: int, decode: str = "as_is"
) -> Iterator[Batch]:
    """Bounded batches of a driver's rows, taken natively: one extension call per batch.

    Args:
        rows: the driver's iterator of ``(key, value[, version])`` tuples, in key order.
        max_records: records per batch at most.
        max_bytes: payload bytes per batch at most (the record that reaches it is the last).
        decode: how rows carry versions (see ``_native.take_batch``).

    Raises:
        ValueError: a row outside the model (a key or value that is not bytes …).
    """
    from .. import _native

    it = iter(rows)
    while True:
        batch, _nbytes = _native.take_batch(it, max_records, max_bytes, decode)
        if not batch:
            return
        yield batch


def _scanned(
    owner: StoreAccess, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
) -> Iterator[Batch]:
    """The batches of ``owner.scan``, its driver errors mapped and its end confirmed.

    The scan is started here (an engine that cannot scan refuses at once); its batches
    are taken as the caller iterates.
    """
    how: dict[str, Any] = {"where": f"{owner.path} table {table.name!r}", "table": table.name}
    if owner.facts.errors.scan_failed:
        how["failed"] = owner.facts.errors.scan_failed
    doing = f"reading table {table.name!r}"
    with owner.errors(doing, **how):
        scan = owner.scan(table, after, max_records, max_bytes)
    return _mapped_batches(owner, scan, table, after, doing, how)


def _mapped_batches(
    owner: StoreAccess,
    scan: Iterator[Batch],
    table: TableInfo,
    after: bytes | None,
    doing: str,
    how: dict[str, Any],
) -> Iterator[Batch]:
    last = None
    try:
        while True:
            with owner.errors(doing, **how):
                batch = next(scan, None)
            if batch is None:
                break
            if batch:
                last = batch[-1][0]
                yield batch
        with owner.errors(doing, **how):
            owner.confirm_end(table, after, last)
    finally:
        close = getattr(scan, "close", None)
        if close is not None:
            close()


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
class StoreFacts:
    """What an engine declares once for its reader and its writer.

    Attributes:
        errors: what the driver's errors mean (none mapped by default).
        locks: where another process holding the store shows (for a busy store's pid).
        private_metadata: prefixes of metadata keys the engine keeps for itself
            (table kinds, SQL names …), hidden from ``metadata()``.
        busy_hint: the hint of a busy store's error.
    """

    errors: DriverErrors = field(default_factory=lambda: DriverErrors(driver=()))
    locks: tuple[LockProbe, ...] = ()
    private_metadata: tuple[str, ...] = ()
    busy_hint: str | None = None

    def holder(self, path: Path) -> int | None:
        """The pid of another process holding the store at ``path`` (-1: unknown), or None."""
        return lock_holder(path, self.locks) if self.locks else None

    def mapped(
        self, path: Path, doing: str = "", *, writing: bool, **how: Any
    ) -> AbstractContextManager[None]:
        """Driver errors raised inside the ``with`` block as the contract's.

        Readers and writers use it through :meth:`StoreAccess.errors`; an engine's
        class methods use it for driver calls made before one exists.

        Args:
            path: the store.
            doing: what the block does, for the message.
            writing: the block writes the store (a disk failure is then the destination's).
            **how: as for :meth:`DriverErrors.error` (``source`` defaults to reading).
        """
        how.setdefault("source", not writing)
        return self.errors.mapped(
            path,
            doing,
            writing=writing,
            holder=lambda: self.holder(path),
            busy_hint=self.busy_hint,
            **how,
        )


class StoreAccess(ABC):
    """What a :class:`Reader` and a :class:`Writer` share: the plumbing written once.

    An engine implements :meth:`raw_metadata` and :meth:`scan` (bounded batches of a
    table after a key, taken natively: :func:`take_batches`) and declares its
    :class:`StoreFacts`; the base derives the rest for every engine: batch bounds,
    record iteration, hiding the engine's private metadata, mapping driver errors to
    the contract's, naming the process holding the store and confirming that a scan
    reached the table's real end (:meth:`confirm_end`).
    """

    facts: ClassVar[StoreFacts] = StoreFacts()
    # Whether a driver error this side cannot explain is the source's (exit 4).
    reads_source: ClassVar[bool] = True
    path: Path  # the store

    def __enter__(self) -> Self:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Release the store."""

    @final
    def metadata(self) -> dict[str, bytes]:
        """The store's metadata entries (empty when it has none), the engine's own hidden."""
        return public_metadata(self.raw_metadata(), self.facts.private_metadata)

    @abstractmethod
    def raw_metadata(self) -> dict[str, bytes]:
        """Every entry of the store's metadata, the engine's private ones included."""

    @abstractmethod
    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        """The engine's one read: batches of ``table`` in key order, strictly after ``after``.

        Each batch holds at most ``max_records`` records and stops at the record that
        brings its payload to ``max_bytes``; an empty table yields nothing. Driver
        errors raised here are mapped by the base (``facts.errors``).

        Args:
            table: the table to read.
            after: read strictly after this key (None: from the start).
            max_records: records per batch at most.
            max_bytes: payload bytes per batch at most.
        """

    def confirm_end(self, table: TableInfo, after: bytes | None, last: bytes | None) -> None:
        """Confirm that a scan whose last record was ``last`` reached the table's real end.

        Called once a scan is exhausted. A driver whose iterator ends the same way at
        the end of the data and at damage it cannot read (RocksDB) checks here; the
        default trusts the driver.

        Args:
            table: the table read.
            after: where the scan started (exclusive), or None.
            last: the last key the scan yielded, or None when it yielded nothing.

        Raises:
            SourceError: the scan stopped early.
        """

    @final
    def read_batches(
        self,
        table: TableInfo,
        after: bytes | None = None,
        *,
        max_records: int = BATCH_RECORDS,
        max_bytes: int = BATCH_BYTES,
    ) -> Iterator[Batch]:
        """Batches of ``table`` in key order, each bounded by records and bytes.

        The engine's :meth:`scan`, its driver errors mapped and its end confirmed. A
        writer sees its own writes (in-place upgrades).

        Args:
            table: the table to read.
            after: read strictly after this key.
            max_records: records per batch at most.
            max_bytes: payload bytes per batch at most (one record may exceed it).

        Raises:
            UsageError: a writer of an engine without in-place upgrades.
        """
        return _scanned(self, table, after, max_records, max_bytes)

    def errors(self, doing: str = "", **how: Any) -> AbstractContextManager[None]:
        """Driver errors raised inside the ``with`` block as the contract's (:meth:`StoreFacts.mapped`).

        Args:
            doing: what the block does, for the message.
            **how: as for :meth:`DriverErrors.error` (``source`` and ``writing``
                default to this side's).
        """
        how.setdefault("source", self.reads_source)
        how.setdefault("writing", not self.reads_source)
        return self.facts.mapped(self.path, doing, **how)


class Reader(StoreAccess):
    """A read-only view of one consistent snapshot of a store (see :class:`StoreAccess`).

    Most readers find the tables and the metadata once, when they open their snapshot:
    they set :attr:`snapshot_tables` and :attr:`snapshot_metadata` and need not
    implement :meth:`list_tables` and :meth:`raw_metadata`.
    """

    # True when read_batches may run on another thread than the one that opened the
    # reader; the pipeline then reads ahead on a second thread (see prefetch.py).
    threadsafe_reads: ClassVar[bool] = False
    snapshot_tables: list[TableInfo]  # the store's tables, as found at open
    snapshot_metadata: dict[str, bytes]  # every metadata entry, as found at open

    def list_tables(self) -> list[TableInfo]:
        """The store's tables (not the metadata table), in any order."""
        return list(self.snapshot_tables)

    def raw_metadata(self) -> dict[str, bytes]:
        """Every entry of the store's metadata, the engine's private ones included."""
        return dict(self.snapshot_metadata)

    def tables(self) -> list[TableInfo]:
        """The tables in name byte order, with their metadata (``TableInfo.meta``)."""
        meta = self.metadata()
        out = []
        for t in self.list_tables():
            raw = meta.get(META_TABLE_PREFIX + t.name)
            if raw is not None and not t.meta:
                t = TableInfo(t.name, t.kind, json.loads(raw))
            out.append(t)
        return sorted(out, key=lambda t: t.name.encode("utf-8"))

    @final
    def iter_records(self, table: TableInfo, after: bytes | None = None) -> Iterator[Record]:
        """Records of ``table`` in key order, strictly after ``after`` when given."""
        for batch in self.read_batches(table, after):
            yield from batch


class Writer(StoreAccess):
    """Writes a store: tables, batches of records in key order, metadata.

    For in-place upgrades an engine implements :meth:`StoreAccess.scan` on its writer
    too (its reads see its own writes); see :class:`StoreAccess` for the rest.
    """

    reads_source: ClassVar[bool] = False

    @abstractmethod
    def list_tables(self) -> list[TableInfo]:
        """Tables that exist in the store being written."""

    @abstractmethod
    def create_table(self, table: TableInfo) -> None:
        """Create an empty table (it does not exist yet)."""

    @abstractmethod
    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        """Commit a batch together with metadata updates, as one atomic step.

        Records come in key order, after every key the table already holds. A metadata
        value of None deletes the entry. After it returns, a crash keeps both or neither.
        """

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        """Commit metadata updates alone (None deletes)."""
        raise NotImplementedError

    @abstractmethod
    def finish(self) -> None:
        """Make everything durable (flush, compact, fsync) before verification."""

    # In-place methods, used by schema upgrades (statemigrate.upgrade). An engine that
    # implements scan and drop_table declares ``Capabilities.in_place``; the others
    # have working defaults. Everything else an upgrade does is built from
    # create_table / write_batch / put_metadata above.

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        """Batches of ``table`` as this writer sees it (:meth:`StoreAccess.scan`), for upgrades.

        Raises:
            UsageError: the engine does not support in-place upgrades.
        """
        raise UsageError(
            f"the {type(self).__name__} writer cannot read tables in place (no upgrades)"
        )

    def drop_table(self, name: str) -> None:
        """Drop a table and its records (and its kind or other per-table metadata).

        Dropping a table that does not exist does nothing (recovery repeats steps).

        Raises:
            UsageError: the engine does not support in-place upgrades.
        """
        raise UsageError(
            f"the {type(self).__name__} writer cannot drop tables in place (no upgrades)"
        )

    def rename_table(self, old: str, new: str) -> None:
        """Rename table ``old`` to ``new`` (which does not exist), keeping its kind.

        Only called when ``Capabilities.rename_table`` is declared.

        Raises:
            UsageError: the engine cannot rename tables.
        """
        raise UsageError(f"the {type(self).__name__} writer cannot rename tables")

    def execute_sql(self, sql: str) -> None:
        """Run SQL text against the store (``op.execute``); only SQL engines accept it.

        Raises:
            UsageError: the engine does not speak SQL.
        """
        raise UsageError(f"the {type(self).__name__} writer does not speak SQL")

    def transaction(self) -> AbstractContextManager[None]:
        """One atomic commit around everything done inside the ``with`` block.

        Only called when ``Capabilities.transactional_ddl`` is declared. The default
        is no transaction at all.
        """
        return contextlib.nullcontext()

    def sync(self) -> None:
        """Make everything committed so far durable before a destructive step.

        Engines whose commits are durable when they return need not override it.
        """

    def backup(self, path: Path) -> None:
        """Write a consistent engine-native copy of the store to ``path`` (which does not exist).

        The default copies the store's file or directory while this writer holds it
        and nothing is being written; engines with a backup API override it.
        """
        import shutil

        src = Path(self.path)
        if src.is_dir():
            shutil.copytree(src, path)
        else:
            shutil.copy2(src, path)


class Engine(ABC):
    """A storage engine: detection, driver, capabilities, reader and writer."""

    name: ClassVar[str]
    extra: ClassVar[str]
    driver_module: ClassVar[str]
    description: ClassVar[str]
    capabilities: ClassVar[Capabilities]
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

    @classmethod
    @abstractmethod
    def open_reader(cls, path: Path, options: Mapping[str, Any] | None = None) -> Reader:
        """Open ``path`` read-only at one consistent snapshot; never modifies it."""

    @classmethod
    @abstractmethod
    def create_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        """Create a new store at ``path`` (which does not exist) and open it for writing."""

    @classmethod
    @abstractmethod
    def open_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        """Open an existing store for writing (resume, upgrade)."""

    @classmethod
    def store_paths(cls, path: Path) -> list[Path]:
        """The store's file or directory and the sidecar files that exist beside it."""
        out = [path] if path.exists() or path.is_symlink() else []
        out += [p for p in (Path(str(path) + s) for s in cls.sidecar_suffixes) if p.exists()]
        return out

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
                f"of table {table.name!r}: length {len(key)} is outside {limit} bytes"
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


def check_options(
    engine: type[Engine], options: Mapping[str, Any] | None, known: set[str]
) -> dict[str, Any]:
    """Return the options an engine knows, refusing unknown ones."""
    opts = dict(options or {})
    unknown = set(opts) - known
    if unknown:
        raise UsageError(f"the {engine.name} engine has no option {min(unknown)!r}")
    return opts
