"""Reading and writing a store: the plumbing every engine's reader and writer share.

An engine implements the smallest engine-specific steps (:meth:`StoreAccess.scan`: a
bounded batch of a table after a key, taken natively; listing tables; reading the
metadata; and the writer's writes) and declares its :class:`StoreFacts`; everything
else is derived here, once for every engine: batch bounds, record iteration, hiding
the engine's private metadata, mapping driver errors to the contract's, naming the
process holding the store and confirming that a scan reached the table's real end.
:mod:`statemigrate.engines.base` re-exports these names.
"""

from __future__ import annotations

import contextlib
import json
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterable, Iterator, Mapping
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, ClassVar, final

from typing_extensions import Self

from ..errors import SourceError, UsageError
from ..locks import LockProbe, lock_holder
from ..model import (
    BATCH_BYTES,
    BATCH_RECORDS,
    META_KIND_PREFIX,
    META_TABLE_PREFIX,
    METADATA_TABLE,
    Batch,
    Record,
    TableInfo,
    TableKind,
)
from .errors import DriverErrors


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


def batches_after(read: Callable[[bytes | None], Batch], after: bytes | None) -> Iterator[Batch]:
    """A driver's own bounded batches in key order, strictly after ``after``.

    Args:
        read: the next batch strictly after the key it is given (None: from the start),
            empty at the end.
        after: the key to start after (None: the start).
    """
    while True:
        batch = read(after)
        if not batch:
            return
        yield batch
        after = batch[-1][0]


def close_held(owner: object, name: str) -> None:
    """Close what ``owner``'s attribute ``name`` holds and set it to None; nothing when it
    holds None or was never set (an open that failed before it)."""
    held = getattr(owner, name, None)
    if held is not None:
        held.close()
        setattr(owner, name, None)


