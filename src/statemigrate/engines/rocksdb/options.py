"""RocksDB's typed options: the table format and RocksDB release written, an app's own layout."""

from __future__ import annotations

from dataclasses import dataclass

from ..options import EngineOptions, layout_option, option, skip_foreign_tables_option
from .families import DEFAULT_COMPAT, DEFAULT_FORMAT_VERSION
from .options_file import COMPAT_CHOICES, NEWEST

# Block-based table formats the bundled RocksDB writes (it refuses 7 and up; 0 and 1
# are legacy formats that newer RocksDB releases no longer write).
FORMAT_VERSIONS = range(2, 7)


@dataclass(frozen=True)
class RocksdbOptions(EngineOptions):
    """The RocksDB engine's options (``--dest-option rocksdb_format_version=N``)."""

    rocksdb_format_version: int = option(
        DEFAULT_FORMAT_VERSION,
        "block-based table format written (5 is readable since RocksDB 6.6)",
        applies="dest",
        expects=f"a whole number from {FORMAT_VERSIONS[0]} to {FORMAT_VERSIONS[-1]}",
        choices=FORMAT_VERSIONS,
        flag="--rocksdb-format-version",
    )
    rocksdb_compat: str = option(
        DEFAULT_COMPAT,
        "the oldest RocksDB that must read the store written: its OPTIONS file keeps only "
        f"the keys that release knows ({NEWEST!r}: the bundled RocksDB's file as it is)",
        applies="dest",
        choices=COMPAT_CHOICES,
    )
    layout: str | None = layout_option("in RocksDB, such as key prefixes in one column family")
    skip_foreign_tables: bool = skip_foreign_tables_option(
        "with a layout: leave out records and column families the layout does not claim "
        "instead of refusing"
    )
