"""HelixDB embedded (``helix-db`` with ``helix-db-embedded``): one node label per table.

A store is a directory ``P`` holding the database ``Client.embedded(Disk(P, "db"))``
keeps in ``P/db`` (SlateDB's ``manifest/``, ``wal/`` …): HelixDB percent-encodes a
database name with non-ASCII characters, inconsistently (``é`` became ``%C3%A9`` for
one directory and ``%25C3%25A9`` for another), so the name it sees is always the plain
``db`` and any path works. A store an app made as ``Disk(ROOT, NAME)``, that is
``ROOT/NAME`` holding ``manifest/`` directly, is read too. Each record is a node of its table's
label with ``k`` (lower-case hex of the key, under a ``node_range`` index, so that
string order is the key's byte order), ``v`` (base64 of the value) and, in a versioned
table, ``ver`` (the version as a signed 64-bit integer with the same bits, as SQLite).

Labels: a table's label is ``t`` followed by the lower-case hex of its UTF-8 name, so
any name (quotes, slashes, non-ASCII, 255 bytes) maps to a plain label and back.
Metadata is the label ``__statemigrate__`` (nodes ``key``/``value``, value in base64).

Tables are found in the store itself, as DESIGN.md lays it out: every label present
that is ``t`` + hex is a table (HelixDB has no catalog of labels, so one grouped count
over every node finds them; see the quirks below), and so is every table the metadata
names, which is how a table without records exists. A table's kind shows in its
records (``ver`` present or not); ``kind:<table>`` (``plain``/``versioned``) in the
metadata states it, which an empty table needs. What statemigrate writes also keeps
``helixdb.table:<label>`` (name, kind and the range index's build operation, to wait
for); both key families are hidden from :meth:`metadata`, and any two sources of a
kind must agree. A label that is neither a table nor the metadata, or any edge, is not
in the layout: refused (exit 4) unless ``skip_foreign_tables``. Every record is checked
as it is read (``k`` lower-case hex, ``v`` base64, ``ver`` an integer exactly in
versioned tables), and a table read from its start must yield as many records as the
count found nodes of its label: a label without its range index on ``k``, or nodes
without a ``k``, are refused (exit 4) rather than read short.

Quirks handled here:

- ``Client.embedded_reader`` writes new manifest files (its snapshot is a checkpoint in
  SlateDB's manifest), so the reader opens a private image of the store made of hard
  links in a temporary directory (SlateDB never rewrites a file in place), and the
  source stays byte-identical. Reading while the app writes is not supported: stop it.
- Reads page through the range index, ``n_with_label_where(label, k > last)``, which
  returns ascending keys; every page is checked, and should one ever come back out of
  order the table is read by :func:`sorted_by_scan` instead (an external merge sort
  with bounded memory). Index builds are waited for before reading.
- Values travel as query parameters: a literal over a few MiB breaks HelixDB's planner.
- There is no lock file: a second writer silently takes the database over and the
  first one's writes then fail ("detected newer DB client", mapped to exit 3). Before
  opening an existing store for writing we refuse (exit 3) when another statemigrate
  holds its writer lock (``statemigrate.lock`` in the store, a POSIX lock) or another
  process with HelixDB loaded names the store on its command line or works in it. An app
  that opens the store otherwise is not seen: stop it first.
- The synchronous client runs ``asyncio.run()`` per call, so every call here runs on a
  private thread and the engine works under a caller's running event loop.
- HelixDB has no catalog of labels, and its query engine gathers the whole stream of a
  filtered, skipped or counted scan over all nodes before answering (a filter and then
  ``limit(1)`` still reads every node); only an id list or a label's range index reads
  in bounded steps. Finding the labels therefore takes one grouped count over every
  node when a store is opened: it adds about 60% to the time a whole read takes
  (measured at 40k records) and needs memory in proportion to the store. That call is given the store's size at
  :data:`SCAN_BYTES_PER_SECOND` instead of :data:`READ_TIMEOUT`.
- Storage is about 10x the payload and loads run at a few thousand records per second;
  :attr:`HelixdbEngine.space_factor` says so to the free-space check.
"""

from __future__ import annotations

import base64
import heapq
import itertools
import json
import os
import pickle
import queue
import shutil
import tempfile
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import Any

