"""RocksDB in an app's own ``[kv]`` prefix layout: every table in one column family.

Stored key = the table's prefix ‖ key (:mod:`.._kv_layout`), the version where the
layout's ``kv.version`` puts it. A table is a range scan of the namespace from
``prefix ‖ after`` to the prefix's end; the tables are found by skipping from one
prefix to the next. The metadata stays in the ``__statemigrate__`` column family as in
the default layout; the writer records every table's kind there (``kind:<table>``,
plain too), which is how an empty table exists. Records of the namespace that no table
of the layout claims, and column families other than the namespace and the metadata,
are refused (exit 4) unless ``skip_foreign_tables``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from functools import partial
from pathlib import Path
from typing import Any

from ...errors import DestinationError, SourceError
from ...layout import KvPrefix, Layout
from ...model import META_KIND_PREFIX, METADATA_TABLE, Batch, TableInfo
from .._kv_layout import (
    SEPARATORS,
    Found,
    decode_records,
    encode_batch,
    find_tables,
    guess_prefix,
    guess_text,
    layout_tables,
    may_be_versioned,
    prefix_end,
    shown_key,
)
from .._rocksdb_scan import checked_read_options
from ..access import StoreAccess, take_batches
from . import DEFAULT_CF, RocksdbEngine, RocksdbReader, _options
from .writer import RocksdbWriter


def _ranged_options(upper: bytes | None) -> Any:
    ro = checked_read_options()
    if upper is not None:
        ro.set_iterate_upper_bound(upper)
    return ro


class _LayoutScans(StoreAccess):
    """The reads both sides share: a table is one range of the namespace."""

    layout: Layout

    def _ns(self) -> Any:
        """The namespace's column family (each side opens it its way)."""
        raise NotImplementedError

    def _where(self, table: TableInfo) -> str:
        return f"{self.path} table {table.name!r}"

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        spec = self.layout.kv
        prefix = spec.table_prefix(table.name)
        start = prefix + (after or b"")
        snapshot = self._ns().snapshot()
        try:
            # The options (and their bound) are kept alive while the scan runs: rocksdict
            # does not keep the bound alive itself. Given a temporary, this scan stopped
            # early in 20 runs of 20 (caught by confirm_end: exit 4), none of 20 kept.
            ro = _ranged_options(prefix_end(prefix))
            items = snapshot.items(from_key=start, read_opt=ro)
            if after is not None:
                items = (p for p in items if p[0] != start)  # from_key starts at the key
            records = decode_records(spec, table, items, self._where(table))
            yield from take_batches(records, max_records, max_bytes)
            del items
        finally:
            del snapshot

    def confirm_end(self, table: TableInfo, after: bytes | None, last: bytes | None) -> None:
        """As the default layout's: a damaged block ends rocksdict's scan silently."""
        self._confirm_range(
            self.layout.kv.table_prefix(table.name), after, last, self._where(table)
        )

    def _inline_metadata(self) -> dict[str, bytes]:
        """The metadata kept in the namespace (``kv.metadata``), its end confirmed."""
        prefix = self.layout.kv.metadata_prefix()
        where = f"{self.path} metadata"
        with self.errors(where=where, failed="{where}: read failed ({text})"):
            ro = _ranged_options(prefix_end(prefix))  # kept alive while the scan runs (see scan)
            pairs = [
                (bytes(k), bytes(v)) for k, v in self._ns().items(from_key=prefix, read_opt=ro)
            ]
            self._confirm_range(prefix, None, pairs[-1][0][len(prefix) :] if pairs else None, where)
        try:
            return {k[len(prefix) :].decode("utf-8"): v for k, v in pairs}
        except UnicodeDecodeError as exc:
            raise SourceError(f"{where}: a key is not UTF-8 ({exc})") from exc

    def _confirm_range(
        self, prefix: bytes, after: bytes | None, last: bytes | None, where: str
    ) -> None:
        with self.errors(where=where, failed="{where}: the scan stopped early ({text})"):
            it = self._ns().iter(checked_read_options())
            try:
                if last is not None:
                    it.seek(prefix + last)
                    if not (it.valid() and it.key() == prefix + last):
                        it.status()
                        raise SourceError(f"{where}: the last key read is gone (damaged store)")
                    it.next()
                else:
                    it.seek(prefix + (after or b""))
                    if after is not None and it.valid() and it.key() == prefix + after:
                        it.next()
                early = it.valid() and it.key().startswith(prefix)
                it.status()
                if early:
                    raise SourceError(f"{where}: the scan stopped before the last record")
            finally:
                del it

    def _walk(self, stop_at_foreign: bool) -> Found:
        """The tables the namespace's keys show (:func:`.._kv_layout.find_tables`)."""
        where = f"{self.path} column family {self.layout.kv.namespace!r}"
        with self.errors(where=where, failed="{where}: read failed ({text})"):
            it = self._ns().iter(checked_read_options())  # freed when the walk returns

            def seek(key: bytes) -> bytes | None:
                it.seek(key)
                if it.valid():
                    return bytes(it.key())
                it.status()
                return None

            def count(start: bytes, end: bytes | None) -> int:
                n = 0
                ro = _ranged_options(end)  # kept alive while the scan runs (see scan)
                for _ in self._ns().keys(from_key=start, read_opt=ro):
                    n += 1
                return n

            return find_tables(self.layout.kv, seek, count, stop_at_foreign)


