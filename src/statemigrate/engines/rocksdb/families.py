"""What RocksDB's reader and writer share: the driver's options, the checks of a store's
files, and the scan of a column family (one per table; ``default`` always exists)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import SourceError
from ...model import METADATA_TABLE, Batch, TableInfo
from ..base import StoreAccess
from .manifest import check_manifest
from .options_file import comparators
from .scan import checked_items, confirm_scan_end, scan_batches

DEFAULT_CF = "default"
CONFIG = "rocksdict-config.json"
DEFAULT_FORMAT_VERSION = 5
DEFAULT_COMPAT = "7.8"  # Debian 12's RocksDB
BYTEWISE = "leveldb.BytewiseComparator"  # RocksDB's default comparator: keys in byte order


# The writer's memory bounds. RocksDB keeps the index and filter blocks of every table
# file it opens outside any cache (so they grow with the store) and two 64 MiB memtables
# per column family: in an 8 MiB block cache and with 32 MiB memtables, peak anonymous
# memory of SQLite -> RocksDB was 96-124 MiB at 1M and 4M records, against 147-187 MiB
# (benchmarks/rss.py; no time cost measurable on a shared machine).
WRITER_BLOCK_CACHE_BYTES = 8 << 20
WRITER_MEMTABLE_BYTES = 32 << 20


def driver_options(
    rd: Any,
    format_version: int = DEFAULT_FORMAT_VERSION,
    create: bool = False,
    writer: bool = False,
) -> Any:
    opts = rd.Options(raw_mode=True)
    opts.create_if_missing(create)
    table = rd.BlockBasedOptions()
    table.set_format_version(format_version)
    if writer:
        table.set_cache_index_and_filter_blocks(True)
        table.set_block_cache(rd.Cache(WRITER_BLOCK_CACHE_BYTES))
        opts.set_write_buffer_size(WRITER_MEMTABLE_BYTES)
    opts.set_block_based_table_factory(table)
    opts.set_atomic_flush(True)
    opts.set_paranoid_checks(True)
    return opts


def check_comparators(store: Path, shown: Path, error: type[SourceError] = SourceError) -> None:
    """Refuse a store whose column families are not ordered by RocksDB's bytewise
    comparator, as its newest OPTIONS file names them (statemigrate's model is keys in
    byte order; rocksdict's default mode, for one, orders its encoded objects with its
    own comparator, "rocksdict"). A store without OPTIONS file is RocksDB's to refuse
    when opened (:data:`ROCKSDB_ERRORS`).

    Raises:
        SourceError: (or ``error``) a comparator that is not bytewise (exit 4).
    """
    try:
        found = comparators(store)
    except (OSError, ValueError):
        return  # no readable OPTIONS file: the open says what the comparator is
    for family, name in sorted(found.items()):
        if name != BYTEWISE:
            raise error(_comparator_refusal(shown, name, family))


def check_store(store: Path, shown: Path) -> None:
    """Refuse the files at ``store`` (the store, or its private image) before RocksDB opens
    them: a damaged MANIFEST (:func:`.manifest.check_manifest`), a comparator that is not
    bytewise (:func:`check_comparators`). ``shown`` is the store's path for messages.

    Raises:
        SourceError: either (exit 4).
    """
    check_manifest(store, shown=shown)
    check_comparators(store, shown)


def _comparator_refusal(path: Path, name: str, family: str | None = None) -> str:
    where = f" (column family {family!r})" if family else ""
    return (
        f"{path}: RocksDB comparator {name!r}{where} is not bytewise: not supported "
        f"(statemigrate reads and writes keys in byte order, RocksDB's {BYTEWISE})"
    )


class FamilyScans(StoreAccess):
    """The reads both sides share: scan a column family, confirm its end, read the metadata."""

    def _cf(self, name: str) -> Any:
        """The column family of table ``name`` (each side opens it its way)."""
        raise NotImplementedError

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        return scan_batches(self._cf(table.name), table, after, max_records, max_bytes)

    def confirm_end(self, table: TableInfo, after: bytes | None, last: bytes | None) -> None:
        where = f"{self.path} table {table.name!r}"
        with self.errors(where=where, failed="{where}: the scan stopped early ({text})"):
            confirm_scan_end(self._cf(table.name), last, after, where)

    def _meta_items(self) -> list[tuple[bytes, bytes]]:
        """The metadata column family, read whole and checked (damage is SourceError)."""
        where = f"{self.path} metadata"
        with self.errors(where=where, failed="{where}: read failed ({text})"):
            return list(checked_items(self._cf(METADATA_TABLE), where))