from ..errors import DestinationError, SourceError, StoreBusyError
from ..fsutil import store_size
from ..locks import LockProbe, busy_message, lock_holder, refuse_if_held
from ..model import METADATA_TABLE, Batch, Record, TableInfo, TableKind
from . import _snapshot
from .base import Capabilities, Engine, Reader, StoreFacts, Writer, check_options, take_batches
from .errors import DriverErrors, Meaning, Rule

TABLE_PREFIX = "helixdb.table:"
KIND_PREFIX = "kind:"  # DESIGN.md: the kind of a table where the layout cannot show it
KINDS = {b"plain": TableKind.PLAIN, b"versioned": TableKind.VERSIONED}
LOCK_NAME = "statemigrate.lock"
U64 = 2**64
I64_MAX = 2**63 - 1
INDEX_WAIT_SECONDS = 300.0
FIRST_PAGE = 100
MAX_PAGE = 1000
STALL_SECONDS = 2.0  # a call this slow has the free space checked
READ_TIMEOUT = 8.0  # a read call this slow means a damaged store (a page is at most 8 MiB)
SCAN_BYTES_PER_SECOND = 1 << 20  # the label count's deadline: ~10x slower than measured
FULL_MARGIN = 4 << 20  # free bytes under which a stalled write means a full disk
BATCH_FACTOR = 4  # disk bytes a batch takes per payload byte, at least (WAL, index)
RUN_BYTES = 64 << 20  # records per sorted run of the fallback sort, in payload bytes


def label_of(name: str) -> str:
    """The node label of a table: reversible, and valid whatever the name."""
    return "t" + name.encode("utf-8").hex()


# The driver's errors are told by their message; our writer's lock file shows a holder.
HELIX_FACTS = StoreFacts(
    errors=DriverErrors(
        rules=(
            Rule(
                Meaning.BUSY,
                words=("newer db client", "fenced"),
                message="{path}: store is in use by another process (another HelixDB client "
                "opened it for writing while {doing})",
            ),
            Rule(Meaning.FULL, words=("no space", "disk full")),
        ),
        source_failed="{path}: not a readable HelixDB store while {doing} ({text})",
        noise=("embedded HelixDB error: ",),
    ),
    locks=(LockProbe(LOCK_NAME),),
    private_metadata=(TABLE_PREFIX, KIND_PREFIX),
)


def other_helix_process(path: Path) -> int | None:
    """Another process that has HelixDB loaded and names or works in ``path`` (a heuristic).

    It names the store when an argument (``ENGINE:`` prefix allowed), taken relative to
    that process's working directory, is the store or lies inside it.
    """
    me = os.getpid()
    target = os.path.realpath(path)
    for entry in os.scandir("/proc"):
        if not entry.name.isdigit() or int(entry.name) == me:
            continue
        try:
            with open(f"/proc/{entry.name}/maps", "rb") as f:
                if b"helixdb" not in f.read():
                    continue
            args = (
                Path(f"/proc/{entry.name}/cmdline")
                .read_bytes()
                .decode(errors="replace")
                .split("\0")
            )
            cwd = os.readlink(f"/proc/{entry.name}/cwd")
        except OSError:
            continue
        places = [cwd] + [os.path.realpath(os.path.join(cwd, a)) for a in args if a]
        places += [
            os.path.realpath(os.path.join(cwd, a.partition(":")[2])) for a in args if ":" in a
        ]
        if any(p == target or p.startswith(target + os.sep) for p in places):
            return int(entry.name)
    return None