def _refuse_foreign(path: Path, spec: KvPrefix, found: Found) -> None:
    key = found.first_foreign or b""
    raise SourceError(
        f"{path}: column family {spec.namespace!r} holds key {shown_key(key)}, which no table "
        f"of the layout claims (prefix {spec.head + '{name}' + spec.separator!r})",
        hint="--skip-foreign-tables leaves such records out; or correct the layout",
    )


class LayoutRocksdbReader(_LayoutScans, RocksdbReader):
    """A read-only RocksDB store in a prefix layout (one snapshot, as the default reader)."""

    def __init__(self, engine: type[RocksdbEngine], path: Path, layout: Layout, skip_foreign: bool):
        self.layout = layout
        self.skip_foreign = skip_foreign
        self.skipped_records = 0
        super().__init__(engine, path)

    def _ns(self) -> Any:
        return self._cf(self.layout.kv.namespace)

    def _read_meta(self, names: list[str]) -> dict[str, bytes]:
        if not self.layout.kv.metadata_inline:
            return super()._read_meta(names)
        return self._inline_metadata() if self.layout.kv.namespace in names else {}

    def _list(self, names: list[str]) -> list[TableInfo]:
        spec = self.layout.kv
        meta = self.snapshot_metadata
        others = [n for n in names if n not in (spec.namespace, METADATA_TABLE, DEFAULT_CF)]
        if DEFAULT_CF in names and spec.namespace != DEFAULT_CF and not self._is_empty(DEFAULT_CF):
            others.insert(0, DEFAULT_CF)
        if others and not self.skip_foreign:
            raise SourceError(
                f"{self.path}: column families not in the layout: {', '.join(map(repr, others))}",
                hint="--skip-foreign-tables leaves them out",
            )
        if spec.namespace not in names:
            if not any(k.startswith(META_KIND_PREFIX) for k in meta):
                raise SourceError(
                    f"{self.path}: no column family {spec.namespace!r}, "
                    f"which {self.layout.describe()} names"
                )
            return layout_tables(self.layout, meta, [])
        found = self._walk(stop_at_foreign=not self.skip_foreign)
        if found.foreign and not self.skip_foreign:
            _refuse_foreign(self.path, spec, found)
        self.skipped_records = found.foreign
        return layout_tables(self.layout, meta, found.names)

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        return None  # the namespace's estimate counts every table's keys


