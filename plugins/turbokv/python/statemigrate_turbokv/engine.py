"""TurboKV 0.6 stores (the ``turbokv`` engine), through this distribution's binding of the crate.

Layout: one flat key space; a record of table ``t`` is stored under ``t ‖ 0x00 ‖ key``
(table names hold no NUL, so order and parsing are exact), a versioned table's value
as ``u64be(version) ‖ value``, metadata under the table name ``__statemigrate__``
with a ``kind:<table>`` entry for every table statemigrate creates (``versioned`` or
``plain``: a table without records exists only through it). A table of an app's store
is any name its keys start with.

A store is a directory TurboKV made: its ``MANIFEST`` starts with ``HNSHMNFT``, a
``wal/*.wal`` segment with ``TURBOKV\\0``, or it holds ``.turbokv.lock``. Nothing
else is ever opened, because TurboKV writes its files into any directory it opens.

Opening a TurboKV store changes it (manifest migration, a new WAL segment, a flush
and compaction on close), so a reader opens a private image (:mod:`statemigrate.engines.snapshot`):
the MANIFEST and WAL segments copied, SSTables hard-linked, and the MANIFEST's
SSTable paths (absolute in TurboKV 0.6, so a copied store does not open) rewritten
relative to the image. The writer rewrites them too whenever it closes a store, so
the store it builds opens after its rename into place.

The writer's durability is TurboKV's preset (destination option ``preset``):
``durable`` (the WAL written before each batch returns, synced in ``finish``) or
``paranoid`` (synced per batch); ``fast`` keeps no WAL and is refused for a
destination. Every batch is one atomic ``write_batch``.
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any, ClassVar

from statemigrate.engines import snapshot
from statemigrate.engines.base import (
    META_KIND_PREFIX,
    AppHolder,
    Capabilities,
    Engine,
    Reader,
    StoreFacts,
    Writer,
    recorded_tables,
)
from statemigrate.engines.errors import DriverErrors, Meaning, Rule
from statemigrate.engines.options import EngineOptions, option
from statemigrate.errors import DestinationError, SourceError, StateMigrateError, UsageError
from statemigrate.locks import LockProbe, SideFile, lock_holder
from statemigrate.model import METADATA_TABLE, Batch, TableInfo

MANIFEST = "MANIFEST"
MANIFEST_MAGIC = b"HNSHMNFT"
WAL_DIR = "wal"
WAL_MAGIC = b"TURBOKV\x00"
LOCK_FILE = ".turbokv.lock"
PRESETS = ("durable", "paranoid", "fast")
COMPRESSIONS = ("lz4", "snappy", "zstd", "none")

LOCK_PROBES = (LockProbe(LOCK_FILE, "flock"),)
BUSY_HINT = "stop the application that uses it"
TURBOKV_ERRORS = DriverErrors(
    rules=(
        Rule(Meaning.BUSY, types=("TurbokvBusyError",)),
        Rule(Meaning.FULL, words=("no space", "enospc", "os error 28")),
        Rule(
            Meaning.DAMAGED,
            types=("TurbokvCorruptError",),
            message="{path}: corrupt TurboKV store ({text})",
        ),
        Rule(Meaning.REFUSED, types=("TurbokvRefusedError",)),
        Rule(
            Meaning.FAILED,
            types=("PanicException",),
            message="{path}: corrupt TurboKV store (TurboKV stopped: {text})",
        ),
    ),
    driver=("TurbokvBusyError", "TurbokvCorruptError", "TurbokvRefusedError", "TurbokvError"),
    failed="{path}: TurboKV error while {doing} ({text})",
    whole_text=True,
)
TURBOKV_FACTS = StoreFacts(
    errors=TURBOKV_ERRORS,
    locks=LOCK_PROBES,
    private_metadata=(META_KIND_PREFIX,),
    busy_hint=BUSY_HINT,
)


def _starts_with(path: Path, magic: bytes) -> bool:
    try:
        with open(path, "rb") as f:
            return f.read(len(magic)) == magic
    except OSError:
        return False


def signature(path: Path) -> str | None:
    """Which of TurboKV's files shows that ``path`` is a TurboKV store, or None (reads only)."""
    if not path.is_dir():
        return None
    if _starts_with(path / MANIFEST, MANIFEST_MAGIC):
        return "MANIFEST"
    with contextlib.suppress(OSError):
        for wal in sorted((path / WAL_DIR).glob("*.wal")):
            if _starts_with(wal, WAL_MAGIC):
                return "WAL"
    if (path / LOCK_FILE).is_file():
        return LOCK_FILE
    return None