class _Helix:
    """A HelixDB client whose every call runs on one private (daemon) thread.

    A daemon thread, not an executor: on a full disk HelixDB retries its writes forever,
    and a stuck call must not keep the process from exiting once we have given up on it.
    """

    def __init__(
        self, engine: type[HelixdbEngine], path: Path, *, reader: bool, shown: Path | None = None
    ):
        self.helix = engine.require_driver()
        self.path = path
        self.shown = shown or path  # the store's path, for messages
        self.reader = reader
        self.broken = False
        self.jobs: queue.Queue[Any] = queue.Queue()
        threading.Thread(target=self._serve, name="statemigrate-helixdb", daemon=True).start()
        self.client: Any = None
        source = self.helix.Disk(str(path.parent.absolute()), path.name)  # path: the database
        opener = self.helix.Client.embedded_reader if reader else self.helix.Client.embedded
        try:
            self.client = self.call(lambda: opener(source))
        except BaseException:
            self.jobs.put(None)
            raise

    def _serve(self) -> None:
        while True:
            job = self.jobs.get()
            if job is None:
                return
            fn, done = job
            try:
                done.set_result(fn())
            except BaseException as exc:  # noqa: BLE001 - handed to the caller
                done.set_exception(exc)

    def call(self, fn: Callable[[], Any], timeout: float = READ_TIMEOUT) -> Any:
        done: Future[Any] = Future()
        self.jobs.put((fn, done))
        started = time.monotonic()
        while True:
            try:
                return done.result(timeout=STALL_SECONDS)
            except FutureTimeout:
                if self.reader and time.monotonic() - started >= timeout:
                    # A damaged store (a file cut short, flipped bytes) makes HelixDB
                    # retry for ever rather than fail.
                    self.broken = True
                    raise SourceError(
                        f"{self.shown}: HelixDB did not answer in {timeout:.0f}s: "
                        "the store looks damaged"
                    ) from None
                if disk_nearly_full(self.path):
                    self.broken = True
                    raise DestinationError(
                        f"{self.path}: disk full: HelixDB cannot write and keeps retrying",
                        hint="free some space, then run the same command with --resume",
                    ) from None

    def query(self, batch: Any, **params: Any) -> Any:
        request = batch.to_query_request()
        for name, value in params.items():
            request = request.with_untyped_parameter(name, value)
        return self.call(lambda: self.client.query(request))

    def read(self, name: str, traversal: Any, timeout: float = READ_TIMEOUT) -> Any:
        request = self.helix.read_batch().var_as(name, traversal).returning([name])
        query = request.to_query_request()
        return self.call(lambda: self.client.query(query), timeout)[name]

    def close(self) -> None:
        try:
            if self.client is not None and not self.broken:
                self.call(self.client.close)
            self.client = None
        finally:
            self.jobs.put(None)


def disk_nearly_full(path: Path) -> bool:
    """Whether the file system holding ``path`` has less than FULL_MARGIN bytes free."""
    try:
        return shutil.disk_usage(path if path.exists() else path.parent).free < FULL_MARGIN
    except OSError:
        return False


def _read_meta(hx: _Helix) -> dict[str, bytes]:
    g = hx.helix.g
    rows = hx.read("m", g().n_with_label(METADATA_TABLE).value_map(["key", "value"]))
    return {r["key"]: base64.b64decode(r["value"]) for r in rows}


def _registry(meta: Mapping[str, bytes]) -> dict[str, dict[str, Any]]:
    return {
        k[len(TABLE_PREFIX) :]: json.loads(v) for k, v in meta.items() if k.startswith(TABLE_PREFIX)
    }


def name_of(label: str) -> str | None:
    """The table name a label stands for, or None when it is not ``t`` + hex of a UTF-8 name."""
    if not label.startswith("t"):
        return None
    try:
        name = bytes.fromhex(label[1:]).decode("utf-8")
    except ValueError:  # not hex, or not UTF-8
        return None
    return name if label_of(name) == label else None  # lower case, no spaces


def scan_timeout(path: Path) -> float:
    """How long the label count may take: the store's size at SCAN_BYTES_PER_SECOND."""
    try:
        size = store_size(path)
    except OSError:
        size = 0
    return max(READ_TIMEOUT, size / SCAN_BYTES_PER_SECOND)


def label_counts(hx: _Helix, timeout: float = READ_TIMEOUT) -> dict[str, int]:
    """How many nodes each label present has: one grouped count over every node.

    HelixDB keeps no list of labels that a query can read, so this is the only way to
    see every label, including ones no metadata mentions.
    """
    helix = hx.helix
    rows = hx.read("c", helix.g().n(helix.NodeRef.all()).group_count("$label"), timeout)
    return {r["$label"]: int(r["count"]) for r in rows}


def has_edges(hx: _Helix) -> bool:
    """Whether the store holds any edge (the layout has none)."""
    helix = hx.helix
    return bool(hx.read("e", helix.g().e(helix.EdgeRef.all()).limit(1).id()))


def _declare(path: Path, kinds: dict[str, TableKind], name: str, kind: TableKind) -> None:
    if kinds.setdefault(name, kind) != kind:
        raise SourceError(f"{path}: the metadata gives table {name!r} two kinds")


