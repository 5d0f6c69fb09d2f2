"""Reading a store: pages through each table's range index, checked record by record.

Should the index ever answer out of key order, the table is read by
:func:`sorted_by_scan` instead (an external merge sort with bounded memory).
"""

from __future__ import annotations

import base64
import heapq
import itertools
import pickle
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import SourceError
from ...model import Batch, Record, TableInfo
from .. import snapshot
from ..base import Reader, take_batches
from .client import HELIX_FACTS, I64_MAX, U64, _Helix, database_of, label_of, private_copy
from .tables import _read_meta, _registry, discover_tables, scan_timeout, unbuilt_indexes

if TYPE_CHECKING:
    from .engine import HelixdbEngine

FIRST_PAGE = 100
MAX_PAGE = 1000
RUN_BYTES = 64 << 20  # records per sorted run of the fallback sort, in payload bytes


class OutOfOrder(SourceError):
    """The range index answered a page out of key order."""


PROPS = ["k", "v", "ver"]  # read in every table: a plain table's records must not have ver


def _record(r: dict[str, Any], versioned: bool) -> Record:
    """The record a node's properties hold; TypeError or ValueError saying what is not in the layout."""
    k, v = r.get("k"), r.get("v")
    if not isinstance(k, str) or not isinstance(v, str):
        raise TypeError("a node without string properties 'k' and 'v'")
    key = bytes.fromhex(k)
    if key.hex() != k:
        raise ValueError(f"k {k[:32]!r} is not lower-case hex")
    value = base64.b64decode(v, validate=True)
    if not versioned:
        if "ver" in r:
            raise ValueError(f"the record of key {k[:32]} has 'ver' in a plain table")
        return (key, value)
    ver = r.get("ver")
    if type(ver) is not int or not -(2**63) <= ver <= I64_MAX:
        raise ValueError(f"the record of key {k[:32]} has no 64-bit integer 'ver'")
    return (key, value, ver + U64 if ver < 0 else ver)


def _decode(path: Path, table: TableInfo, r: dict[str, Any]) -> Record:
    try:
        return _record(r, table.versioned)
    except (TypeError, ValueError) as exc:
        raise SourceError(f"{path}: table {table.name!r}: {exc}") from exc


def decode_rows(
    path: Path, rows: list[dict[str, Any]], last: str | None, table: TableInfo
) -> list[Record]:
    """Records of one page, refusing a page that is not strictly ascending after ``last``."""
    records = [_decode(path, table, r) for r in rows]
    prev = last
    for r in rows:
        k = r["k"]
        if prev is not None and not k > prev:
            raise OutOfOrder(
                f"{path}: HelixDB returned table {table.name!r} out of key order "
                f"({k[:32]!r} after {prev[:32]!r})"
            )
        prev = k
    return records


def sorted_by_scan(
    hx: _Helix,
    path: Path,
    table: TableInfo,
    after: bytes | None,
    max_records: int,
    max_bytes: int,
    run_bytes: int = RUN_BYTES,
) -> Iterator[Batch]:
    """The table in key order without the range index: an external merge sort.

    For a table whose index build a killed writer left unfinished, and the fallback
    for an index that ever answers out of order. The label is scanned in
    pages (``range(i, i + n)``), records after ``after`` are gathered into runs of at
    most ``run_bytes``, each run sorted and spilled to a private temporary file, and the
    runs merged; memory stays bounded by one run plus one record per run.
    """
    g = hx.helix.g
    label = label_of(table.name)
    with tempfile.TemporaryDirectory(prefix="statemigrate-helixdb-sort-") as tmp:
        runs: list[Path] = []

        def spill(buf: list[Record]) -> None:
            run = Path(tmp) / f"run{len(runs)}"
            with open(run, "wb") as f:
                for rec in sorted(buf, key=lambda r: r[0]):
                    pickle.dump(rec, f, protocol=pickle.HIGHEST_PROTOCOL)
            runs.append(run)

        def replay(run: Path) -> Iterator[Record]:
            with open(run, "rb") as f:
                while True:
                    try:
                        yield pickle.load(f)
                    except EOFError:
                        return

        buf: list[Record] = []
        size = start = 0
        while True:
            rows = hx.read(
                "o", g().n_with_label(label).range(start, start + MAX_PAGE).value_map(PROPS)
            )
            if not rows:
                break
            start += len(rows)
            for r in rows:
                rec = _decode(path, table, r)
                if after is not None and rec[0] <= after:
                    continue
                buf.append(rec)
                size += len(rec[0]) + len(rec[1])
                if size >= run_bytes:
                    spill(buf)
                    buf, size = [], 0
        if buf:
            spill(buf)

        def merged() -> Iterator[Record]:
            prev: bytes | None = None
            for rec in heapq.merge(*(replay(r) for r in runs), key=lambda r: r[0]):
                if prev is not None and rec[0] == prev:
                    raise SourceError(
                        f"{path}: table {table.name!r} holds key {prev[:32].hex()} twice"
                    )
                prev = rec[0]
                yield rec

        yield from take_batches(merged(), max_records, max_bytes)


