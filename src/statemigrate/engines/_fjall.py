"""fjall 2.x and 3.x through the project's own binding of the real crates (``statemigrate._native``).

No Python binding of fjall is usable (pyfjall needs Python 3.12 and moves one record per
call), so the Rust extension binds fjall 3.x and fjall 2.x as renamed Cargo
dependencies; :mod:`.fjall3` and :mod:`.fjall2` are the two engines, this module what
they share. Layout: one keyspace (fjall 2: partition) per table, raw keys, a versioned
table's values as ``u64be(version) ‖ value``, metadata in ``__statemigrate__`` with the
``kind:<table>`` entries. A store is a directory whose ``version`` file starts with
``FJL`` and the format byte (2 or 3); nothing else is ever opened, because fjall creates
a database wherever it is pointed.

Opening a fjall store changes it (the journal is truncated from its preallocated size,
fjall 3 prunes old version files), so a reader opens a private image
(:mod:`.snapshot`): journals and small files copied, table and blob files (never
written in place) hard-linked, a fresh ``lock`` file of its own.
"""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..errors import DestinationError, SourceError, StateMigrateError
from ..locks import lock_holder
from ..model import Batch, TableInfo
from . import snapshot
from .access import batches_after
from .base import META_KIND_PREFIX as KIND_PREFIX
from .base import (
    Capabilities,
    Engine,
    Reader,
    StoreFacts,
    Writer,
    recorded_tables,
)
from .errors import DriverErrors, Meaning, Rule
from .options import EngineOptions

MAGIC = b"FJL"
VERSION_FILE = "version"
LOCK_FILE = "lock"
MAX_KEY = 65_535
# Files at most this large are copied into a private image, larger ones hard-linked
# (only journals are written in place, and they are always copied).
_COPY_BELOW = 256 << 10

FJALL_ERRORS = DriverErrors(
    rules=(
        Rule(Meaning.BUSY, types=("FjallBusyError",)),
        Rule(
            Meaning.DAMAGED,
            types=("FjallCorruptError",),
            message="{path}: corrupt fjall store ({text})",
        ),
        Rule(Meaning.REFUSED, types=("FjallRefusedError",)),
        Rule(Meaning.FULL, words=("no space", "enospc", "os error 28")),
        Rule(
            Meaning.FAILED,
            types=("PanicException",),
            message="{path}: corrupt fjall store (fjall stopped: {text})",
        ),
    ),
    driver=("FjallBusyError", "FjallCorruptError", "FjallRefusedError", "FjallError"),
    failed="{path}: fjall error while {doing} ({text})",
    whole_text=True,
)


def read_format(path: Path) -> int | None:
    """The format byte of the store's ``version`` file (2: fjall 2.x, 3: fjall 3.x), or None."""
    try:
        with open(path / VERSION_FILE, "rb") as f:
            head = f.read(4)
    except OSError:
        return None
    return head[3] if len(head) == 4 and head[:3] == MAGIC else None


def _copy_used(fin: int, fout: int) -> None:
    """Copy a journal (open descriptors): its data, then its (sparse) preallocated length,
    so the copy reads the same bytes without writing the preallocated zeros."""
    size = os.fstat(fin).st_size
    try:
        end = os.lseek(fin, 0, os.SEEK_HOLE)
    except (OSError, AttributeError):
        end = size
    os.lseek(fin, 0, os.SEEK_SET)
    _copy_n(fin, fout, end)
    os.ftruncate(fout, size)


def _copy_n(fin: int, fout: int, n: int) -> None:
    while n > 0:
        chunk = os.read(fin, min(n, 1 << 20))
        if not chunk:
            return
        view = memoryview(chunk)
        while view:
            view = view[os.write(fout, view) :]
        n -= len(chunk)


def _journal(rel: Path, major: int) -> bool:
    return rel.parts[0] == "journals" if major == 2 else rel.suffix == ".jnl"


def copy_store(path: Path, dest: Path, major: int) -> None:
    """Copy a closed fjall store to ``dest`` (which does not exist), modes kept: journals
    by their used length, the rest as it is (a backup: nothing hard-linked, no link
    followed: :func:`.snapshot.replicate`)."""
    snapshot.replicate(path, dest, copy=lambda f: _copy_used if _journal(f.rel, major) else None)


