"""The state model (DESIGN.md, "The state model"): tables of byte keys in byte order.

A record is a tuple: ``(key, value)`` in a plain table, ``(key, value, version)`` in
a versioned one. Batches are plain Python lists of such tuples so that the native
digest and the engines' bulk calls take them without conversion.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import Any

from .errors import UsageError

Record = tuple[bytes, bytes] | tuple[bytes, bytes, int]
Batch = list  # list[Record]

METADATA_TABLE = "__statemigrate__"
MAX_VERSION = 2**64 - 1


class TableKind(str, enum.Enum):
    """Whether a table's records carry a version."""

    PLAIN = "plain"
    VERSIONED = "versioned"


@dataclass(frozen=True)
class TableInfo:
    """A table of the state model.

    Attributes:
        name: 1-255 bytes of UTF-8 without NUL.
        kind: plain or versioned.
        meta: engine-specific facts that a conversion carries (for example the redb
            key and value types); stored in the store's metadata, never in records.
    """

    name: str
    kind: TableKind = TableKind.PLAIN
    meta: dict[str, Any] = field(default_factory=dict, compare=False, hash=False)

    @property
    def versioned(self) -> bool:
        """True when the table's records carry a version."""
        return self.kind is TableKind.VERSIONED


def check_table_name(name: str) -> str:
    """Check a table name against the contract.

    Args:
        name: the name to check.

    Returns:
        The name, unchanged.

    Raises:
        UsageError: empty, over 255 bytes, holds NUL, or is the metadata table's name.
    """
    raw = name.encode("utf-8", "surrogatepass")
    if not 1 <= len(raw) <= 255 or "\x00" in name:
        raise UsageError(f"invalid table name {name!r}: must be 1-255 bytes of UTF-8 without NUL")
    if name == METADATA_TABLE:
        raise UsageError(f"{METADATA_TABLE!r} is reserved for statemigrate's metadata")
    return name


def batch_nbytes(batch: Batch) -> int:
    """Payload bytes of a batch (keys plus values)."""
    return sum(len(r[0]) + len(r[1]) for r in batch)