class LayoutRocksdbWriter(_LayoutScans, RocksdbWriter):
    """Writes the layout's namespace; the metadata as the default writer."""

    def __init__(
        self,
        engine: type[RocksdbEngine],
        path: Path,
        create: bool,
        format_version: int,
        layout: Layout,
    ):
        self.layout = layout
        super().__init__(engine, path, create, format_version)
        ns = layout.kv.namespace
        if ns != DEFAULT_CF and ns not in self._names():
            if not create:
                self.close()
                raise DestinationError(f"{path}: no column family {ns!r}, which the layout names")
            with self.errors(failed=f"{{path}}: cannot create column family {ns!r} ({{text}})"):
                self.db.create_column_family(ns, self.opts)

    def _ns(self) -> Any:
        return self._cf(self.layout.kv.namespace)

    def _metadata_family(self) -> bool:
        return not self.layout.kv.metadata_inline

    def _meta_items(self) -> list[tuple[bytes, bytes]]:
        if not self.layout.kv.metadata_inline:
            return super()._meta_items()
        if self.layout.kv.namespace not in self._names():
            return []  # created just after the metadata is first read
        return [(k.encode("utf-8"), v) for k, v in self._inline_metadata().items()]

    def list_tables(self) -> list[TableInfo]:
        return layout_tables(
            self.layout, self.raw_metadata(), self._walk(stop_at_foreign=False).names
        )

    def create_table(self, table: TableInfo) -> None:
        problem = self.layout.kv.name_problem(table.name)
        if problem:  # convert refuses it before writing (check_tables); upgrades land here
            raise DestinationError(
                f"{self.path}: table {table.name!r} {problem}, which {self.layout.describe()} "
                "cannot hold"
            )
        # Through the WAL, as the default writer's kinds: an empty table exists by its kind.
        self._write(None, [], {META_KIND_PREFIX + table.name: table.kind.value.encode()}, wal=True)

    def _write(
        self,
        table: TableInfo | None,
        batch: Batch,
        metadata: Mapping[str, bytes | None] | None,
        wal: bool = False,
    ) -> None:
        wb = self.rd.WriteBatch(raw_mode=True)
        if table is not None and batch:
            ns = self.layout.kv.namespace
            handle = self._handle(ns) if ns != DEFAULT_CF else None
            for k, v in encode_batch(self.layout.kv, table, batch):
                if handle is None:
                    wb.put(k, v)
                else:
                    wb.put(k, v, handle)
        if metadata:
            spec = self.layout.kv
            if not spec.metadata_inline:
                meta, head = self._handle(METADATA_TABLE), b""
            else:
                meta = None if spec.namespace == DEFAULT_CF else self._handle(spec.namespace)
                head = spec.metadata_prefix()
            for key, value in metadata.items():
                stored = head + key.encode("utf-8")
                if value is None:
                    wb.delete(stored) if meta is None else wb.delete(stored, meta)
                else:
                    wb.put(stored, value) if meta is None else wb.put(stored, value, meta)
        with self.errors(failed="{path}: write failed ({text})"):
            self.db.write(wb, self.wal_opts if wal else self.write_opts)

    def drop_table(self, name: str) -> None:
        # The kind goes first, as in the default layout; the records are one range.
        self.put_metadata({META_KIND_PREFIX + name: None})
        spec = self.layout.kv
        start = spec.table_prefix(name)
        end = prefix_end(start)
        assert end is not None  # a UTF-8 separator never ends in 0xff
        wb = self.rd.WriteBatch(raw_mode=True)
        if spec.namespace == DEFAULT_CF:
            wb.delete_range(start, end)
        else:
            wb.delete_range(start, end, self._handle(spec.namespace))
        with self.errors(failed=f"{{path}}: cannot drop table {name!r} ({{text}})"):
            self.db.write(wb, self.wal_opts)


# --- layout init -------------------------------------------------------------------------


def _first_and_last(view: Any) -> tuple[bytes, bytes]:
    it = view.iter(checked_read_options())  # freed when this returns
    it.seek_to_first()
    first = bytes(it.key()) if it.valid() else b""
    it.seek_to_last()
    last = bytes(it.key()) if it.valid() else b""
    return first, last


def _seeker(view: Any) -> Callable[[bytes], bytes | None]:
    it = view.iter(checked_read_options())  # freed with the function

    def seek(key: bytes) -> bytes | None:
        it.seek(key)
        return bytes(it.key()) if it.valid() else None

    return seek


def _values(view: Any, prefix: bytes) -> Iterator[bytes]:
    ro = _ranged_options(prefix_end(prefix))  # kept alive while the scan runs (see scan)
    yield from view.values(from_key=prefix, read_opt=ro)


def guess_layout(engine: type[RocksdbEngine], path: Path) -> str:
    """A ``[kv]`` prefix layout guessed from an existing RocksDB store, as TOML with
    comments saying what was seen and what cannot be (:func:`.._kv_layout.guess_text`).

    Raises:
        SourceError: no column family holds keys that split into table prefixes.
    """
    with RocksdbReader(engine, path) as reader:
        assert reader.shadow is not None
        listed = engine.require_driver().Rdict.list_cf(
            str(reader.shadow), _options(engine.require_driver())
        )
        names = [n for n in listed if n != METADATA_TABLE]
        candidates = [n for n in names if not reader._is_empty(n)]
        for ns in sorted(candidates, key=lambda n: n != DEFAULT_CF):
            view = reader._cf(ns)
            guess = guess_prefix(ns, *_first_and_last(view), partial(_seeker, view))
            if guess is not None:
                break
        else:
            raise SourceError(
                f"{path}: no column family holds keys that split into table prefixes "
                f"(a name, then one of {', '.join(map(repr, SEPARATORS))}, in every key)",
                hint="write the layout file by hand (README: Your app's own layout)",
            )
        roomy = may_be_versioned(guess, lambda prefix: _values(view, prefix))
    others = [n for n in names if n != guess.spec.namespace and n in candidates]
    return guess_text("rocksdb", path.name, guess, roomy, [f"column family {n!r}" for n in others])
