"""LMDB in an app's own ``[kv]`` prefix layout: every table in one named database.

Stored key = the table's prefix ‖ key (:mod:`.._kv_layout`), the version where the
layout's ``kv.version`` puts it. A table is one cursor range of the namespace, read in
the reader's one transaction; the tables are found by skipping from one prefix to the
next. The metadata stays in the ``__statemigrate__`` named database as in the default
layout, with a ``kind:<table>`` entry for every table written (an empty table's only
trace). Records of the namespace that no table claims and other named databases are
refused (exit 4) unless ``skip_foreign_tables``. The namespace is a named database:
LMDB's unnamed database also lists the named ones, so a layout there is not
implemented (refused with exit 2).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ...errors import DestinationError, SourceError
from ...layout import Layout
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
    shown_key,
)
from ..access import take_batches
from . import LmdbEngine, LmdbReader, LmdbWriter


def _records(
    layout: Layout, table: TableInfo, cur: Any, after: bytes | None, where: str
) -> Iterator[Any]:
    """The table's records from a cursor of the namespace, strictly after ``after``."""
    prefix = layout.kv.table_prefix(table.name)
    start = prefix + (after or b"")
    if not cur.set_range(start):
        return iter(())
    if after is not None and cur.key() == start and not cur.next():
        return iter(())
    return decode_records(layout.kv, table, cur.iternext(), where)


def _walk(layout: Layout, cur: Any, stop_at_foreign: bool) -> Found:
    """The tables a cursor over the namespace shows (:func:`.._kv_layout.find_tables`)."""

    def seek(key: bytes) -> bytes | None:
        return bytes(cur.key()) if cur.set_range(key) else None

    def count(start: bytes, end: bytes | None) -> int:
        n = 0
        more = cur.set_range(start)
        while more and (end is None or cur.key() < end):
            n += 1
            more = cur.next()
        return n

    return find_tables(layout.kv, seek, count, stop_at_foreign)


class LayoutLmdbReader(LmdbReader):
    """A read-only LMDB store in a prefix layout (one read transaction, as the default)."""

    def __init__(self, engine: type[LmdbEngine], path: Path, layout: Layout, skip_foreign: bool):
        self.layout = layout
        self.skipped_records = 0
        super().__init__(engine, path)
        spec = layout.kv
        others = [n for n in self.dbs if n not in (spec.namespace, METADATA_TABLE)]
        if others and not skip_foreign:
            self.close()
            raise SourceError(
                f"{path}: named databases not in the layout: {', '.join(map(repr, others))}",
                hint="--skip-foreign-tables leaves them out",
            )
        meta = self.snapshot_metadata
        if spec.namespace not in self.dbs:
            if not any(k.startswith(META_KIND_PREFIX) for k in meta):
                self.close()
                raise SourceError(
                    f"{path}: no named database {spec.namespace!r}, which {layout.describe()} names"
                )
            self.snapshot_tables = layout_tables(layout, meta, [])
            return
        found = _walk(layout, self.txn.cursor(self.dbs[spec.namespace]), not skip_foreign)
        if found.foreign and not skip_foreign:
            self.close()
            raise SourceError(
                f"{path}: named database {spec.namespace!r} holds key "
                f"{shown_key(found.first_foreign or b'')}, which no table of the layout claims "
                f"(prefix {spec.head + '{name}' + spec.separator!r})",
                hint="--skip-foreign-tables leaves such records out; or correct the layout",
            )
        self.skipped_records = found.foreign
        self.snapshot_tables = layout_tables(layout, meta, found.names)

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        cur = self.txn.cursor(self.dbs[self.layout.kv.namespace])
        records = _records(self.layout, table, cur, after, f"{self.path} table {table.name!r}")
        for batch in take_batches(records, max_records, max_bytes):
            self._check_unchanged()
            yield batch

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        return None  # the namespace's count holds every table's records

    def native_digests(self, tables: list[TableInfo]) -> list[tuple[int, int, int]] | None:
        return None  # the walk reads one named database per table, not prefixes