def private_image(path: Path, major: int) -> Path:
    """A private image of the fjall store at ``path`` that fjall may change when it opens it.

    Raises:
        OSError: the store cannot be read, or changed while the image was made.
        SourceError: a link out of the store or a special file in it (exit 4).
    """

    def way(f: snapshot.StoreFile) -> snapshot.Way:
        if f.rel == Path(LOCK_FILE):
            return "skip"  # our own, below: fjall 3 takes a lock on it
        return "copy" if _journal(f.rel, major) or f.size <= _COPY_BELOW else "link"

    shadow = snapshot.private_dir(f"fjall{major}")
    try:
        snapshot.replicate(
            path, shadow, way, copy=lambda f: _copy_used if _journal(f.rel, major) else None
        )
        (shadow / LOCK_FILE).touch()
    except BaseException:
        snapshot.remove(shadow)
        raise
    return shadow


# Opens the private image in a child process first: on some damaged table files fjall
# panics while recovering and panics again while cleaning up, which aborts the process
# (found by the fuzzer: fjall 2's segment metadata assert, then "lock is poisoned").
_PROBE = (
    "import sys\n"
    "from statemigrate import _native\n"
    "_native.FjallReader(sys.argv[1], int(sys.argv[2])).close()\n"
)


def _probe_open(path: Path, shadow: Path, major: int) -> None:
    """Refuse (exit 4) a store whose opening kills the process; other failures are left
    to the real open, which raises them as the contract's errors."""
    run = subprocess.run(
        [sys.executable, "-c", _PROBE, str(shadow), str(major)],
        capture_output=True,
        text=True,
        check=False,
    )
    if run.returncode < 0:
        raise SourceError(f"{path}: corrupt fjall store (fjall aborted while opening it)")


def _batches(
    native: Any,
    stored: str,
    table: TableInfo,
    after: bytes | None,
    max_records: int,
    max_bytes: int,
) -> Iterator[Batch]:
    """Whole batches of keyspace ``stored`` from the binding, each read and built with the
    GIL released."""
    return batches_after(
        lambda at: native.read_batch(stored, at, max_records, max_bytes, table.versioned), after
    )


class FjallReader(Reader):
    """One snapshot of a private image of a fjall store (the store itself never changes)."""

    threadsafe_reads = True

    def __init__(self, engine: type[FjallEngine], path: Path) -> None:
        native = engine.require_driver()
        self.engine = engine
        self.path = path
        self.facts = engine.facts
        self._native: Any = None
        self.shadow: Path | None = None
        # A held store was refused before (FjallEngine.refuses_held): an app writing it
        # meanwhile would tear the private image.
        try:
            self.shadow = private_image(path, engine.major)
        except OSError as exc:
            raise SourceError(
                f"{path}: cannot be read ({exc.strerror or exc}); if an app is writing it, "
                "stop the app and run again"
            ) from exc
        with self.opening(failed="{path}: not a readable fjall store ({text})"):
            _probe_open(path, self.shadow, engine.major)
            self._native = native.FjallReader(str(self.shadow), engine.major)
            self.snapshot_metadata = dict(self._native.metadata())
            names = [engine.table_name(n) for n in self._native.names()]
            self.snapshot_tables = recorded_tables(self.snapshot_metadata, names)

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        """Whole batches from the binding, each read and built with the GIL released."""
        stored = self.engine.stored_name(table.name)
        return _batches(self._native, stored, table, after, max_records, max_bytes)

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        """fjall's approximate record count of the keyspace (an estimate)."""
        with contextlib.suppress(Exception):  # progress only: a failure here is no error
            return int(self._native.approximate_len(self.engine.stored_name(table.name))), False
        return None

    def sizes(self) -> dict[str, Any]:
        """Bytes on disk of the store and of each keyspace (for ``inspect``)."""
        names = sorted(self._native.names())
        return {
            "disk_bytes": int(self._native.disk_space()),
            "keyspaces": {n: int(self._native.disk_space(n)) for n in names},
        }

    def close(self) -> None:
        """Release the snapshot and remove the private image."""
        if self._native is not None:
            self._native.close()
            self._native = None
        snapshot.remove(self.shadow)
        self.shadow = None