def declared_tables(path: Path, meta: Mapping[str, bytes]) -> dict[str, TableKind]:
    """Tables the metadata names, with their kind: ``kind:<table>`` and statemigrate's own list."""
    kinds: dict[str, TableKind] = {}
    for key, raw in meta.items():
        if key.startswith(KIND_PREFIX):
            kind = KINDS.get(raw)
            if kind is None:
                raise SourceError(
                    f"{path}: metadata {key!r} is {raw[:32]!r}, not b'plain' or b'versioned'"
                )
            _declare(path, kinds, key[len(KIND_PREFIX) :], kind)
        elif key.startswith(TABLE_PREFIX):
            label = key[len(TABLE_PREFIX) :]
            try:
                entry = json.loads(raw)
                name, kind = entry["name"], TableKind(entry["kind"])
                if label_of(name) != label:
                    raise ValueError(f"name {name!r} is not the label's")
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise SourceError(f"{path}: metadata {key!r} is not a table entry ({exc})") from exc
            _declare(path, kinds, name, kind)
    return kinds


def observed_kind(hx: _Helix, label: str) -> TableKind:
    """The kind a label's records show: versioned when its first node has ``ver``."""
    rows = hx.read("p", hx.helix.g().n_with_label(label).limit(1).value_map(["ver"]))
    return TableKind.VERSIONED if rows and "ver" in rows[0] else TableKind.PLAIN


def _foreign_message(path: Path, labels: list[str], edges: bool) -> str:
    parts = []
    if labels:
        shown = ", ".join(repr(label) for label in sorted(labels)[:5])
        more = f" and {len(labels) - 5} more" if len(labels) > 5 else ""
        parts.append(f"node labels {shown}{more}")
    if edges:
        parts.append("edges")
    return (
        f"{path}: {' and '.join(parts)} not in statemigrate's layout "
        "(a label 't' + hex per table, the metadata label '__statemigrate__')"
    )


def discover_tables(
    hx: _Helix,
    path: Path,
    meta: Mapping[str, bytes],
    *,
    skip_foreign: bool,
    timeout: float = READ_TIMEOUT,
) -> tuple[list[TableInfo], dict[str, int]]:
    """The tables of a store, found in the store itself, and the node count of each.

    A table is a label present that is ``t`` + hex of its name, or a table the
    metadata names (a table without records has no label to find). Its kind is what
    its records show, and must agree with the metadata's where that states one.

    Args:
        hx: the open store.
        path: the store, for messages.
        meta: the store's metadata, layout keys included.
        skip_foreign: leave out labels not in the layout, and edges, instead of refusing.
        timeout: how long the count over every node may take (readers only).

    Returns:
        The tables in name byte order, and ``{name: nodes}`` for each of them.

    Raises:
        SourceError: foreign labels or edges (unless skipped), or kinds that disagree.
    """
    counts = label_counts(hx, timeout)
    found: dict[str, int] = {}
    foreign = []
    for label, nodes in counts.items():
        if label == METADATA_TABLE:
            continue
        name = name_of(label)
        if name is None:
            foreign.append(label)
        else:
            found[name] = nodes
    edges = has_edges(hx)
    if (foreign or edges) and not skip_foreign:
        raise SourceError(
            _foreign_message(path, foreign, edges),
            hint="convert them yourself, or pass --skip-foreign-tables to leave them out",
        )
    declared = declared_tables(path, meta)
    tables = []
    for name in sorted(set(found) | set(declared), key=lambda n: n.encode("utf-8")):
        kind = declared.get(name)
        if found.get(name):
            seen = observed_kind(hx, label_of(name))
            if kind is not None and kind != seen:
                raise SourceError(
                    f"{path}: table {name!r} is {kind.value} in the metadata, "
                    f"but its records are {seen.value}"
                )
            kind = seen
        assert kind is not None  # a table is found with nodes or declared with a kind
        tables.append(TableInfo(name, kind))
    return tables, {t.name: found.get(t.name, 0) for t in tables}


