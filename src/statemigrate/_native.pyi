"""Type stub of the private native extension."""

from typing import Any

def batch_digest(records: list[tuple[bytes, ...]], versioned: bool) -> tuple[int, int, int, int]:
    """(count, sum mod 2^128, index of the first record out of key order or -1, payload bytes)."""

def take_batch(
    rows: Any, max_records: int, max_bytes: int, decode: str = "as_is"
) -> tuple[list[tuple[Any, ...]], int]:
    """Up to max_records rows from an iterator, stopping once max_bytes is reached.

    decode: "as_is", "be_version_prefix" (value = u64be(version) + value) or
    "signed_version" (SQLite's signed INTEGER read back modulo 2^64).
    """

def lmdb_check(path: str) -> str | None:
    """None if every page an LMDB data.mdb's newest meta reaches is sound, else what is not."""

def rocksdb_manifest_check(path: str) -> str | None:
    """None if a RocksDB MANIFEST's records are framed and checksummed as written, else what is not."""

# The redb engine (rust/src/redb_engine): formats 1, 2 (redb 1.5, 2.6) and 3 (redb 4.x;
# redb 2.6 for a format-3 file spelt as redb 2.6 spells it).
# A table description is a dict: {"name": str, "multimap": bool, "kind": "plain" |
# "versioned" | "typed" | "custom", "key": TypeDesc, "value": TypeDesc}, where a
# TypeDesc is {"name": str, "class": str, "width": int | None, "legacy": bool}. Writers
# also take "exact": bool (write the types back as described, not re-spelt for the
# writing redb) and "bytewise": list[str] (user-defined types asserted to be ordered
# by their bytes).

class RedbBusyError(Exception): ...
class RedbCorruptError(Exception): ...
class RedbUnsupportedError(Exception): ...
class RedbRefusedError(Exception): ...
class RedbError(Exception): ...

class RedbReader:
    format: int
    def __init__(self, path: str, format: int) -> None: ...
    def list_tables(self) -> list[dict[str, Any]]: ...
    def metadata(self) -> list[tuple[str, bytes]]: ...
    def read_batch(
        self,
        table: dict[str, Any],
        after: bytes | None = None,
        max_records: int = 10000,
        max_bytes: int = 8388608,
    ) -> list[tuple[bytes, ...]]: ...
    def close(self) -> None: ...

class RedbWriter:
    format: int
    def __init__(self, path: str, format: int, create: bool, redb2: bool = False) -> None: ...
    def list_tables(self) -> list[dict[str, Any]]: ...
    def metadata(self) -> list[tuple[str, bytes]]: ...
    def kind_of(self, table: dict[str, Any]) -> str: ...
    def create_table(self, table: dict[str, Any], kind: str) -> None: ...
    def write_batch(
        self,
        table: dict[str, Any],
        kind: str,
        records: list[tuple[bytes, ...]],
        metadata: list[tuple[str, bytes | None]],
    ) -> None: ...
    def put_metadata(self, metadata: list[tuple[str, bytes | None]]) -> None: ...
    def read_batch(
        self,
        table: dict[str, Any],
        after: bytes | None = None,
        max_records: int = 10000,
        max_bytes: int = 8388608,
    ) -> list[tuple[bytes, ...]]: ...
    def drop_table(self, name: str, metadata: list[tuple[str, bytes | None]]) -> None: ...
    def sync(self) -> None: ...
    def finish(self) -> None: ...
    def close(self) -> None: ...

# The benchmarks' ceilings: only in a build with the cargo feature `bench`.
def redb_bulk_load(path: str, records: int, key_len: int, value_len: int) -> None: ...
def redb_full_scan(path: str) -> tuple[int, int]: ...
def redb_encode_key(type_name: str, stored: bytes, legacy_tuples: bool = False) -> bytes: ...
def redb_table_kind(table: dict[str, Any], format: int, redb2: bool = False) -> str: ...
def redb_table_problems(
    table: dict[str, Any], format: int, redb2: bool = False
) -> list[tuple[str, str, str]]:
    """(part, type name, reason) for each reason the writer cannot write the table."""