def _scanned(
    owner: StoreAccess,
    table: TableInfo,
    after: bytes | None,
    max_records: int,
    max_bytes: int,
    held: bool = False,
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
        scan = (owner.scan_held if held else owner.scan)(table, after, max_records, max_bytes)
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
                batch = _next_batch(owner, scan, table, after if last is None else last)
            if batch is None:
                break
            if batch:
                _check_progress(owner, table, after if last is None else last, batch)
                last = batch[-1][0]
                yield batch
        with owner.errors(doing, **how):
            owner.confirm_end(table, after, last)
    finally:
        close = getattr(scan, "close", None)
        if close is not None:
            close()


# What ``_native.take_batch`` raises for a row the state model cannot hold (a key or
# value that is not bytes, a version that is not a 64-bit integer).
_OUTSIDE_MODEL = (TypeError, ValueError, OverflowError)


def _next_batch(
    owner: StoreAccess, scan: Iterator[Batch], table: TableInfo, after: bytes | None
) -> Batch | None:
    """The scan's next batch (None at its end); a record outside the model is exit 4, named.

    A batch fails on such a record in the native extension or in the driver; the engine
    says which record it was (:meth:`StoreAccess.outside_model`), or that the error is
    the driver's own, which is then mapped as any other.
    """
    try:
        return next(scan, None)
    except _OUTSIDE_MODEL as exc:
        found = owner.outside_model(table, after, exc)
        if found is None:
            raise
        raise SourceError(
            f"{owner.path}: table {table.name!r} holds a record outside the model: {found}"
        ) from exc


def shown_key(key: object) -> str:
    """A key for a message: bytes as their repr cut at 64 bytes, anything else as its repr."""
    if isinstance(key, bytes):
        return repr(key[:64]) + ("…" if len(key) > 64 else "")
    return repr(key)


def _check_progress(
    owner: StoreAccess, table: TableInfo, before: bytes | None, batch: Batch
) -> None:
    """Refuse a batch that does not move past the key before it (exit 4).

    A damaged store can lead a reader back to keys it already gave (a loop in a
    damaged B-tree): each batch's first and last keys must lie after the previous
    batch's last key, so every scan ends whatever the store holds. Order inside a
    batch is checked where the batch is digested.
    """
    first, final = batch[0][0], batch[-1][0]
    if (before is not None and (first <= before or final <= before)) or final < first:
        raise SourceError(
            f"{owner.path}: table {table.name!r} is not read in key order (the store is damaged)"
        )


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

    # The engine's facts (:attr:`Engine.facts`, declared there once): a reader or writer
    # takes them from its engine (``engine.store_facts(path)``).
    facts: StoreFacts = StoreFacts()
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

    def scan_held(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        """:meth:`scan`'s batches as the engine's binding holds them (no Python object per
        record: ``_native.HeldBatch``), for a writer that takes them
        (:meth:`Writer.takes_held`); by default :meth:`scan`'s own lists."""
        return self.scan(table, after, max_records, max_bytes)

    def outside_model(
        self, table: TableInfo, after: bytes | None, exc: BaseException
    ) -> str | None:
        """Which record of ``table`` after ``after`` the state model cannot hold, for the
        message of a batch that failed with ``exc`` (a TypeError, ValueError or OverflowError).

        SQL engines find it with one query (SQLite keeps any type in any column). The
        default names the key after which the batch failed when ``exc`` is not the
        driver's (it is the native extension's check), and otherwise leaves the driver's
        error to be mapped.

        Returns:
            The record and what is wrong with it ("the version of key b'k' is a REAL"),
            or None: the error is the driver's.
        """
        if self.facts.errors.claims(exc):
            return None
        where = "in its first records" if after is None else f"after key {shown_key(after)}"
        return f"{where} ({exc})"

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
        held: bool = False,
    ) -> Iterator[Batch]:
        """Batches of ``table`` in key order, each bounded by records and bytes.

        The engine's :meth:`scan`, its driver errors mapped and its end confirmed. A
        writer sees its own writes (in-place upgrades).

        Args:
            table: the table to read.
            after: read strictly after this key.
            max_records: records per batch at most.
            max_bytes: payload bytes per batch at most (one record may exceed it).
            held: the engine's held batches (:meth:`scan_held`), for a writer whose
                :meth:`Writer.takes_held` said so; each is indexed, measured and
                digested (``stores.walk.batch_facts``) as a list is.

        Raises:
            UsageError: a writer of an engine without in-place upgrades.
        """
        return _scanned(self, table, after, max_records, max_bytes, held)

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

    @contextlib.contextmanager
    def opening(self, doing: str = "opening", **how: Any) -> Iterator[None]:
        """As :meth:`errors`, around opening the store: on any failure, what was opened so
        far is released (:meth:`close` must cope with a half-opened reader or writer)."""
        try:
            with self.errors(doing, **how):
                yield
        except BaseException:
            self.close()
            raise


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

    def skipped_tables(self) -> list[tuple[str, int | None]]:
        """What the reader left out of the store (``skip_foreign_tables``): what each
        part is ("table 'users'", "column family 'x'") and its record count (None: not
        counted). The default names the SQL readers' ``foreign_tables``."""
        return [(f"table {n!r}", None) for n in getattr(self, "foreign_tables", [])]

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        """The table's record count where it is cheap to know, for progress only.

        Returns:
            ``(count, exact)`` (``exact`` False for an engine's estimate), or None.
        """
        return None

    def raw_metadata(self) -> dict[str, bytes]:
        """Every entry of the store's metadata, the engine's private ones included."""
        return dict(self.snapshot_metadata)

    def key_length_bounds(self, table: TableInfo) -> tuple[int, int] | None:
        """The lengths of ``table``'s shortest and longest keys, where the engine
        measures them without handing each record to Python (a SQL aggregate); None (the
        default, and for an empty table) has the keys read through :meth:`read_batches`."""
        return None

    def native_digests(self, tables: list[TableInfo]) -> list[tuple[int, int, int]] | None:
        """Whole tables' ``(count, digest sum, payload bytes)`` read without the batch loop.

        An engine that can walk its own files natively (without the GIL) answers here;
        None (the default) reads the tables through :meth:`read_batches`. An answer is
        of this reader's snapshot, with the same checks (key order, the model) as the
        batch loop's; a store the walk cannot read gets None, never an error.
        """
        return None

    def tables(self) -> list[TableInfo]:
        """The tables in name byte order, with their metadata (``TableInfo.meta``): the
        facts the engine reads off its own tables, and beside them those the store's
        metadata records (``table:<name>``) of the engines the data came from (an LMDB
        database's flags in a redb file), where the engine's own facts do not say."""
        meta = self.metadata()
        out = []
        for t in self.list_tables():
            raw = meta.get(META_TABLE_PREFIX + t.name)
            if raw is not None:
                recorded = json.loads(raw)
                if isinstance(recorded, dict):
                    t = TableInfo(t.name, t.kind, {**recorded, **(t.meta or {})})
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

    def takes_held(self, reader: Reader) -> bool:
        """Whether :meth:`write_batch` takes ``reader``'s held batches
        (``read_batches(held=True)``): records its engine's binding read and holds,
        written by the same binding without a Python object per record. False here."""
        return False

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

        from ..fsutil import copy_file_written_back
        from .snapshot import replicate

        src = Path(self.path)
        if src.is_dir():
            replicate(src, path)  # no link followed out of the store
        else:
            copy_file_written_back(src, path)
            shutil.copystat(src, path)
