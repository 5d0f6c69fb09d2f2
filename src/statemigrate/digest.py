"""The digest of the contract (DESIGN.md, "The digest"), stable across releases.

Batch hashing runs in the native extension (GIL released); :func:`record_hash_py`
is the pure-Python reference built on ``xxhash`` that tests compare it with.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable
from dataclasses import dataclass

import xxhash

from .model import Batch, TableKind

MOD = 2**128


@dataclass(frozen=True)
class Digest:
    """Record count and sum of record hashes mod 2^128; digests of adjacent ranges add."""

    count: int = 0
    sum: int = 0

    def __add__(self, other: Digest) -> Digest:
        return Digest(self.count + other.count, (self.sum + other.sum) % MOD)

    def hex(self) -> str:
        """The sum as 32 lowercase hex digits."""
        return f"{self.sum:032x}"

    def to_json(self) -> dict:
        """A JSON-friendly form."""
        return {"count": self.count, "sum": self.hex()}

    @classmethod
    def from_json(cls, data: dict) -> Digest:
        """Inverse of :meth:`to_json`."""
        return cls(int(data["count"]), int(data["sum"], 16))


def record_bytes(key: bytes, value: bytes, version: int | None = None) -> bytes:
    """The bytes a record hashes over."""
    out = struct.pack("<Q", len(key)) + key + struct.pack("<Q", len(value)) + value
    if version is not None:
        out += struct.pack("<Q", version)
    return out


def record_hash_py(key: bytes, value: bytes, version: int | None = None) -> int:
    """Reference implementation of one record's hash (slow; for tests and checks)."""
    return xxhash.xxh3_128_intdigest(record_bytes(key, value, version))


def batch_digest_py(batch: Batch, versioned: bool) -> Digest:
    """Reference implementation of a batch digest."""
    total = 0
    for rec in batch:
        total += record_hash_py(rec[0], rec[1], rec[2] if versioned else None)
    return Digest(len(batch), total % MOD)


def batch_digest(batch: Batch, versioned: bool) -> Digest:
    """Digest of a batch of records, computed natively with the GIL released.

    Args:
        batch: a list of ``(key, value)`` or ``(key, value, version)`` tuples.
        versioned: whether the records carry versions.

    Returns:
        The batch's :class:`Digest`.
    """
    from . import _native

    count, total, _unsorted, _nbytes = _native.batch_digest(batch, versioned)
    return Digest(count, total)


def store_digest(tables: Iterable[tuple[str, TableKind, Digest]]) -> str:
    """The store digest over per-table digests, as 32 lowercase hex digits."""
    h = xxhash.xxh3_128()
    for name, kind, d in sorted(tables, key=lambda t: t[0].encode("utf-8")):
        raw = name.encode("utf-8")
        h.update(struct.pack("<Q", len(raw)) + raw)
        h.update(bytes([1 if kind is TableKind.VERSIONED else 0]))
        h.update(struct.pack("<Q", d.count))
        h.update(d.sum.to_bytes(16, "little"))
    return h.hexdigest()