def _wait_for_indexes(
    hx: _Helix, tables: list[dict[str, Any]], path: Path, *, source: bool
) -> None:
    """Wait until every table's range index is built (reads are ordered only through it)."""
    g = hx.helix.g
    deadline = time.monotonic() + INDEX_WAIT_SECONDS
    for entry in tables:
        op = entry.get("index_op")
        while op:
            status = hx.read("s", g().get_index_operation(op))
            state = status.get("status") if isinstance(status, dict) else None
            if state == "succeeded":
                break
            if state in ("aborted", "failed") or time.monotonic() > deadline:
                err = SourceError if source else DestinationError
                raise err(
                    f"{path}: the key index of table {entry['name']!r} is not usable ({state})"
                )
            time.sleep(0.05)


DB_NAME = "db"  # the database inside a store directory (see the module notes)


def is_database(path: Path) -> bool:
    """Whether ``path`` is a HelixDB (SlateDB) database directory."""
    manifest = path / "manifest"
    return manifest.is_dir() and (path / "wal").is_dir() and any(manifest.glob("*.manifest"))


def database_of(path: Path) -> Path | None:
    """The database directory of store ``path``: ``path/db``, or ``path`` itself as an app made it."""
    if is_database(path / DB_NAME):
        return path / DB_NAME
    if is_database(path):
        return path
    return None


def helix_safe(name: str) -> bool:
    """Whether HelixDB takes ``name`` as a database name without encoding it."""
    return bool(name) and all(c.isascii() and (c.isalnum() or c in "-_.") for c in name)


def private_copy(path: Path, into: Path) -> Path:
    """A private image of the store (:mod:`._snapshot`): hard links where possible (SlateDB
    never rewrites a file in place, it writes new ones), copies otherwise. The manifests are
    taken first, so that every file they name is still there."""
    dest = into / "store"
    subdirs = sorted((p for p in path.iterdir() if p.is_dir()), key=lambda p: p.name != "manifest")
    dest.mkdir()
    for sub in subdirs:
        for root, _dirs, files in os.walk(sub):
            target = dest / Path(root).relative_to(path)
            target.mkdir(parents=True, exist_ok=True)
            for name in files:
                _snapshot.link(Path(root) / name, target / name)
    return dest


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

    The fallback for an index that ever answers out of order. The label is scanned in
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
    hx: _Helix, path: Path, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
) -> Iterator[Batch]:
    """Batches of a table through its range index, taken natively from its pages."""
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
                self.tmpdir = _snapshot.private_dir("helixdb")
                image = private_copy(database, self.tmpdir)
            except OSError as exc:
                raise SourceError(f"{path}: cannot make a private image to read ({exc})") from exc
            self.hx = _Helix(engine, image, reader=True, shown=path)
            meta = _read_meta(self.hx)
            self.snapshot_tables, self._counts = discover_tables(
                self.hx, path, meta, skip_foreign=skip_foreign, timeout=scan_timeout(image)
            )
            self.snapshot_metadata = meta
            self._registry = _registry(meta)
            _wait_for_indexes(self.hx, list(self._registry.values()), path, source=True)

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        assert self.hx is not None
        batches = read_table(self.hx, self.path, table, after, max_records, max_bytes)
        nodes = self._counts.get(table.name)
        if after is not None or nodes is None:
            return batches
        return self._all_of(table, batches, nodes)

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
            _snapshot.remove(self.tmpdir)
            self.tmpdir = None