def _pages(
    hx: _Helix, path: Path, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
) -> Iterator[list[Record]]:
    """Pages of a table's records through its range index (``k > last``), sized to the records."""
    helix = hx.helix
    label = label_of(table.name)
    last = after.hex() if after is not None else None
    size = max(1, min(max_records, FIRST_PAGE))
    while True:
        where = (
            helix.SourcePredicate.gte("k", "")
            if last is None
            else helix.SourcePredicate.gt("k", last)
        )
        rows = hx.read("o", helix.g().n_with_label_where(label, where).limit(size).value_map(PROPS))
        records = decode_rows(path, rows, last, table)
        if not records:
            return
        yield records
        if len(rows) < size:
            return
        last = records[-1][0].hex()
        avg = max(1, sum(len(r[0]) + len(r[1]) for r in records) // len(records))
        size = max(1, min(MAX_PAGE, max_records, max_bytes // avg))


def read_table(
    hx: _Helix,
    path: Path,
    table: TableInfo,
    after: bytes | None,
    max_records: int,
    max_bytes: int,
    *,
    indexed: bool = True,
) -> Iterator[Batch]:
    """Batches of a table through its range index, taken natively from its pages; a table
    whose index is not built (``indexed=False``) is sorted without it."""
    if not indexed:
        yield from sorted_by_scan(hx, path, table, after, max_records, max_bytes)
        return
    yielded = after
    try:
        rows = itertools.chain.from_iterable(_pages(hx, path, table, after, max_records, max_bytes))
        for batch in take_batches(rows, max_records, max_bytes):
            yielded = batch[-1][0]
            yield batch
    except OutOfOrder:
        # Never seen, but then the index cannot be paged by key: sort without it.
        yield from sorted_by_scan(hx, path, table, yielded, max_records, max_bytes)


class HelixdbReader(Reader):
    """Reads a private image of the store through ``Client.embedded_reader``.

    HelixDB's reader is not read-only on disk: it writes new manifest files (SlateDB
    records its snapshot as a checkpoint in the manifest). So it reads an image made of
    hard links in a private temporary directory, and the source is left byte-identical.
    Its tables are found in the store (:func:`discover_tables`), and a table read from
    its start is checked to yield every node of its label.
    """

    facts = HELIX_FACTS

    def __init__(self, engine: type[HelixdbEngine], path: Path, *, skip_foreign: bool = False):
        self.path = path
        self.hx: _Helix | None = None
        self.tmpdir: Path | None = None
        with self.opening():
            database = database_of(path)
            if database is None:
                raise SourceError(f"{path}: not a HelixDB store")
            try:
                self.tmpdir = snapshot.private_dir("helixdb")
                image = private_copy(database, self.tmpdir, path)
            except OSError as exc:
                raise SourceError(f"{path}: cannot make a private image to read ({exc})") from exc
            self.hx = _Helix(engine, image, reader=True, shown=path)
            meta = _read_meta(self.hx)
            self.snapshot_tables, self._counts = discover_tables(
                self.hx, path, meta, skip_foreign=skip_foreign, timeout=scan_timeout(image)
            )
            self.snapshot_metadata = meta
            self._registry = _registry(meta)
            # The image is private: a build not finished now was left by a killed writer.
            self._unindexed = unbuilt_indexes(self.hx, list(self._registry.values()))

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        assert self.hx is not None
        batches = read_table(
            self.hx,
            self.path,
            table,
            after,
            max_records,
            max_bytes,
            indexed=table.name not in self._unindexed,
        )
        nodes = self._counts.get(table.name)
        if after is not None or nodes is None:
            return batches
        return self._all_of(table, batches, nodes)

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        """The label's node count, exact (a read from the start is checked against it)."""
        nodes = self._counts.get(table.name)
        return None if nodes is None else (nodes, True)

    def _all_of(self, table: TableInfo, batches: Iterator[Batch], nodes: int) -> Iterator[Batch]:
        """The batches of a whole table, refusing a read that gives fewer or more records than
        the label has nodes (a label without its range index reads in id order, and pages
        of ``k > last`` then skip records; nodes without ``k`` are not in the index)."""
        read = 0
        for batch in batches:
            read += len(batch)
            yield batch
        if read != nodes:
            raise SourceError(
                f"{self.path}: table {table.name!r} has {nodes:,} nodes but its key index gave "
                f"{read:,} records: the range index on 'k' is missing or incomplete, "
                "or nodes lack 'k'"
            )

    def _decode(
        self, rows: list[dict[str, Any]], last: str | None, table: TableInfo
    ) -> list[Record]:
        return decode_rows(self.path, rows, last, table)

    def close(self) -> None:
        try:
            if self.hx is not None:
                hx, self.hx = self.hx, None
                hx.close()
        finally:
            snapshot.remove(self.tmpdir)
            self.tmpdir = None
