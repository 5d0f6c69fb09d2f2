"""Type stub of the private native extension."""

from typing import Any

def batch_digest(records: list[tuple[bytes, ...]], versioned: bool) -> tuple[int, int, int, int]:
    """(count, sum mod 2^128, index of the first record out of key order or -1, payload bytes)."""

class HeldBatch:
    """A batch held in Rust memory (a native reader's, for a native writer of the same binding)."""

    def __len__(self) -> int: ...
    def __getitem__(self, i: int) -> tuple[Any, ...]: ...
    def digest(self, versioned: bool) -> tuple[int, int, int, int]:
        """As batch_digest over the same records as a list."""

def take_batch(
    rows: Any, max_records: int, max_bytes: int, decode: str = "as_is"
) -> tuple[list[tuple[Any, ...]], int]:
    """Up to max_records rows from an iterator, stopping once max_bytes is reached.

    decode: "as_is", "be_version_prefix" (value = u64be(version) + value) or
    "signed_version" (SQLite's signed INTEGER read back modulo 2^64).
    """

class ExternalSort:
    """op.rekey's external sort: batches in any order, out in key order, bounded memory."""
    def __init__(
        self,
        versioned: bool,
        directory: str | None = None,
        run_bytes: int | None = None,
        make_directory: bool = False,
    ) -> None: ...
    @property
    def spilled_runs(self) -> int: ...
    def push(self, records: list[tuple[Any, ...]]) -> None: ...
    def finish(self) -> None: ...
    def take(self, max_records: int, max_bytes: int) -> list[tuple[Any, ...]]: ...

def lmdb_check(path: str) -> str | None:
    """None if every page an LMDB data.mdb's newest meta reaches is sound, else what is not."""

def lmdb_digests(
    path: str, txnid: int, tables: list[tuple[bytes, bool]]
) -> list[tuple[int, int, int]]:
    """Each table's (count, digest sum, payload bytes) in transaction ``txnid``'s snapshot
    of an LMDB data.mdb, walked from its pages; ValueError when the walk cannot read it."""

def rocksdb_manifest_check(path: str) -> str | None:
    """None if a RocksDB MANIFEST's records are framed and checksummed as written, else what is not."""

# The redb engine (rust/src/engines/redb): formats 1, 2 (redb 1.5, 2.6) and 3 (redb 4.x;
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

# What the reader and the writer both answer (a stub-only base: at run time the two
# classes are separate, each with these methods).
class _RedbTables:
    format: int
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

class RedbReader(_RedbTables):
    def __init__(self, path: str, format: int) -> None: ...
    def read_held(
        self,
        table: dict[str, Any],
        after: bytes | None = None,
        max_records: int = 10000,
        max_bytes: int = 8388608,
    ) -> HeldBatch:
        """read_batch's batch, held in Rust for a RedbWriter."""
    def digests(self, tables: list[dict[str, Any]]) -> list[tuple[int, int, int]]:
        """Each table's (count, digest sum, payload bytes), read and hashed in Rust."""
    def count(self, table: dict[str, Any]) -> int: ...

class RedbWriter(_RedbTables):
    def __init__(self, path: str, format: int, create: bool, redb2: bool = False) -> None: ...
    def kind_of(self, table: dict[str, Any]) -> str: ...
    def create_table(self, table: dict[str, Any], kind: str) -> None: ...
    def write_batch(
        self,
        table: dict[str, Any],
        kind: str,
        records: list[tuple[bytes, ...]] | HeldBatch,
        metadata: list[tuple[str, bytes | None]],
    ) -> None: ...
    def put_metadata(self, metadata: list[tuple[str, bytes | None]]) -> None: ...
    def drop_table(self, name: str, metadata: list[tuple[str, bytes | None]]) -> None: ...
    def sync(self) -> None: ...
    def finish(self) -> None: ...

# The benchmarks' ceilings: only in a build with the cargo feature `bench`.
def redb_bulk_load(
    path: str, records: int, key_len: int, value_len: int, batch: int = 0
) -> None: ...
def redb_full_scan(path: str) -> tuple[int, int]: ...
def fjall_create_tables(
    path: str, major: int, n: int, ingest: bool | None = None, reopen_every: int = 0
) -> None:
    """fjall `major`'s own store of `n` one-record keyspaces `t00000`, ... (no reopening;
    fjall 3: one every `reopen_every` creations); `ingest` None: fjall 3 inserts, 2 ingests."""

def redb_encode_key(type_name: str, stored: bytes, legacy_tuples: bool = False) -> bytes: ...
def redb_table_kind(table: dict[str, Any], format: int, redb2: bool = False) -> str: ...
def redb_table_problems(
    table: dict[str, Any], format: int, redb2: bool = False
) -> list[tuple[str, str, str]]:
    """(part, type name, reason) for each reason the writer cannot write the table."""

def redb_settle_copy(path: str, format: int, redb2: bool = False, upgrade: bool = False) -> None:
    """Make a byte copy of a redb file a clean file of its redb version (upgraded 2 to 3)."""

# fjall engines (fjall 3.x: format 3; fjall 2.x: format 2), see engines/_fjall.py.
class FjallBusyError(Exception): ...
class FjallCorruptError(Exception): ...
class FjallRefusedError(Exception): ...
class FjallError(Exception): ...

# What the reader and the writer both answer (a stub-only base: at run time the two
# classes are separate, each with these methods).
class _FjallTables:
    def names(self) -> list[str]: ...
    def metadata(self) -> list[tuple[str, bytes]]: ...
    def read_batch(
        self,
        name: str,
        after: bytes | None = None,
        max_records: int = 10000,
        max_bytes: int = 8388608,
        versioned: bool = False,
    ) -> list[tuple[bytes, ...]]: ...
    def close(self) -> None: ...

class FjallReader(_FjallTables):
    def __init__(self, path: str, major: int) -> None: ...
    def approximate_len(self, name: str) -> int: ...
    def disk_space(self, name: str | None = None) -> int: ...

class FjallWriter(_FjallTables):
    def __init__(self, path: str, major: int, create: bool) -> None: ...
    def create_table(self, name: str, meta: list[tuple[str, bytes | None]]) -> None: ...
    def write_batch(
        self,
        name: str,
        batch: list[tuple[bytes, ...]],
        versioned: bool,
        meta: list[tuple[str, bytes | None]],
    ) -> None: ...
    def drop_table(self, name: str, meta: list[tuple[str, bytes | None]]) -> None: ...
    def put_metadata(self, meta: list[tuple[str, bytes | None]]) -> None: ...
    def persist(self) -> None: ...

def fjall2_valid_name(name: str) -> bool: ...
