"""A ``[kv]`` layout's reader and writer, written once over every key-value engine.

An engine exposes its physical namespaces as they are, through one raw scan and one
raw write (:class:`RawKv`, :class:`RawKvWriter`): namespaces by name (``""`` is the
engine's main one: RocksDB's default column family, LMDB's unnamed database), the
first key at or after a key, the pairs of a key range, one atomic commit of puts and
deletes over several namespaces. This module maps a layout's state tables onto them
(:mod:`statemigrate.layout.kv`): ``prefix`` (every table in one namespace, the codec of
:mod:`._kv_layout`) and ``namespaces`` (each table a namespace of its own). No engine
is named here, and a new engine touches no layout code: it implements the raw
methods and returns :class:`KvLayoutReader` / :class:`KvLayoutWriter` for a layout.

Where the metadata lives is the layout's ``metadata``: statemigrate's own namespace
(``store``), the layout's namespace under the reserved table name (``inline``), or
nowhere in the store (``none``: what a writer records, a convert's checkpoint, goes to
a side file beside the store being built, :func:`metadata_side_file`, which the
convert removes when it places the store; the table kinds are the layout's).
"""

from __future__ import annotations

import contextlib
import dataclasses
import json
from abc import abstractmethod
from collections.abc import Iterator, Mapping
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ..errors import DestinationError, SourceError
from ..layout import METADATA_NAMESPACE, KvNamespaces, KvPrefix, Layout
from ..model import (
    META_KIND_PREFIX,
    META_TABLE_PREFIX,
    VERSION_PREFIX_DECODE,
    Batch,
    TableInfo,
    TableKind,
    encode_versioned,
)
from ._kv_layout import (
    decode_batch,
    encode_batch,
    find_tables,
    layout_tables,
    prefix_end,
    shown_key,
)
from ._side_metadata import metadata_side_file, read_side_metadata, write_side_metadata
from .access import Reader, StoreAccess, Writer, take_batches

__all__ = [
    "MAIN",
    "KvLayoutReader",
    "KvLayoutWriter",
    "RawKv",
    "RawKvWriter",
    "check_kv_tables",
    "kv_layout",
    "metadata_side_file",
]

MAIN = ""  # the engine's main namespace
Op = tuple[str, bytes, bytes | None]  # (namespace, key, value; None deletes)


def kv_layout(engine: Any, given: str | None) -> Layout | None:
    """The layout file an engine's ``layout`` option names, loaded and checked (exit 2);
    None for none, or for a layout file that describes the engine's default layout."""
    if not given:
        return None
    from ..layout import load_layout

    layout = load_layout(given, engine.name, engine.layout_family)
    # A field of the store's file shape is the engine's own (LMDB's ``subdir``).
    if layout.kv.subdir is not None and "subdir" not in getattr(engine, "layout_shape_fields", ()):
        from ..errors import UsageError

        raise UsageError(
            f"layout {layout.path}: kv.subdir is LMDB's (a single file or a directory), "
            f"not a field of {engine.name}'s stores"
        )
    if layout.kv.rocksdict_config and "rocksdict_config" not in getattr(
        engine, "layout_shape_fields", ()
    ):
        from ..errors import UsageError

        raise UsageError(
            f"layout {layout.path}: kv.rocksdict_config is RocksDB's (rocksdict's own file "
            f"in the store), not a field of {engine.name}'s stores"
        )
    if layout.kv.mode == "namespace-per-table":
        return None
    main = getattr(engine, "main_namespace", None)  # the main namespace's own name
    if main is None:
        return layout
    spec = layout.kv
    if isinstance(spec, KvPrefix) and spec.namespace == main:
        spec = dataclasses.replace(spec, namespace=MAIN)
    elif isinstance(spec, KvNamespaces):
        tables = tuple((t, MAIN if ns == main else ns) for t, ns in spec.tables)
        spec = dataclasses.replace(spec, tables=tables)
    return dataclasses.replace(layout, spec=spec)