class HelixdbWriter(Writer):
    """Each batch is one write batch (records and metadata together)."""

    facts = HELIX_FACTS

    def __init__(self, engine: type[HelixdbEngine], path: Path, create: bool):
        self.path = path
        self.lock_fd: int | None = None
        self.engine = engine
        if create:
            if path.exists() or path.is_symlink():
                raise DestinationError(f"{path}: already exists")
            try:
                path.mkdir()
            except OSError as exc:
                raise DestinationError(f"{path}: cannot create ({exc.strerror})") from exc
            database = path / DB_NAME
        else:
            found = database_of(path)
            if found is None:
                raise DestinationError(f"{path}: not a HelixDB store")
            if found == path and not helix_safe(path.name):
                raise DestinationError(
                    f"{path}: HelixDB would encode this database name and write elsewhere",
                    hint="rename the directory to ASCII letters, digits, '-', '_' and '.'",
                )
            database = found
        self._lock()
        pid = None if create else other_helix_process(path)
        if pid is not None:
            self._unlock()
            raise StoreBusyError(busy_message(path, pid))
        try:
            with self.errors("opening for writing"):
                self.hx = _Helix(engine, database, reader=False)
        except BaseException:
            self._unlock()
            raise
        self.helix = self.hx.helix
        with self.opening("reading metadata"):
            self._meta = _read_meta(self.hx)
            # Foreign labels are left alone: a writer touches only the tables it is given.
            tables: list[TableInfo] = []
            if not create:
                tables = discover_tables(self.hx, path, self._meta, skip_foreign=True)[0]
        self._tables = {t.name: t for t in tables}
        g, PI = self.helix.g, self.helix.PropertyInput
        self._meta_body = self.helix.write_batch().var_as(
            "m", g().add_n(METADATA_TABLE, [("key", PI.param("key")), ("value", PI.param("value"))])
        )

    def _lock(self) -> None:
        lock = self.path / LOCK_NAME
        refuse_if_held(self.path, self.facts.locks)
        import fcntl

        fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        try:
            fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError as exc:
            os.close(fd)
            raise StoreBusyError(busy_message(self.path, self.facts.holder(self.path))) from exc
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.lock_fd = fd

    def _unlock(self) -> None:
        if self.lock_fd is not None:
            (self.path / LOCK_NAME).unlink(missing_ok=True)
            os.close(self.lock_fd)
            self.lock_fd = None

    def _run(self, batch: Any, doing: str, **params: Any) -> None:
        with self.errors(doing):
            self.hx.query(batch, **params)

    def _with_meta(
        self, batch: Any, metadata: Mapping[str, bytes | None]
    ) -> tuple[Any, dict[str, Any]]:
        g, SP = self.helix.g, self.helix.SourcePredicate
        rows = []
        for i, (key, value) in enumerate(metadata.items()):
            batch = batch.var_as(
                f"d{i}", g().n_with_label_where(METADATA_TABLE, SP.eq("key", key)).drop()
            )
            if value is not None:
                rows.append({"key": key, "value": base64.b64encode(value).decode()})
        params: dict[str, Any] = {}
        if rows:
            batch = batch.for_each_param("meta", self._meta_body)
            params["meta"] = rows
        return batch, params

    def _commit_meta(self, metadata: Mapping[str, bytes | None]) -> None:
        for key, value in metadata.items():
            if value is None:
                self._meta.pop(key, None)
            else:
                self._meta[key] = value

    def list_tables(self) -> list[TableInfo]:
        return sorted(self._tables.values(), key=lambda t: t.name.encode("utf-8"))

    def raw_metadata(self) -> dict[str, bytes]:
        return dict(self._meta)

    def create_table(self, table: TableInfo) -> None:
        label = label_of(table.name)
        spec = self.helix.IndexSpec.node_range(label, "k")
        with self.errors(f"creating table {table.name!r}"):
            answer = self.hx.query(
                self.helix.write_batch()
                .var_as("ix", self.helix.g().create_index_if_not_exists(spec))
                .returning(["ix"])
            )
        op = answer.get("ix", {}).get("operation_id")
        entry = {"name": table.name, "kind": table.kind.value, "index_op": op}
        # kind: is what DESIGN.md documents (an empty table has no other trace).
        self.put_metadata(
            {
                TABLE_PREFIX + label: json.dumps(entry).encode(),
                KIND_PREFIX + table.name: table.kind.value.encode(),
            }
        )
        self._tables[table.name] = TableInfo(table.name, table.kind)

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        g, PI = self.helix.g, self.helix.PropertyInput
        props = [("k", PI.param("k")), ("v", PI.param("v"))]
        if table.versioned:
            props.append(("ver", PI.param("ver")))
            rows = [
                {
                    "k": k.hex(),
                    "v": base64.b64encode(v).decode(),
                    "ver": ver - U64 if ver > I64_MAX else ver,
                }
                for k, v, ver in batch
            ]
        else:
            rows = [{"k": r[0].hex(), "v": base64.b64encode(r[1]).decode()} for r in batch]
        need = (
            int(sum(len(r[0]) + len(r[1]) for r in batch) * HelixdbEngine.space_factor)
            + FULL_MARGIN
        )
        try:
            free = shutil.disk_usage(self.path).free
        except OSError:
            free = need
        if free < need:  # HelixDB would retry a write on a full disk forever
            raise DestinationError(
                f"{self.path}: disk full: {free:,} bytes free, this batch needs about {need:,}",
                hint="free some space, then run the same command with --resume",
            )
        body = self.helix.write_batch().var_as("n", g().add_n(label_of(table.name), props))
        query = self.helix.write_batch().for_each_param("rows", body)
        query, params = self._with_meta(query, metadata or {})
        self._run(query, f"writing table {table.name!r}", rows=rows, **params)
        self._commit_meta(metadata or {})

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        query, params = self._with_meta(self.helix.write_batch(), metadata)
        self._run(query, "writing metadata", **params)
        self._commit_meta(metadata)

    # In-place methods (schema upgrades); no multi-step transaction (each write batch
    # commits on its own), so upgrades stage their work and rename by copying.

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        entry = _registry(self._meta).get(label_of(table.name))
        if entry is not None:
            _wait_for_indexes(self.hx, [entry], self.path, source=False)
        yield from read_table(self.hx, self.path, table, after, max_records, max_bytes)

    def drop_table(self, name: str) -> None:
        label = label_of(name)
        if name not in self._tables:
            return
        # The range index stays: a table created again under the name finds it active.
        query = self.helix.write_batch().var_as("x", self.helix.g().n_with_label(label).drop())
        gone: dict[str, bytes | None] = {TABLE_PREFIX + label: None, KIND_PREFIX + name: None}
        query, params = self._with_meta(query, gone)
        self._run(query, f"dropping table {name!r}", **params)
        self._commit_meta(gone)
        del self._tables[name]

    def backup(self, path: Path) -> None:
        """A copy taken with the database closed, so that everything written is on disk."""
        engine = self.engine
        database = self.hx.path
        self.hx.close()
        try:
            shutil.copytree(self.path, path, ignore=shutil.ignore_patterns(LOCK_NAME))
        except OSError as exc:
            raise DestinationError(f"{path}: cannot write the backup ({exc})") from exc
        finally:
            self.hx = _Helix(engine, database, reader=False)
            self.helix = self.hx.helix

    def finish(self) -> None:
        with self.errors("waiting for index builds"):
            _wait_for_indexes(
                self.hx, list(_registry(self._meta).values()), self.path, source=False
            )

    def close(self) -> None:
        hx = getattr(self, "hx", None)
        try:
            if hx is not None:
                self.hx = None  # type: ignore[assignment]
                hx.close()
        finally:
            self._unlock()