class LayoutLmdbWriter(LmdbWriter):
    """Writes the layout's named database; the metadata and transactions as the default."""

    def __init__(self, engine: type[LmdbEngine], path: Path, create: bool, layout: Layout):
        super().__init__(engine, path, create)
        self.layout = layout
        self.engine_max_key = engine.capabilities.max_key_len or 511
        ns = layout.kv.namespace
        if ns not in self.dbs:
            if not create:
                self.close()
                raise DestinationError(f"{path}: no named database {ns!r}, which the layout names")

            def work(txn: Any) -> None:
                self.dbs[ns] = self.env.open_db(ns.encode("utf-8"), txn=txn)

            self._tx(work)

    def _ns(self) -> Any:
        return self.dbs[self.layout.kv.namespace]

    def _read(self, fn: Callable[[Any], Any]) -> Any:
        """``fn(txn)`` in the open transaction, or in a read transaction of its own."""
        if self._outer is not None:
            return fn(self._outer)
        with self.env.begin(buffers=False) as txn:
            return fn(txn)

    def list_tables(self) -> list[TableInfo]:
        found = self._read(lambda txn: _walk(self.layout, txn.cursor(self._ns()), False))
        return layout_tables(self.layout, self.raw_metadata(), found.names)

    def create_table(self, table: TableInfo) -> None:
        problem = self.layout.kv.name_problem(table.name)
        if problem:  # convert refuses it before writing (check_tables); upgrades land here
            raise DestinationError(
                f"{self.path}: table {table.name!r} {problem}, which {self.layout.describe()} "
                "cannot hold"
            )
        kind = {META_KIND_PREFIX + table.name: table.kind.value.encode()}
        self._tx(lambda txn: self._put_meta(txn, kind))

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        pairs = encode_batch(self.layout.kv, table, batch)
        cut = len(self.layout.kv.table_prefix(table.name))
        long = next((k for k, _ in pairs if len(k) > self.engine_max_key), None)
        if long is not None:
            raise DestinationError(
                f"{self.path}: LMDB cannot store key {shown_key(long[cut:])} of table "
                f"{table.name!r}: with its prefix it is {len(long)} bytes, over "
                f"{self.engine_max_key}"
            )

        def work(txn: Any) -> None:
            cur = txn.cursor(self._ns())
            # Appending is the fast path when the batch lands after the namespace's last
            # key; tables share the namespace, so it often does not. Neither overwrites.
            append = not pairs or not cur.last() or cur.key() < pairs[0][0]
            _consumed, added = cur.putmulti(pairs, append=append, overwrite=False)
            if added != len(pairs):
                raise DestinationError(
                    f"{self.path}: table {table.name!r}: {len(pairs) - added} record(s) out of key "
                    "order or already present; nothing of this batch was written"
                )
            if metadata:
                self._put_meta(txn, metadata)

        self._tx(work)

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        own = self._outer is None
        txn = self.env.begin(buffers=False) if own else self._outer
        try:
            where = f"{self.path} table {table.name!r}"
            records = _records(self.layout, table, txn.cursor(self._ns()), after, where)
            yield from take_batches(records, max_records, max_bytes)
        finally:
            if own:
                txn.abort()

    def drop_table(self, name: str) -> None:
        prefix = self.layout.kv.table_prefix(name)

        def work(txn: Any) -> None:
            cur = txn.cursor(self._ns())
            more = cur.set_range(prefix)
            while more and cur.key().startswith(prefix):
                more = cur.delete()  # moves to the next record
            txn.delete((META_KIND_PREFIX + name).encode(), db=self.dbs[METADATA_TABLE])

        self._tx(work)


def guess_layout(engine: type[LmdbEngine], path: Path) -> str:
    """A ``[kv]`` prefix layout guessed from an existing LMDB store, as TOML with comments
    saying what was seen and what cannot be (:func:`.._kv_layout.guess_text`).

    Raises:
        SourceError: no named database holds keys that split into table prefixes.
    """
    with LmdbReader(engine, path) as reader:
        names = [n for n in reader.dbs if n != METADATA_TABLE]
        for ns in names:
            db = reader.dbs[ns]
            cur = reader.txn.cursor(db)
            first = bytes(cur.key()) if cur.first() else b""
            last = bytes(cur.key()) if cur.last() else b""
            if not first:
                continue

            def seeker(db: Any = db) -> Callable[[bytes], bytes | None]:
                c = reader.txn.cursor(db)
                return lambda key: bytes(c.key()) if c.set_range(key) else None

            guess = guess_prefix(ns, first, last, seeker)
            if guess is not None:
                break
        else:
            raise SourceError(
                f"{path}: no named database holds keys that split into table prefixes "
                f"(a name, then one of {', '.join(map(repr, SEPARATORS))}, in every key)",
                hint="write the layout file by hand (README: Your app's own layout)",
            )

        def values(prefix: bytes, db: Any = db) -> Iterator[bytes]:
            c = reader.txn.cursor(db)
            more = c.set_range(prefix)
            while more and c.key().startswith(prefix):
                yield bytes(c.value())
                more = c.next()

        roomy = may_be_versioned(guess, values)
    others = [f"named database {n!r}" for n in names if n != guess.spec.namespace]
    return guess_text("lmdb", path.name, guess, roomy, others)