def private_image(path: Path) -> Path:
    """A private image of the TurboKV store at ``path`` that TurboKV may change when it opens it
    (its MANIFEST's paths still to be made relative: the binding's ``relative_manifest``).

    Raises:
        OSError: the store cannot be read.
    """

    def way(f: snapshot.StoreFile) -> snapshot.Way:
        if f.rel == Path(LOCK_FILE):
            return "skip"  # TurboKV makes its own and flocks it
        # Table files are written once, never changed in place; the MANIFEST (rewritten
        # by the reader) and WAL segments (repaired in place) are copied.
        return "link" if f.rel.suffix == ".sst" else "copy"

    shadow = snapshot.private_dir("turbokv")
    try:
        snapshot.replicate(path, shadow, way)
    except BaseException:
        snapshot.remove(shadow)
        raise
    return shadow


def _tables(names: list[str], meta: Mapping[str, bytes]) -> list[TableInfo]:
    """Tables with records and tables with a ``kind:`` entry (empty ones), sorted."""
    found = set(names)
    found.update(k[len(META_KIND_PREFIX) :] for k in meta if k.startswith(META_KIND_PREFIX))
    found.discard(METADATA_TABLE)
    return recorded_tables(meta, sorted(found, key=lambda n: n.encode("utf-8")))


class TurbokvReader(Reader):
    """A private image of a TurboKV store (the store itself never changes)."""

    threadsafe_reads = True
    facts = TURBOKV_FACTS

    def __init__(self, path: Path) -> None:
        native = TurbokvEngine.require_driver()
        self.path = path
        self._native: Any = None
        self.shadow: Path | None = None
        # A held store was refused before (TurbokvEngine.refuses_held).
        try:
            self.shadow = private_image(path)
        except OSError as exc:
            raise SourceError(
                f"{path}: cannot be read ({exc.strerror or exc}); if an app is writing it, "
                "stop the app and run again"
            ) from exc
        with self.opening(failed="{path}: not a readable TurboKV store ({text})"):
            # TurboKV 0.6 names SSTables by absolute paths: the image's must be its own.
            native.relative_manifest(str(self.shadow), str(path.absolute()))
            self._native = native.TurbokvReader(str(self.shadow))
            self.snapshot_metadata = dict(self._native.metadata())
            self.snapshot_tables = _tables(self._native.names(), self.snapshot_metadata)

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        """Whole batches from the binding, each read and built with the GIL released."""
        while True:
            batch = self._native.read_batch(
                table.name, after, max_records, max_bytes, table.versioned
            )
            if not batch:
                return
            yield batch
            after = batch[-1][0]

    def close(self) -> None:
        """Close the database and remove the private image."""
        if self._native is not None:
            native, self._native = self._native, None
            with contextlib.suppress(Exception):  # the image goes anyway
                native.close()
        snapshot.remove(self.shadow)
        self.shadow = None