class FjallWriter(Writer):
    """Writes a fjall store: a table this writer created is filled by ingestion (its keys
    come ascending into an empty keyspace), other batches go in write batches together
    with their metadata; everything is fsynced in :meth:`finish`.

    In-place upgrades: fjall creates and deletes keyspaces (partitions) outside its write
    batches and cannot rename them, so the engine declares neither ``transactional_ddl``
    nor ``rename_table``: an upgrade builds new tables aside and switches through the
    journal in the metadata, with :meth:`sync` (every memtable flushed to tables,
    fsynced) before each destructive step.
    """

    def __init__(self, engine: type[FjallEngine], path: Path, create: bool) -> None:
        native = engine.require_driver()
        self.engine = engine
        self.path = path
        self.facts = engine.facts
        self._native: Any = None
        with self.opening(failed="{path}: cannot open fjall for writing ({text})"):
            self._native = native.FjallWriter(str(path), engine.major, create)

    @staticmethod
    def _meta(metadata: Mapping[str, bytes | None] | None) -> list[tuple[str, bytes | None]]:
        return list((metadata or {}).items())

    def raw_metadata(self) -> dict[str, bytes]:
        with self.errors():
            return dict(self._native.metadata())

    def list_tables(self) -> list[TableInfo]:
        with self.errors():
            names = [self.engine.table_name(n) for n in self._native.names()]
        return recorded_tables(self.raw_metadata(), names)

    def create_table(self, table: TableInfo) -> None:
        # The kind is always written (None deletes one a dropped table left).
        kind = b"versioned" if table.versioned else None
        with self.errors(failed=f"{{path}}: cannot create table {table.name!r} ({{text}})"):
            self._native.create_table(
                self.engine.stored_name(table.name), [(KIND_PREFIX + table.name, kind)]
            )

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        stored = self.engine.stored_name(table.name)
        with self.errors(failed="{path}: write failed ({text})"):
            self._native.write_batch(stored, list(batch), table.versioned, self._meta(metadata))

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        with self.errors(failed="{path}: write failed ({text})"):
            self._native.put_metadata(self._meta(metadata))

    def finish(self) -> None:
        """Flush every memtable to tables and fsync, then reopen the store once.

        Afterwards the journal holds nothing a reader needs (fjall reads a cut or
        damaged journal as ending early, silently), and reopening truncates it from its
        preallocated size (32/64 MiB), as an app restarting would.
        """
        with self.errors(failed="{path}: sync failed ({text})"):
            self._native.persist()
            native, self._native = self._native, None
            native.close()
            module = self.engine.require_driver()
            self._native = module.FjallWriter(str(self.path), self.engine.major, False)

    def sync(self) -> None:
        with self.errors(failed="{path}: sync failed ({text})"):
            self._native.persist()

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        """Batches of ``table`` as written so far (in-place upgrades; nothing else writes it)."""
        stored = self.engine.stored_name(table.name)
        return _batches(self._native, stored, table, after, max_records, max_bytes)

    def drop_table(self, name: str) -> None:
        """Delete the table's keyspace (partition) after its kind (nothing if absent).

        The kind goes first: a kill between the two steps leaves a table that the
        upgrade's journal drops again, never a stale kind for a later table. fjall 2
        flushes every memtable and waits for its journals to be removed first (they name
        partitions: see ``rust/src/engines/fjall/v2.rs``).
        """
        with self.errors(failed=f"{{path}}: cannot drop table {name!r} ({{text}})"):
            self._native.drop_table(self.engine.stored_name(name), [(KIND_PREFIX + name, None)])

    def backup(self, path: Path) -> None:
        """A copy of the store, made while it is closed after a flush and an fsync.

        Closed, because fjall's background compaction replaces table files at any time;
        the journals are copied by their used length (not 32/64 MiB of preallocation).
        """
        self.sync()
        native, self._native = self._native, None
        try:
            with self.errors(failed="{path}: closing failed ({text})"):
                native.close()
            copy_store(self.path, path, self.engine.major)
        finally:
            module = self.engine.require_driver()
            with self.errors(failed="{path}: cannot open fjall for writing ({text})"):
                self._native = module.FjallWriter(str(self.path), self.engine.major, False)

    def close(self) -> None:
        if self._native is not None:
            native, self._native = self._native, None
            with self.errors(failed="{path}: closing failed ({text})"):
                native.close()


