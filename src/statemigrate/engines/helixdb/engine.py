"""The HelixDB engine: its facts, detection and the doors to its reader and writer."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import SourceError
from ...locks import SideFile, lock_holder
from ..base import AppHolder, Capabilities, Engine, Reader, Writer
from ..options import EngineOptions, skip_foreign_tables_option
from .client import HELIX_FACTS, LOCK_NAME, database_of, other_helix_process
from .reader import HelixdbReader
from .writer import HelixdbWriter


@dataclass(frozen=True)
class HelixdbOptions(EngineOptions):
    """The HelixDB engine's options (``--skip-foreign-tables``)."""

    skip_foreign_tables: bool = skip_foreign_tables_option()


class HelixdbEngine(Engine):
    """HelixDB embedded through helix-db and helix-db-embedded."""

    name = "helixdb"
    extra = "helixdb"
    driver_module = "helixdb"
    description = (
        "HelixDB embedded: one node label per table, k (hex, range index), v (base64), ver"
    )
    options = HelixdbOptions
    facts = HELIX_FACTS
    # statemigrate's own writer lock: one writer at a time (taken when the writer opens).
    refuses_held = frozenset({"write"})
    capabilities = Capabilities(
        atomic_multi_table=True,
        read_only_open=False,  # its reader writes manifests: we read a private image
        multi_process_readers=True,
        directory=True,
        in_place=True,
    )
    # statemigrate's writer lock (its pid written in it: truncated at every open).
    side_files = (SideFile(LOCK_NAME, "statemigrate's HelixDB writer lock", made=True),)
    # About 10x the payload at 1M records (hex keys, base64 values, the index, the WAL);
    # 3-4x the source SQLite file at 20k records here.
    space_factor = 10.0
    suffixes = (".helixdb",)
    # An embedded client on the store's database, the store named on its command line
    # as an app names its data directory.
    app_holder = AppHolder(
        "from pathlib import Path\n"
        "from helixdb import Client, Disk\n"
        "from statemigrate.engines.helixdb import database_of\n"
        "database = database_of(Path(sys.argv[1]))\n"
        "client = Client.embedded(Disk(str(database.parent), database.name))\n"
    )

    @classmethod
    def require_driver(cls) -> Any:
        helix = super().require_driver()
        try:
            import helixdb_uniffi  # noqa: F401 - the embedded runtime
        except ImportError as exc:
            from ...errors import MissingDriverError

            raise MissingDriverError(cls.name, cls.extra) from exc
        return helix

    @classmethod
    def detect(cls, path: Path) -> bool:
        return path.is_dir() and database_of(path) is not None

    @classmethod
    def held_by(cls, path: Path) -> int | None:
        """Also a process with HelixDB loaded that names the store: its apps take no lock."""
        pid = super().held_by(path)
        return pid if pid is not None else other_helix_process(path)

    @classmethod
    def _open_reader(cls, path: Path, opts: HelixdbOptions) -> Reader:
        if not cls.detect(path):
            raise SourceError(f"{path}: not a HelixDB store (no database with manifest/ and wal/)")
        return HelixdbReader(cls, path, skip_foreign=opts.skip_foreign_tables)

    @classmethod
    def _open_writer(cls, path: Path, opts: HelixdbOptions, create: bool) -> Writer:
        return HelixdbWriter(cls, path, create=create)

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        database = database_of(path) or path
        manifests = sorted((database / "manifest").glob("*.manifest"))
        return {
            "manifest": manifests[-1].name if manifests else None,
            "writer_lock_pid": lock_holder(path, cls.facts.locks),
        }