class TurbokvWriter(Writer):
    """Writes a TurboKV store: one atomic ``write_batch`` per batch, its metadata included."""

    facts = TURBOKV_FACTS

    def __init__(self, path: Path, create: bool, preset: str, compression: str) -> None:
        native = TurbokvEngine.require_driver()
        self.path = path
        self._native: Any = None
        with self.opening(failed="{path}: cannot open TurboKV for writing ({text})"):
            self._native = native.TurbokvWriter(str(path.absolute()), create, preset, compression)

    @staticmethod
    def _meta(metadata: Mapping[str, bytes | None] | None) -> list[tuple[str, bytes | None]]:
        return list((metadata or {}).items())

    def raw_metadata(self) -> dict[str, bytes]:
        with self.errors():
            return dict(self._native.metadata())

    def list_tables(self) -> list[TableInfo]:
        with self.errors():
            return _tables(self._native.names(), self.raw_metadata())

    def create_table(self, table: TableInfo) -> None:
        kind = b"versioned" if table.versioned else b"plain"
        with self.errors(failed=f"{{path}}: cannot create table {table.name!r} ({{text}})"):
            self._native.put_metadata([(META_KIND_PREFIX + table.name, kind)])

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        with self.errors(failed="{path}: write failed ({text})"):
            self._native.write_batch(table.name, list(batch), table.versioned, self._meta(metadata))

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        with self.errors(failed="{path}: write failed ({text})"):
            self._native.put_metadata(self._meta(metadata))

    def finish(self) -> None:
        """Flush the memtables to SSTables, sync the WAL and close the store (its MANIFEST
        rewritten with relative paths, so it opens after the rename); a later call reopens it."""
        with self.errors(failed="{path}: sync failed ({text})"):
            self._native.finish()

    def sync(self) -> None:
        with self.errors(failed="{path}: sync failed ({text})"):
            self._native.persist()

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        """Batches of ``table`` as written so far (in-place upgrades; nothing else writes it)."""
        while True:
            with self.errors():
                batch = self._native.read_batch(
                    table.name, after, max_records, max_bytes, table.versioned
                )
            if not batch:
                return
            yield batch
            after = batch[-1][0]

    def drop_table(self, name: str) -> None:
        """Delete the table's records in batches, the last one atomic with its kind's removal
        (a kill between them leaves the table, which the upgrade's journal drops again)."""
        with self.errors(failed=f"{{path}}: cannot drop table {name!r} ({{text}})"):
            self._native.clear_table(name, [(META_KIND_PREFIX + name, None)])

    def backup(self, path: Path) -> None:
        """A copy of the store made while it is closed after a flush (its MANIFEST's paths
        relative, so the copy opens where it is); the store reopens on the next call."""
        self.finish()
        snapshot.replicate(self.path, path)  # no link followed out of the store

    def close(self) -> None:
        if self._native is not None:
            native, self._native = self._native, None
            with self.errors(failed="{path}: closing failed ({text})"):
                native.close()


@dataclass(frozen=True)
class TurbokvOptions(EngineOptions):
    """The TurboKV engine's options (``--dest-option preset=paranoid``)."""

    preset: str = option(
        "durable",
        "TurboKV's durability preset: durable (WAL, synced when the store is finished) or "
        "paranoid (WAL synced per batch); fast (no WAL) is refused for a destination",
        applies="dest",
        choices=PRESETS,
    )
    compression: str = option("lz4", "SSTable compression", applies="dest", choices=COMPRESSIONS)


def _app_code() -> str:
    """An app holding a TurboKV store: the real crate through this binding, one read done."""
    return (
        "from statemigrate_turbokv import _native\n"
        "import os\n"
        "db = _native.TurbokvWriter(os.path.abspath(sys.argv[1]), False)\n"
        "db.names()\n"
    )


