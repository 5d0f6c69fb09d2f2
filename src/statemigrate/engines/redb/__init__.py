"""redb through the project's own binding of the real crate (``statemigrate._native``).

The PyPI package ``redb`` is an empty module, so the Rust extension binds redb 4.x
(file format 3), redb 2.6 (format 2) and redb 1.5 (format 1) as renamed Cargo
dependencies; the format is read from the file header, never by opening the file
with redb. Tables in the default layout are ``&[u8] -> &[u8]`` (plain) and
``&[u8] -> (u64, &[u8])`` (versioned). Any other table (typed keys, multimap,
user-defined types) is read with an order-preserving key encoding and its redb
types recorded in :attr:`TableInfo.meta`, so that writing it back restores it.

Every table also records the file format it was read from. A new redb destination
is written back as the source was: that format, and each table's exact stored type
names (classification byte and tuple layout included), so that the redb version
that wrote the source opens the result; ``redb_format`` converts on purpose.
"""

from __future__ import annotations

from ...model import METADATA_TABLE
from .engine import RedbEngine
from .header import REDB_FACTS, read_header
from .reader import RedbReader
from .tables import choose_format, recorded_format, table_info
from .writer import RedbWriter

__all__ = [
    "METADATA_TABLE",
    "REDB_FACTS",
    "RedbEngine",
    "RedbReader",
    "RedbWriter",
    "choose_format",
    "read_header",
    "recorded_format",
    "table_info",
]