class RawKv(StoreAccess):
    """A key-value store's namespaces as they are: what an engine gives the layouts.

    Implemented by an engine's reader (and, with :class:`RawKvWriter`, its writer)
    opened in raw mode: nothing of statemigrate's default layout is read into it.
    """

    @abstractmethod
    def raw_namespaces(self) -> list[str]:
        """The namespaces that exist (``""`` for the main one when it holds records or
        always exists), statemigrate's metadata namespace included when it is there."""

    @abstractmethod
    def raw_seek(self, ns: str, key: bytes) -> bytes | None:
        """The first stored key of ``ns`` at or after ``key``, or None."""

    @abstractmethod
    def raw_items(self, ns: str, start: bytes, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        """The pairs of ``ns`` from ``start`` (inclusive) to ``end`` (exclusive; None: the
        end), in key order, read from this side's snapshot."""

    def raw_confirm(self, ns: str, start: bytes, end: bytes | None, last: bytes | None) -> None:
        """Confirm that a scan of ``[start, end)`` whose last key was ``last`` reached
        the range's real end (an engine whose iterator ends silently at damage checks)."""

    def raw_count(self, ns: str, start: bytes, end: bytes | None) -> int:
        """The number of keys of ``ns`` in ``[start, end)``."""
        return sum(1 for _ in self.raw_items(ns, start, end))

    def raw_facts(self, ns: str) -> dict[str, Any]:
        """The namespace's physical properties (flags, comparator …) for ``inspect``."""
        return {}

    def raw_checked(self) -> None:
        """Called after each batch is taken, before it is used: refuse a read that a
        writer changed under this side's snapshot (LMDB without its lock)."""

    def raw_table_meta(self, ns: str) -> dict[str, Any]:
        """The physical properties a state table in namespace ``ns`` carries in its
        ``TableInfo.meta`` so that a conversion back restores them (LMDB's database
        flags); empty by default."""
        return {}

    def raw_native_digests(self, tables: list[tuple[str, TableInfo]]) -> list[Any] | None:
        """Whole namespaces' ``(count, digest sum, payload bytes)`` read natively, each
        ``(namespace, table)`` with the table's kind (:meth:`Reader.native_digests`);
        None: read through the batches."""
        return None


class RawKvWriter(RawKv):
    """A key-value store's namespaces, written: create, one atomic commit, drop."""

    max_key_len: int | None = None  # the longest stored key the engine takes

    def raw_declare(self, ns: str, meta: dict[str, Any]) -> None:
        """Before :meth:`raw_create`: the meta of the table namespace ``ns`` is made for
        (LMDB's flags come back from it); nothing by default."""

    @abstractmethod
    def raw_create(self, ns: str) -> None:
        """Create namespace ``ns`` (it does not exist yet; ``""`` always exists)."""

    @abstractmethod
    def raw_write(self, ops: list[Op], *, durable: bool = False) -> None:
        """Commit ``ops`` (puts, and deletes where the value is None) as one atomic step.

        ``durable``: through the engine's log even where bulk writes skip it.
        """

    def raw_put_sorted(self, ns: str, pairs: list[tuple[bytes, bytes]], extra: list[Op]) -> None:
        """Put ``pairs`` (ascending keys) into ``ns`` and apply ``extra``, one atomic commit.

        The bulk path of a batch; the default is :meth:`raw_write`.
        """
        self.raw_write([(ns, k, v) for k, v in pairs] + extra)

    @abstractmethod
    def raw_delete_range(self, ns: str, start: bytes, end: bytes | None) -> None:
        """Delete every key of ``ns`` in ``[start, end)``."""

    def raw_finish(self) -> None:
        """Make everything durable (the writer's ``finish``)."""

    def raw_sync(self) -> None:
        """Make everything committed durable before a destructive step."""

    def raw_transaction(self) -> AbstractContextManager[None]:
        """One atomic commit around the block, where the engine has one."""
        return contextlib.nullcontext()

    def raw_backup(self, path: Path) -> None:
        """The engine's own consistent copy of the store."""
        Writer.backup(self, path)  # type: ignore[arg-type]


class _Mapped(StoreAccess):
    """What the layout's reader and writer share: where a table's records are."""

    raw: RawKv
    layout: Layout

    def _adopt(self, raw: RawKv, layout: Layout) -> None:
        self.raw = raw
        self.layout = layout
        self.path = raw.path
        self.facts = raw.facts  # the engine's, per instance

    def _place(self, name: str) -> tuple[str, bytes, bytes | None]:
        """(namespace, first stored key, end) of state table ``name``."""
        spec = self.layout.kv
        if isinstance(spec, KvNamespaces):
            ns = spec.namespace_of(name)
            if ns is None:
                raise DestinationError(
                    f"{self.path}: {self.layout.describe()} has no table {name!r}"
                )
            return ns, b"", None
        prefix = spec.table_prefix(name)
        return spec.namespace, prefix, prefix_end(prefix)

    def _meta_place(self) -> tuple[str, bytes, bytes | None] | None:
        """Where the metadata is in the store, or None (``metadata = "none"``)."""
        if self.layout.metadata == "none":
            return None
        spec = self.layout.kv
        if isinstance(spec, KvPrefix) and spec.metadata_inline:
            prefix = spec.metadata_prefix()
            return spec.namespace, prefix, prefix_end(prefix)
        return METADATA_NAMESPACE, b"", None

    def _read_metadata(self) -> dict[str, bytes]:
        place = self._meta_place()
        if place is None:
            return read_side_metadata(self.path)
        ns, start, end = place
        if ns not in self.raw.raw_namespaces():
            return {}
        where = f"{self.path} metadata"
        with self.errors(where=where, failed="{where}: read failed ({text})"):
            pairs = [(bytes(k), bytes(v)) for k, v in self.raw.raw_items(ns, start, end)]
            self.raw.raw_confirm(ns, start, end, pairs[-1][0] if pairs else None)
        try:
            return {k[len(start) :].decode("utf-8"): v for k, v in pairs}
        except UnicodeDecodeError as exc:
            raise SourceError(f"{where}: a key is not UTF-8 ({exc})") from exc

    def _where(self, table: TableInfo) -> str:
        return f"{self.path} table {table.name!r}"

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        ns, start, end = self._place(table.name)
        if ns != MAIN and ns not in self.raw.raw_namespaces():
            return iter(())
        first = start + (after or b"")
        items: Iterator[Any] = self.raw.raw_items(ns, first, end)
        spec = self.layout.kv
        # A table that is its namespace, in the default encoding: the engine's pairs are
        # its records, taken and decoded natively; else each batch is decoded as a whole.
        native = not start and (not table.versioned or spec.version == "prefix-u64be")
        decode = VERSION_PREFIX_DECODE if native and table.versioned else "as_is"
        batches = take_batches(items, max_records, max_bytes, decode)
        skip = first if after is not None else None  # the range starts at ``after`` itself
        return self._decoded(batches, table, None if native else len(start), skip, items)

    def _decoded(
        self,
        batches: Iterator[Batch],
        table: TableInfo,
        cut: int | None,
        skip: bytes | None,
        keep: object,
    ) -> Iterator[Batch]:
        """The batches as records (``cut``: the prefix's length, None: as they are), the
        start key itself left out (``skip``), each checked by the engine after it is taken.
        ``keep`` holds what the engine's iterator needs alive (its bounds) until the end."""
        where = self._where(table)
        for batch in batches:
            if skip is not None:
                if batch and batch[0][0] == skip:
                    batch = batch[1:]
                skip = None
            if cut is not None and batch:
                batch = decode_batch(self.layout.kv, table, batch, cut, where)  # type: ignore[arg-type]
            self.raw.raw_checked()
            if batch:
                yield batch
        del keep

    def _whole_namespaces(self, tables: list[TableInfo]) -> list[tuple[str, TableInfo]] | None:
        """Each table's namespace where every table is one in the default encoding."""
        spec = self.layout.kv
        if not isinstance(spec, KvNamespaces) or spec.version != "prefix-u64be":
            return None
        out = []
        for t in tables:
            ns = spec.namespace_of(t.name)
            if ns is None or ns == MAIN:
                return None
            out.append((ns, t))
        return out

    def confirm_end(self, table: TableInfo, after: bytes | None, last: bytes | None) -> None:
        ns, start, end = self._place(table.name)
        if ns in self.raw.raw_namespaces():
            if last is not None:
                self.raw.raw_confirm(ns, start, end, start + last)
            else:  # nothing read: nothing of the table after ``after`` (or at all)
                first = start if after is None else start + after + b"\x00"
                self.raw.raw_confirm(ns, first, end, None)

    def _find(self, skip_foreign: bool) -> tuple[list[str], list[tuple[str, int]]]:
        """The layout's tables the store shows, and what it leaves out: (what, records)."""
        spec = self.layout.kv
        present = self.raw.raw_namespaces()
        meta = self._meta_place()
        ours = {meta[0]} if meta is not None else set()
        foreign: list[tuple[str, int]] = []
        names: list[str] = []
        if isinstance(spec, KvNamespaces):
            for ns in dict.fromkeys([MAIN, *present]):  # the main namespace always exists
                table = spec.table_of(ns)
                if table is not None:
                    names.append(table)
                elif ns not in ours and ns in present:
                    foreign.append((_shown_ns(ns), self._count_all(ns, skip_foreign)))
            return names, foreign
        ours.add(spec.namespace)
        foreign = [
            (_shown_ns(ns), self._count_all(ns, skip_foreign)) for ns in present if ns not in ours
        ]
        if spec.namespace in present:
            raw = self.raw
            ns = spec.namespace
            found = find_tables(
                spec,
                lambda key: raw.raw_seek(ns, key),
                lambda s, e: raw.raw_count(ns, s, e),
                stop_at_foreign=not skip_foreign,
            )
            if found.foreign:
                if not skip_foreign:
                    raise SourceError(
                        f"{self.path}: {_shown_ns(ns)} holds key "
                        f"{shown_key(found.first_foreign or b'')}, which no table of the layout "
                        f"claims (prefix {spec.head + '{name}' + spec.separator!r})",
                        hint="`statemigrate layout init STORE` prints a layout of what the store holds; "
                        "--skip-foreign-tables leaves such records out",
                    )
                foreign.append((f"keys of {_shown_ns(ns)} no table claims", found.foreign))
            names = found.names
        return names, foreign

    def _count_all(self, ns: str, counted: bool) -> int:
        """The records of a namespace the layout leaves out (-1: not counted, it is refused)."""
        return self.raw.raw_count(ns, b"", None) if counted else -1

    def _tables(self, meta: Mapping[str, bytes], names: list[str]) -> list[TableInfo]:
        spec = self.layout.kv
        if isinstance(spec, KvPrefix) and self.layout.metadata == "none" and spec.tables:
            # No kinds in the store: the tables the layout lists exist, empty or not (an
            # empty table leaves no key behind).
            names = sorted(set(names) | spec.tables, key=lambda n: n.encode("utf-8"))
        if self.layout.metadata == "none":
            # The layout's tables whose namespace exists are the tables; kinds are its.
            tables = [
                TableInfo(n, TableKind.VERSIONED if n in self.layout.versioned else TableKind.PLAIN)
                for n in sorted(names, key=lambda n: n.encode("utf-8"))
            ]
        else:
            tables = layout_tables(self.layout, meta, names)
        if not isinstance(spec, KvNamespaces):
            return tables
        # A namespace's physical properties (LMDB's flags) travel in its table's meta.
        out = []
        for t in tables:
            ns = spec.namespace_of(t.name)
            extra = self.raw.raw_table_meta(ns) if ns is not None else {}
            if extra:  # beside the facts the metadata records (``table:<name>``)
                recorded = meta.get(META_TABLE_PREFIX + t.name)
                facts = json.loads(recorded) if recorded is not None else {}
                t = TableInfo(t.name, t.kind, {**facts, **t.meta, **extra})
            out.append(t)
        return out


def _shown_ns(ns: str) -> str:
    return f"namespace {ns!r}" if ns else "the main namespace"


class KvLayoutReader(_Mapped, Reader):
    """One snapshot of a key-value store in a layout (the engine's raw reader's)."""

    def __init__(self, raw: RawKv, layout: Layout, skip_foreign: bool):
        self._adopt(raw, layout)
        self.threadsafe_reads = getattr(raw, "threadsafe_reads", False)  # type: ignore[misc]
        with self.opening(failed="{path}: cannot be read ({text})"):
            self.snapshot_metadata = self._read_metadata()
            names, self.skipped = self._find(skip_foreign)
            if self.skipped and not skip_foreign:
                listed = ", ".join(what for what, _ in self.skipped)
                raise SourceError(
                    f"{self.path}: not in {layout.describe()}: {listed}",
                    hint="`statemigrate layout init STORE` prints a layout of what the store holds; "
                    "--skip-foreign-tables leaves them out",
                )
            self.snapshot_tables = self._tables(self.snapshot_metadata, names)
        # Records no table of the layout claims, left out (skip_foreign_tables).
        self.skipped_records = sum(n for _, n in self.skipped if n > 0)
        spec = layout.kv
        if (
            not self.snapshot_tables
            and not self.skipped
            and isinstance(spec, KvPrefix)
            and spec.namespace != MAIN
            and spec.namespace not in raw.raw_namespaces()
        ):
            self.close()
            raise SourceError(
                f"{self.path}: no {_shown_ns(spec.namespace)}, which {layout.describe()} names"
            )

    def native_digests(self, tables: list[TableInfo]) -> list[tuple[int, int, int]] | None:
        """The engine's native walk, where every table is a namespace of its own."""
        placed = self._whole_namespaces(tables)
        return self.raw.raw_native_digests(placed) if placed is not None else None

    def skipped_tables(self) -> list[tuple[str, int | None]]:
        """The namespaces, and the keys of the layout's namespace, no table claims."""
        return [(what, n if n >= 0 else None) for what, n in self.skipped]

    def close(self) -> None:
        raw = getattr(self, "raw", None)
        if raw is not None:
            raw.close()


def check_kv_tables(layout: Layout, tables: list[TableInfo]) -> None:
    """Refuse, before anything is written, tables the layout cannot hold.

    Raises:
        DestinationError: a name the layout cannot hold (its separator, or none of its
            tables), or a versioned table where the layout stores no version (exit 5).
    """
    spec = layout.kv
    problems = []
    for t in tables:
        problem = spec.name_problem(t.name)
        if problem is None and t.versioned and spec.version == "none":
            problem = "is versioned, and the layout's kv.version is 'none'"
        if (
            problem is None
            and t.versioned
            and layout.metadata == "none"
            and t.name not in layout.versioned
        ):
            problem = (
                "is versioned, and the layout (metadata 'none') does not list it in `versioned`"
            )
        if problem is not None:
            problems.append(f"{t.name!r} ({problem})")
    if problems:
        raise DestinationError(
            f"{layout.describe()} cannot hold {', '.join(problems)}",
            hint="rename the table in the app first, leave it out with --tables, "
            "or correct the layout",
        )


class KvLayoutWriter(_Mapped, Writer):
    """Writes a key-value store in a layout through the engine's raw writer."""

    def __init__(self, raw: RawKvWriter, layout: Layout, create: bool):
        self._adopt(raw, layout)
        self.rawriter = raw
        spec = layout.kv
        try:
            present = raw.raw_namespaces()
            needed = [spec.namespace] if isinstance(spec, KvPrefix) else []
            meta = self._meta_place()
            if meta is not None:
                needed.append(meta[0])
            for ns in dict.fromkeys(needed):
                if ns == MAIN or ns in present:
                    continue
                if not create and ns != METADATA_NAMESPACE:
                    raise DestinationError(
                        f"{self.path}: no {_shown_ns(ns)}, which the layout names"
                    )
                raw.raw_create(ns)
        except BaseException:
            raw.close()
            raise

    def raw_metadata(self) -> dict[str, bytes]:
        return self._read_metadata()

    def list_tables(self) -> list[TableInfo]:
        names, _ = self._find(skip_foreign=True)
        return self._tables(self.raw_metadata(), names)

    def _meta_ops(self, metadata: Mapping[str, bytes | None]) -> list[Op]:
        place = self._meta_place()
        if place is None:
            return []
        ns, head, _ = place
        return [(ns, head + k.encode("utf-8"), v) for k, v in metadata.items()]

    def _side_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        """``metadata = "none"``: the entries go to the side file (:mod:`._side_metadata`)."""
        write_side_metadata(self.path, metadata, self.layout.describe())

    def _commit(
        self, ops: list[Op], metadata: Mapping[str, bytes | None] | None, durable: bool = False
    ) -> None:
        if metadata and self._meta_place() is not None:
            ops = ops + self._meta_ops(metadata)
        if ops:
            self.rawriter.raw_write(ops, durable=durable)
        if metadata and self._meta_place() is None:
            # After the records: a checkpoint never runs ahead of what is written (a
            # resume from an older one writes the same records again, as puts).
            self._side_metadata(metadata)

    def create_table(self, table: TableInfo) -> None:
        problem = self.layout.kv.name_problem(table.name)
        if problem:  # convert refuses it before writing (check_tables); upgrades land here
            raise DestinationError(
                f"{self.path}: table {table.name!r} {problem}, which {self.layout.describe()} "
                "cannot hold"
            )
        ns, _, _ = self._place(table.name)
        self.rawriter.raw_declare(ns, table.meta)
        if ns != MAIN and ns not in self.raw.raw_namespaces():
            self.rawriter.raw_create(ns)
        if self._meta_place() is not None:
            # Through the log, as the default writers' kinds: an empty table exists by its kind.
            self._commit(
                [], {META_KIND_PREFIX + table.name: table.kind.value.encode()}, durable=True
            )

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        ns, start, _ = self._place(table.name)
        spec = self.layout.kv
        if start:
            pairs = encode_batch(spec, table, batch)
            limit = self.rawriter.max_key_len  # the engine checked the keys, not the prefixes
            long = next((k for k, _ in pairs if limit is not None and len(k) > limit), None)
            if long is not None:
                raise DestinationError(
                    f"{self.path}: cannot store key {shown_key(long[len(start) :])} of table "
                    f"{table.name!r}: with its prefix it is {len(long)} bytes, over {limit}"
                )
        elif not table.versioned:
            pairs = batch  # type: ignore[assignment]  # plain records are the pairs
        elif spec.version == "prefix-u64be":
            pairs = encode_versioned(batch)
        else:
            pairs = encode_batch(spec, table, batch)
        inline = self._meta_place() is not None
        self.rawriter.raw_put_sorted(
            ns, pairs, self._meta_ops(metadata) if metadata and inline else []
        )
        if metadata and not inline:
            self._side_metadata(metadata)

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        self._commit([], metadata)

    def finish(self) -> None:
        self.rawriter.raw_finish()

    def sync(self) -> None:
        self.rawriter.raw_sync()

    def transaction(self) -> AbstractContextManager[None]:
        return self.rawriter.raw_transaction()

    def backup(self, path: Path) -> None:
        self.rawriter.raw_backup(path)

    def drop_table(self, name: str) -> None:
        # The kind goes first, as in the default layout; the records are one range.
        if self._meta_place() is not None:
            self.put_metadata({META_KIND_PREFIX + name: None})
        ns, start, end = self._place(name)
        if ns in self.raw.raw_namespaces():
            self.rawriter.raw_delete_range(ns, start, end)

    def close(self) -> None:
        raw = getattr(self, "raw", None)
        if raw is not None:
            raw.close()