class HelixdbEngine(Engine):
    """HelixDB embedded through helix-db and helix-db-embedded."""

    name = "helixdb"
    extra = "helixdb"
    driver_module = "helixdb"
    description = (
        "HelixDB embedded: one node label per table, k (hex, range index), v (base64), ver"
    )
    capabilities = Capabilities(
        atomic_multi_table=True,
        read_only_open=False,  # its reader writes manifests: we read a private image
        multi_process_readers=True,
        directory=True,
        in_place=True,
    )
    # About 10x the payload at 1M records (hex keys, base64 values, the index, the WAL);
    # 3-4x the source SQLite file at 20k records here.
    space_factor = 10.0
    suffixes = (".helixdb",)

    @classmethod
    def require_driver(cls) -> Any:
        helix = super().require_driver()
        try:
            import helixdb_uniffi  # noqa: F401 - the embedded runtime
        except ImportError as exc:
            from ..errors import MissingDriverError

            raise MissingDriverError(cls.name, cls.extra) from exc
        return helix

    @classmethod
    def detect(cls, path: Path) -> bool:
        return path.is_dir() and database_of(path) is not None

    @classmethod
    def open_reader(cls, path: Path, options: Mapping[str, Any] | None = None) -> Reader:
        opts = check_options(cls, options, {"skip_foreign_tables"})
        if not cls.detect(path):
            raise SourceError(f"{path}: not a HelixDB store (no database with manifest/ and wal/)")
        return HelixdbReader(cls, path, skip_foreign=bool(opts.get("skip_foreign_tables")))

    @classmethod
    def create_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        check_options(cls, options, set())
        return HelixdbWriter(cls, path, create=True)

    @classmethod
    def open_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        check_options(cls, options, set())
        return HelixdbWriter(cls, path, create=False)

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        database = database_of(path) or path
        manifests = sorted((database / "manifest").glob("*.manifest"))
        return {
            "manifest": manifests[-1].name if manifests else None,
            "writer_lock_pid": lock_holder(path, HELIX_FACTS.locks),
        }
