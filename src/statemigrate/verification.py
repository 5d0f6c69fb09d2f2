"""Verification: two stores on any engines hold the same state, or one matches a manifest.

Both stores stream in key order per table and are merged; equal runs of records are
compared a slice at a time (a C-level list comparison), and only a differing region
falls back to a record-by-record merge that lists the differences.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .digest import Digest, store_digest
from .engines.base import Reader
from .errors import UsageError
from .fsutil import store_size
from .model import Record, TableInfo, TableKind, check_source_tables, facts_differ
from .prefetch import prefetch
from .progress import Progress, run_total, table_total
from .stores.interrupted import refuse_interrupted
from .stores.opening import Source
from .stores.walk import digest_checked, digest_store

MANIFEST_FORMAT = 1


@dataclass
class Difference:
    """One differing record: ``missing_in`` names the side without it, or ``value``/``version``."""

    table: str
    key: bytes
    what: str  # "missing in A", "missing in B", "value differs", "version differs", "table kind differs"

    def to_json(self) -> dict[str, Any]:
        return {"table": self.table, "key": self.key.hex(), "difference": self.what}

    def line(self) -> str:
        key = self.key.hex() if self.key else "(empty key)"
        return f"{self.table}: key {key}: {self.what}"


@dataclass
class VerifyReport:
    """The outcome of :func:`verify` or :func:`verify_manifest`."""

    a: str
    b: str
    equal: bool = True
    differences: list[Difference] = field(default_factory=list)
    difference_count: int = 0
    tables: dict[str, dict[str, Any]] = field(default_factory=dict)
    digest_a: str = ""
    digest_b: str = ""
    # Records found the same on both sides (against a manifest: the records of the
    # tables whose digests match it).
    equal_records: int = 0

    def to_json(self) -> dict[str, Any]:
        return {
            "a": self.a,
            "b": self.b,
            "equal": self.equal,
            "difference_count": self.difference_count,
            "equal_records": self.equal_records,
            "differences": [d.to_json() for d in self.differences],
            "tables": self.tables,
            "digest_a": self.digest_a,
            "digest_b": self.digest_b,
        }


@dataclass
class ChecksumReport:
    """Per-table digests and the store digest (a manifest when saved as JSON)."""

    store: str
    engine: str
    tables: list[dict[str, Any]]
    digest: str

    def to_json(self) -> dict[str, Any]:
        return {
            "statemigrate_manifest": MANIFEST_FORMAT,
            "store": self.store,
            "engine": self.engine,
            "tables": self.tables,
            "digest": self.digest,
        }


def digest_of(src: Source, progress: Progress | None) -> ChecksumReport:
    """Every table's digest and the store's (:func:`statemigrate.api.checksum`'s work)."""
    eng, path = src.engine, src.path
    with src.open() as reader:
        tables = reader.tables()
        refuse_interrupted(path, reader.metadata())  # a half-switched upgrade has no digest
        check_source_tables(tables, reader.metadata(), str(path))
        if progress:
            progress.expect(run_total(table_total(progress, reader, t) for t in tables))
        digests = digest_store(reader, tables, str(path), progress)
    rows = [{"table": t.name, "kind": t.kind.value, **digests[t.name].to_json()} for t in tables]
    return ChecksumReport(
        str(path), eng.name, rows, store_digest((t.name, t.kind, digests[t.name]) for t in tables)
    )


class _Stream:
    """A table's records in key order, buffered a batch at a time, digested as read.

    ``progress``, when given, is advanced by each batch as the merge takes it (on the
    caller's thread, not the read-ahead one).
    """

    def __init__(
        self,
        reader: Reader,
        table: TableInfo | None,
        where: str,
        progress: Progress | None = None,
    ):
        batches = self._batches(reader, table, where)
        # Both sides read (and digest) ahead on their own threads where the reader allows.
        self.batches = (
            prefetch(batches) if table is not None and reader.threadsafe_reads else batches
        )
        self.progress = progress
        self.buf: list[Record] = []
        self.pos = 0
        self.digest = Digest()

    def _batches(
        self, reader: Reader, table: TableInfo | None, where: str
    ) -> Iterator[tuple[list[Record], int]]:
        if table is None:
            return
        last = None
        for batch in reader.read_batches(table):
            d, nbytes = digest_checked(batch, table, last, where)
            self.digest = self.digest + d
            last = batch[-1][0]
            yield batch, nbytes

    def fill(self) -> bool:
        if self.pos < len(self.buf):
            return True
        for batch, nbytes in self.batches:
            if self.progress is not None:
                self.progress.advance(len(batch), nbytes)
            if batch:
                self.buf, self.pos = batch, 0
                return True
        self.buf, self.pos = [], 0
        return False

    def chunk(self) -> list[Record]:
        return self.buf[self.pos :] if self.pos else self.buf


def _merge(
    table: str, a: _Stream, b: _Stream, report: VerifyReport, limit: int
) -> tuple[Digest, Digest]:
    """Merge two streams, noting differences; returns both tables' digests."""

    def note(key: bytes, what: str) -> None:
        report.difference_count += 1
        if len(report.differences) < limit:
            report.differences.append(Difference(table, key, what))

    while True:
        ha, hb = a.fill(), b.fill()
        if not ha and not hb:
            break
        if ha and hb:
            ca, cb = a.chunk(), b.chunk()
            n = min(len(ca), len(cb))
            # Fast path: a whole run equal on both sides, compared in C.
            if ca[n - 1][0] == cb[n - 1][0] and (ca if n == len(ca) else ca[:n]) == (
                cb if n == len(cb) else cb[:n]
            ):
                a.pos += n
                b.pos += n
                report.equal_records += n
                continue
            ra, rb = ca[0], cb[0]
            if ra[0] == rb[0]:
                if ra[1] != rb[1]:
                    note(ra[0], "value differs")
                elif ra[2:] != rb[2:]:
                    note(ra[0], "version differs")
                else:
                    report.equal_records += 1
                a.pos += 1
                b.pos += 1
            elif ra[0] < rb[0]:
                note(ra[0], "missing in B")
                a.pos += 1
            else:
                note(rb[0], "missing in A")
                b.pos += 1
        else:
            side, other = (a, "missing in B") if ha else (b, "missing in A")
            for r in side.chunk():
                note(r[0], other)
            side.pos = len(side.buf)
    return a.digest, b.digest


def _drain(a: _Stream, b: _Stream) -> tuple[Digest, Digest]:
    """Read both streams to their ends (one of them is a table the other side lacks:
    one difference, not one per record); returns both digests."""
    for side in (a, b):
        while side.fill():
            side.pos = len(side.buf)
    return a.digest, b.digest


def _walked(
    ra: Reader, ta: list[TableInfo], rb: Reader, tb: list[TableInfo]
) -> dict[str, tuple[Digest, Digest, int]]:
    """Both sides' digests of their common tables (and A's payload bytes), where both
    engines walk their files natively (:meth:`Reader.native_digests`: LMDB, redb), the
    two walks side by side without the GIL; else nothing.

    A table whose two digests are equal holds the same records on both sides (the
    digest a convert is verified by), so only the others are merged record by record
    to list what differs.
    """
    if not (_walks(ra) and _walks(rb)):
        return {}
    with ThreadPoolExecutor(max_workers=1) as pool:
        other = pool.submit(rb.native_digests, tb)
        mine = ra.native_digests(ta)
        theirs = other.result()
    if mine is None or theirs is None:
        return {}
    da = {t.name: (Digest(c, s), n) for t, (c, s, n) in zip(ta, mine, strict=True)}
    db = {t.name: Digest(c, s) for t, (c, s, _n) in zip(tb, theirs, strict=True)}
    return {name: (da[name][0], db[name], da[name][1]) for name in da.keys() & db.keys()}


def _walks(reader: Reader) -> bool:
    """Whether the reader's engine has a native walk (it may still decline a store)."""
    return type(reader).native_digests is not Reader.native_digests


# Below this many bytes on disk (both stores) a second process costs more than it saves:
# an interpreter's start and the imports of a driver are about 0.3 s.
BESIDE_MIN_BYTES = 32 << 20


def _digested_beside(
    ra: Reader,
    ta: list[TableInfo],
    b: Source,
    tb: list[TableInfo],
    where: str,
    progress: Progress | None,
) -> dict[str, tuple[Digest, Digest, int]] | None:
    """Both sides' digests of their common tables, B's walked in a worker process while
    this one walks A's (:func:`digest_store`): two drivers that hold the GIL then scan
    at once. A's walk advances ``progress``.

    The worker is this interpreter run again (``python -c``), told the store as JSON on
    its stdin; it answers the digests as one JSON line. No ``multiprocessing``: its
    spawn imports the caller's ``__main__`` again, which an app embedding the library
    or a frozen build cannot allow.

    Returns:
        name -> (A's digest, B's digest, A's payload bytes), or None when the worker
        could not answer (B is then read in this process, where its error, if any, is
        raised).
    """
    try:
        told = json.dumps(
            {
                "engine": b.engine.name,
                "path": str(b.path),
                "options": dict(b.options) if b.options is not None else None,
                "tables": [t.name for t in tb],
            }
        )
    except (TypeError, ValueError):
        return None  # options that are not plain data: this process reads B itself
    worker = subprocess.Popen(
        [sys.executable, "-c", "from statemigrate.verification import digest_side; digest_side()"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
    )
    answer = None
    try:
        assert worker.stdin is not None and worker.stdout is not None
        worker.stdin.write(told.encode())
        worker.stdin.close()
        sizes: dict[str, int] = {}
        da = digest_store(ra, ta, where, progress, sizes=sizes)
        lines = worker.stdout.read().splitlines()
        worker.wait()
        if worker.returncode == 0 and lines:
            answer = json.loads(lines[-1])
    finally:
        if worker.poll() is None:
            worker.kill()  # A failed or was interrupted: B's walk is not wanted
            worker.wait()
    if not isinstance(answer, dict) or "digests" not in answer:
        return None
    db = {name: Digest(c, int(sm, 16)) for name, (c, sm) in answer["digests"].items()}
    return {n: (da[n], db[n], sizes.get(n, 0)) for n in da.keys() & db.keys()}


def digest_side() -> None:
    """The worker of :func:`_digested_beside`: the store named on stdin (JSON), each of
    the named tables' digests printed as one JSON line (``{"digests": {name: [count,
    sum]}}``), or ``{"error": ...}`` and exit 1."""
    from .registry import get_engine

    told = json.loads(sys.stdin.read())
    try:
        src = Source(get_engine(told["engine"]), Path(told["path"]), told["options"])
        with src.open() as reader:
            names = set(told["tables"])
            tables = [t for t in reader.tables() if t.name in names]
            digests = digest_store(reader, tables, told["path"])
    except Exception as exc:  # noqa: BLE001 - told to the parent, which reads B itself
        print(json.dumps({"error": f"{type(exc).__name__}: {exc}"}))
        sys.exit(1)
    print(json.dumps({"digests": {n: [d.count, f"{d.sum:x}"] for n, d in digests.items()}}))


def _beside_worth_it(a: Source, b: Source) -> bool:
    if getattr(sys, "frozen", False):
        return False  # a standalone build's executable is not a Python to run -c
    try:
        return store_size(a.path) + store_size(b.path) >= BESIDE_MIN_BYTES
    except OSError:
        return False


def compare(
    a: Source, b: Source, limit: int, progress: Progress | None, workers: int = 1
) -> VerifyReport:
    """Two stores compared record by record (:func:`statemigrate.api.verify`'s work).

    Where both engines walk their files natively, both walks run at once on threads;
    else, with ``workers`` >= 2 and stores large enough to be worth it, B's tables are
    digested in a worker process while A's are here. A table whose two digests are
    equal holds the same records; only the others are merged record by record.
    """
    pa, pb = a.path, b.path
    report = VerifyReport(str(pa), str(pb))
    with a.open() as ra, b.open() as rb:
        ta = {t.name: t for t in ra.tables()}
        tb = {t.name: t for t in rb.tables()}
        # Before the tables' names: a private table of a running upgrade is its, busy.
        refuse_interrupted(pa, ra.metadata())
        refuse_interrupted(pb, rb.metadata())
        check_source_tables(ta.values(), ra.metadata(), str(pa))
        check_source_tables(tb.values(), rb.metadata(), str(pb))
        sums_a, sums_b = [], []
        if progress:
            progress.phase("verifying")
            # Progress follows A's tables, and B's for a table only B has.
            counts = [table_total(progress, ra, t) for t in ta.values()]
            counts += [table_total(progress, rb, t) for n, t in tb.items() if n not in ta]
            progress.expect(run_total(counts))
        walked = _walked(ra, list(ta.values()), rb, list(tb.values()))
        counted = False  # whether A's walk already advanced the progress
        if not walked and workers >= 2 and _beside_worth_it(a, b):
            beside = _digested_beside(
                ra, list(ta.values()), b, list(tb.values()), str(pa), progress
            )
            walked, counted = beside or {}, beside is not None
        for name in sorted(set(ta) | set(tb), key=lambda n: n.encode()):
            xa, xb = ta.get(name), tb.get(name)
            facts = facts_differ(xa, xb)
            if name in walked and xa is not None and xb is not None:
                da, db, nbytes = walked[name]
                if da == db and xa.kind is xb.kind and facts is None:  # equal: nothing to list
                    if progress and not counted:
                        progress.start_table(name, da.count)
                        progress.advance(da.count, nbytes)
                        progress.end_table()
                    report.tables[name] = {"a": da.to_json(), "b": db.to_json(), "equal": True}
                    report.equal_records += da.count
                    sums_a.append((name, xa.kind, da))
                    sums_b.append((name, xb.kind, db))
                    continue
            # Progress follows one side: A, or B for a table only B has; not A's tables
            # again where A's walk beside B's counted them.
            shown = None if counted and xa is not None else progress
            follow_a, follow_b = (shown, None) if xa is not None else (None, shown)
            if shown:
                side_reader, side_table = (ra, xa) if xa is not None else (rb, xb)
                shown.start_table(name, table_total(shown, side_reader, side_table))
            if xa is not None and xb is not None and xa.kind is not xb.kind:
                report.difference_count += 1
                report.differences.append(
                    Difference(
                        name,
                        b"",
                        f"table kind differs ({xa.kind.value} in A, {xb.kind.value} in B)",
                    )
                )
            if facts is not None:
                report.difference_count += 1
                if len(report.differences) < limit:
                    report.differences.append(Difference(name, b"", facts))
            streams = (_Stream(ra, xa, str(pa), follow_a), _Stream(rb, xb, str(pb), follow_b))
            if xa is None or xb is None:
                da, db = _drain(*streams)
            else:
                da, db = _merge(name, *streams, report, limit)
            if shown:
                shown.end_table()
            report.tables[name] = {
                "a": da.to_json() if xa else None,
                "b": db.to_json() if xb else None,
                "equal": xa is not None
                and xb is not None
                and da == db
                and xa.kind is xb.kind
                and facts is None,
            }
            if xa is None or xb is None:  # one difference, whatever the table holds
                side, other, count = ("A", "B", db.count) if xa is None else ("B", "A", da.count)
                report.difference_count += 1
                if len(report.differences) < limit:
                    what = f"table missing in {side} ({count:,} records in {other})"
                    report.differences.append(Difference(name, b"", what))
            if xa:
                sums_a.append((name, xa.kind, da))
            if xb:
                sums_b.append((name, xb.kind, db))
    report.digest_a = store_digest(sums_a)
    report.digest_b = store_digest(sums_b)
    report.equal = report.difference_count == 0 and report.digest_a == report.digest_b
    return report


def _hex32(value: Any, what: str) -> str:
    """``value`` if it is 32 hex digits (lower-cased), else ValueError."""
    if not isinstance(value, str) or not re.fullmatch(r"[0-9a-fA-F]{32}", value):
        raise ValueError(f"{what} is not 32 hex digits: {value!r}")
    return value.lower()


def _manifest_table(t: Any) -> dict[str, Any]:
    """One table entry of a manifest, checked: table, kind, count and sum."""
    if not isinstance(t, dict):
        raise TypeError(f"a table entry is not a JSON object: {t!r}")
    missing = [f for f in ("table", "kind", "count", "sum") if f not in t]
    if missing:
        raise ValueError(f"a table entry lacks {', '.join(missing)}")
    name, kind, count = t["table"], t["kind"], t["count"]
    if not isinstance(name, str):
        raise TypeError(f"a table name is not a string: {name!r}")
    if kind not in {k.value for k in TableKind}:
        raise ValueError(f"table {name!r} has kind {kind!r}, not plain or versioned")
    if type(count) is not int or count < 0:
        raise ValueError(f"table {name!r} has count {count!r}, not a whole number")
    return {**t, "sum": _hex32(t["sum"], f"table {name!r}'s sum")}


def check_manifest(data: Any) -> dict[str, Any]:
    """A parsed manifest with its shape checked, its tables keyed by name.

    Args:
        data: the JSON value read from a manifest file.

    Returns:
        The manifest, ``tables`` turned into a dict of table name to entry.

    Raises:
        ValueError: what is wrong with it (TypeError for a value of the wrong type).
    """
    if not isinstance(data, dict) or data.get("statemigrate_manifest") != MANIFEST_FORMAT:
        raise ValueError("no statemigrate_manifest: 1 at its top")
    if not isinstance(data.get("tables"), list):
        raise TypeError("its tables are not a JSON list")
    tables: dict[str, dict[str, Any]] = {}
    for t in data["tables"]:
        entry = _manifest_table(t)
        if entry["table"] in tables:
            raise ValueError(f"table {entry['table']!r} is listed twice")
        tables[entry["table"]] = entry
    return {**data, "tables": tables, "digest": _hex32(data.get("digest"), "its digest")}


def load_manifest(path: Path) -> dict[str, Any]:
    """Read a manifest written by ``checksum --json``; a malformed one is a UsageError."""
    try:
        return check_manifest(json.loads(path.read_text()))
    except FileNotFoundError as exc:
        raise UsageError(f"{path}: no such manifest") from exc
    except RecursionError as exc:
        raise UsageError(f"{path}: not a statemigrate manifest (JSON nested too deeply)") from exc
    except (OSError, ValueError, TypeError) as exc:
        raise UsageError(f"{path}: not a statemigrate manifest ({exc})") from exc


def against_manifest(
    src: Source, manifest: str | os.PathLike[str], progress: Progress | None
) -> VerifyReport:
    """A store checked against a saved manifest (:func:`statemigrate.api.verify_manifest`'s work)."""
    saved = load_manifest(Path(manifest))
    if progress:
        progress.phase("verifying")
    now = digest_of(src, progress)
    report = VerifyReport(
        now.store, os.fspath(manifest), digest_a=now.digest, digest_b=saved["digest"]
    )
    current = {t["table"]: t for t in now.tables}
    for name in sorted(set(current) | set(saved["tables"]), key=lambda n: n.encode()):
        x, y = current.get(name), saved["tables"].get(name)
        same = (
            x is not None
            and y is not None
            and (x["kind"], x["count"], x["sum"]) == (y["kind"], y["count"], y["sum"])
        )
        report.tables[name] = {"a": x, "b": y, "equal": same}
        if same and x is not None:
            report.equal_records += x["count"]
        if not same:
            report.difference_count += 1
            what = (
                "table missing in the store"
                if x is None
                else "table missing in the manifest"
                if y is None
                else f"digest differs ({x['count']} records now, {y['count']} in the manifest)"
            )
            report.differences.append(Difference(name, b"", what))
    report.equal = report.difference_count == 0 and now.digest == saved["digest"]
    return report


__all__ = [
    "ChecksumReport",
    "TableKind",
    "VerifyReport",
    "against_manifest",
    "compare",
    "digest_of",
]