def fjall_app_code(major: int) -> str:
    """An app holding a fjall store: the database open through the project's binding of
    the real crate (no other Python binding of it works here), one read done."""
    return (
        "from statemigrate import _native\n"
        f"db = _native.FjallWriter(sys.argv[1], {major}, False)\n"
        "db.names()\n"
    )


def fjall_description(major: int, unit: str) -> str:
    """The description of the engine of fjall ``major``, whose ``unit`` (partition,
    keyspace) holds a table."""
    return (
        f"fjall {major}.x (format {major}) through the bundled native binding: one {unit} per table"
    )


class FjallEngine(Engine):
    """What the fjall 2 and fjall 3 engines share; each declares its major and name rules."""

    major: ClassVar[int]
    extra: ClassVar[str] = "fjall"
    driver_module: ClassVar[str] = "statemigrate._native"
    facts: ClassVar[StoreFacts] = StoreFacts(errors=FJALL_ERRORS, private_metadata=(KIND_PREFIX,))
    # A reader copies a private image that an app writing meanwhile would tear; a writer
    # must be alone (fjall 3's lock shows a holder; fjall 2 takes none: nothing is seen).
    refuses_held: ClassVar[frozenset[str]] = frozenset({"read", "write"})
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic_multi_table=True,
        read_only_open=False,
        multi_process_readers=False,
        directory=True,
        min_key_len=1,
        max_key_len=MAX_KEY,
        in_place=True,
    )
    max_table_name_bytes: ClassVar[int | None] = 255
    space_factor: ClassVar[float] = 1.5

    @classmethod
    def stored_name(cls, name: str) -> str:
        """The keyspace (partition) name of table ``name``."""
        return name

    @classmethod
    def table_name(cls, stored: str) -> str:
        """The table name of keyspace (partition) ``stored``."""
        return stored

    @classmethod
    def detect(cls, path: Path) -> bool:
        """A directory whose ``version`` file is fjall's, of this engine's major."""
        return path.is_dir() and read_format(path) == cls.major

    @classmethod
    def _check_store(cls, path: Path, error: type[StateMigrateError]) -> None:
        """Refuse (``error``) a path that is not a fjall store of this major, before opening it."""
        if not path.is_dir():
            raise error(f"{path}: not a fjall store (a fjall store is a directory)")
        fmt = read_format(path)
        if fmt is None:
            raise error(f"{path}: not a fjall store (no version file starting with FJL)")
        if fmt != cls.major:
            known = {2: "fjall 2.x: --from fjall2", 3: "fjall 3.x: --from fjall3"}
            raise error(
                f"{path}: a fjall store of format {fmt} "
                f"({known.get(fmt, 'not read by this build')}), not {cls.name}"
            )

    @classmethod
    def _open_reader(cls, path: Path, opts: EngineOptions) -> Reader:
        cls._check_store(path, SourceError)
        return FjallReader(cls, path)

    @classmethod
    def _open_writer(cls, path: Path, opts: EngineOptions, create: bool) -> Writer:
        if not create:
            cls._check_store(path, DestinationError)
        elif path.exists() or path.is_symlink():
            raise DestinationError(f"{path}: already exists")
        return FjallWriter(cls, path, create=create)

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        """The format, and the keyspaces with their sizes (read from a private image)."""
        info: dict[str, Any] = {"format": read_format(path), "written_by": f"fjall {cls.major}.x"}
        if cls.facts.locks:
            info["lock_holder_pid"] = lock_holder(path, cls.facts.locks)
        with contextlib.suppress(StateMigrateError, OSError):
            reader = cls.open_reader(path)
            assert isinstance(reader, FjallReader)
            with reader:
                info.update(reader.sizes())
        return info


__all__ = [
    "FJALL_ERRORS",
    "FjallEngine",
    "FjallReader",
    "FjallWriter",
    "copy_store",
    "read_format",
]
