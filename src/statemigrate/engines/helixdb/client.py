"""The HelixDB client, run on a private thread, and the names a store is laid out with.

Table labels (``t`` + hex of the UTF-8 name), the store directory and its database
(``P/db``, or ``P`` itself as an app made it), the writer's lock file, the private image
a reader opens, and the heuristic that finds another process using the store; see the
package's notes (:mod:`statemigrate.engines.helixdb`).
"""

from __future__ import annotations

import os
import queue
import shutil
import threading
import time
from collections.abc import Callable
from concurrent.futures import Future
from concurrent.futures import TimeoutError as FutureTimeout
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import DestinationError, SourceError
from ...locks import LockProbe
from .. import snapshot
from ..base import StoreFacts
from ..errors import DriverErrors, Meaning, Rule

if TYPE_CHECKING:
    from .engine import HelixdbEngine

TABLE_PREFIX = "helixdb.table:"
KIND_PREFIX = "kind:"  # DESIGN.md: the kind of a table where the layout cannot show it
LOCK_NAME = "statemigrate.lock"
DB_NAME = "db"  # the database inside a store directory (see the package's notes)
U64 = 2**64
I64_MAX = 2**63 - 1
STALL_SECONDS = 2.0  # a call this slow has the free space checked
READ_TIMEOUT = 8.0  # a read call this slow means a damaged store (a page is at most 8 MiB)
FULL_MARGIN = 4 << 20  # free bytes under which a stalled write means a full disk


def label_of(name: str) -> str:
    """The node label of a table: reversible, and valid whatever the name."""
    return "t" + name.encode("utf-8").hex()


def name_of(label: str) -> str | None:
    """The table name a label stands for, or None when it is not ``t`` + hex of a UTF-8 name."""
    if not label.startswith("t"):
        return None
    try:
        name = bytes.fromhex(label[1:]).decode("utf-8")
    except ValueError:  # not hex, or not UTF-8
        return None
    return name if label_of(name) == label else None  # lower case, no spaces


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
    if not os.path.isdir("/proc"):
        return None  # no process table to read (macOS, Windows): nothing seen
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


def private_copy(path: Path, into: Path, store: Path | None = None) -> Path:
    """A private image of the store (:mod:`.snapshot`): hard links where possible (SlateDB
    never rewrites a file in place, it writes new ones), copies otherwise, no link followed
    out of the store. The manifests are taken first, so that every file they name is still
    there; only the subdirectories are SlateDB's (the top level holds the lock). ``path``
    is the database directory of ``store`` (default: itself), where links may lead."""
    dest = into / "store"

    def way(f: snapshot.StoreFile) -> snapshot.Way:
        return "skip" if len(f.rel.parts) == 1 else "link"

    manifests_first = lambda f: f.rel.parts[0] != "manifest"
    snapshot.replicate(path, dest, way, order=manifests_first, within=store)
    return dest