class TurbokvEngine(Engine):
    """TurboKV 0.6 stores through the ``statemigrate-turbokv`` distribution's binding."""

    name: ClassVar[str] = "turbokv"
    extra: ClassVar[str] = "turbokv"
    driver_module: ClassVar[str] = "statemigrate_turbokv._native"
    description: ClassVar[str] = (
        "TurboKV 0.6 through the statemigrate-turbokv binding: one flat key space, "
        "table ‖ 0x00 ‖ key"
    )
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic_multi_table=True,
        read_only_open=False,
        multi_process_readers=False,
        directory=True,
        in_place=True,
    )
    options: ClassVar[type[EngineOptions]] = TurbokvOptions
    facts = TURBOKV_FACTS
    # A reader copies a private image an app writing would tear; a writer must be alone.
    refuses_held: ClassVar[frozenset[str]] = frozenset({"read", "write"})
    suffixes: ClassVar[tuple[str, ...]] = (".turbokv",)
    volatile_files: ClassVar[tuple[str, ...]] = (LOCK_FILE,)
    side_files: ClassVar[tuple[SideFile, ...]] = (
        SideFile(LOCK_FILE, "TurboKV's lock file", made=True),
    )
    # TurboKV flocks .turbokv.lock while a process has the store open.
    app_holder = AppHolder(_app_code(), blocks_readers=True)
    space_factor: ClassVar[float] = 2.0

    @classmethod
    def require_driver(cls) -> Any:
        """The binding, or an error saying how to build it (it is this distribution's own)."""
        try:
            return importlib.import_module(cls.driver_module)
        except ImportError as exc:
            raise UsageError(
                "the turbokv engine's binding (statemigrate_turbokv._native) is not built",
                hint="pip install -e plugins/turbokv (needs a CPU with AES instructions)",
            ) from exc

    @classmethod
    def detect(cls, path: Path) -> bool:
        """A directory with TurboKV's MANIFEST, WAL segment or lock file (read, never opened)."""
        return signature(path) is not None

    @classmethod
    def _check_store(cls, path: Path, error: type[StateMigrateError]) -> None:
        """Refuse (``error``) a path that is not a TurboKV store, before TurboKV opens it."""
        if not path.is_dir():
            raise error(f"{path}: not a TurboKV store (a TurboKV store is a directory)")
        if signature(path) is None:
            raise error(
                f"{path}: not a TurboKV store (no MANIFEST starting with HNSHMNFT, "
                "no wal/*.wal starting with TURBOKV, no .turbokv.lock)"
            )

    @classmethod
    def _writer_options(cls, opts: TurbokvOptions) -> TurbokvOptions:
        if opts.preset == "fast":
            raise UsageError(
                "turbokv: preset=fast keeps no WAL, so a destination could lose batches it "
                "acknowledged; use durable (the default) or paranoid"
            )
        return opts

    @classmethod
    def _open_reader(cls, path: Path, opts: TurbokvOptions) -> Reader:
        cls._check_store(path, SourceError)
        return TurbokvReader(path)

    @classmethod
    def _open_writer(cls, path: Path, opts: TurbokvOptions, create: bool) -> Writer:
        parsed = cls._writer_options(opts)
        if not create:
            cls._check_store(path, DestinationError)
        elif path.exists() or path.is_symlink():
            raise DestinationError(f"{path}: already exists")
        return TurbokvWriter(path, create, parsed.preset, parsed.compression)

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        """The files that show the format, the MANIFEST's format version, the store's
        size, and the holder's pid (read without opening the store)."""
        info: dict[str, Any] = {"written_by": "TurboKV 0.6", "signature": signature(path)}
        with contextlib.suppress(OSError):
            with open(path / MANIFEST, "rb") as f:
                head = f.read(12)
            if len(head) == 12 and head[:8] == MANIFEST_MAGIC:
                info["manifest_version"] = int.from_bytes(head[8:12], "little")
        with contextlib.suppress(OSError):
            info["disk_bytes"] = sum(
                p.stat().st_size for p in path.rglob("*") if p.is_file() and not p.is_symlink()
            )
            info["sstables"] = sum(1 for _ in path.rglob("*.sst"))
        info["lock_holder_pid"] = lock_holder(path, LOCK_PROBES)
        return info


__all__ = ["TURBOKV_ERRORS", "TurbokvEngine", "TurbokvReader", "TurbokvWriter", "signature"]
