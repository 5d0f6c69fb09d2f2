"""redb through the project's own binding of the real crate (``statemigrate._native``).

The PyPI package ``redb`` is an empty module, so the Rust extension binds redb 4.x
(file format 3), redb 2.6 (format 2) and redb 1.5 (format 1) as renamed Cargo
dependencies; the format is read from the file header, never by opening the file
with redb. Tables in the default layout are ``&[u8] -> &[u8]`` (plain) and
``&[u8] -> (u64, &[u8])`` (versioned). Any other table (typed keys, multimap,
user-defined types) is read with an order-preserving key encoding and its redb
types recorded in :attr:`TableInfo.meta`, so that writing it back restores it.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterator, Mapping
from pathlib import Path
from types import TracebackType
from typing import Any, ClassVar

from ..errors import DestinationError, SourceError, StateMigrateError, StoreBusyError, UsageError
from ..model import METADATA_TABLE, Batch, Record, TableInfo, TableKind
from .base import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_RECORDS,
    META_TABLE_PREFIX,
    Capabilities,
    Engine,
    Reader,
    Writer,
    check_options,
)

MAGIC = b"redb\x1a\n\xa9\r\n"
HEADER_LEN = 320  # 64-byte header + two 128-byte commit slots
GOD_BYTE = 9
PRIMARY_BIT = 1
RECOVERY_REQUIRED = 2
SLOT_OFFSETS = (64, 192)
PAGE_SIZE_OFFSET = 12

# Which redb releases write each file format (for ``inspect`` and refusals).
FORMAT_WRITERS = {
    1: "redb 1.x",
    2: "redb 2.0-2.6",
    3: "redb 2.6 (with the format-3 option), 3.x and 4.x",
}
WRITABLE_FORMATS = (2, 3)
DEFAULT_FORMAT = 3
OPTIONS = {"redb_format", "bytewise_key_types"}

# How a native table kind maps to the state model.
_TYPED = ("typed", "custom")


def read_header(path: Path) -> dict[str, Any]:
    """The facts of a redb file header, read with plain file I/O.

    Raises:
        SourceError: not a redb file, or too short to hold a header.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_LEN)
    except OSError as exc:
        raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if head[: len(MAGIC)] != MAGIC:
        raise SourceError(f"{path}: not a redb file (bad magic)")
    if len(head) < HEADER_LEN:
        raise SourceError(
            f"{path}: truncated redb file ({len(head)} bytes, shorter than its header)"
        )
    god = head[GOD_BYTE]
    slot = 1 if god & PRIMARY_BIT else 0
    fmt = head[SLOT_OFFSETS[slot]]
    (page_size,) = struct.unpack_from("<I", head, PAGE_SIZE_OFFSET)
    return {
        "format": fmt,
        "written_by": FORMAT_WRITERS.get(fmt, "unknown"),
        "page_size": page_size,
        "needs_repair": bool(god & RECOVERY_REQUIRED),
        "commit_slot": slot,
    }


def holder_pid(path: Path) -> int | None:
    """The pid holding a ``flock`` on ``path`` (every redb version takes one), from /proc/locks."""
    try:
        inode = path.stat().st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF" (a blocked waiter has "->")
        if len(parts) >= 6 and parts[1] == "FLOCK" and "->" not in parts:
            dev_inode = parts[5].rsplit(":", 1)
            if len(dev_inode) == 2 and dev_inode[1] == str(inode) and parts[4].isdigit():
                pid = int(parts[4])
                if pid > 0 and pid != os.getpid():
                    return pid
    return None


def _one_line(msg: object) -> str:
    return " ".join(str(msg).split())


def _native_error(exc: BaseException, path: Path, *, writing: bool) -> StateMigrateError | None:
    """The contract's error for an error raised by the native binding (None: not one of them)."""
    from .. import _native

    msg = _one_line(exc)
    if isinstance(exc, _native.RedbBusyError):
        from ..locks import busy_message

        return StoreBusyError(
            busy_message(path, holder_pid(path)), hint="stop the application that uses it"
        )
    if isinstance(exc, _native.RedbUnsupportedError):
        return SourceError(f"{path}: unsupported redb {msg}")
    if isinstance(exc, _native.RedbCorruptError):
        return SourceError(f"{path}: corrupt redb file ({msg})")
    if isinstance(exc, _native.RedbRefusedError):
        return DestinationError(f"{path}: {msg}")
    if isinstance(exc, _native.RedbError):
        cls = DestinationError if writing else SourceError
        return cls(f"{path}: redb error: {msg}")
    if type(exc).__name__ == "PanicException":
        # redb asserts on some corrupt pages; the binding turns the panic into an exception.
        cls = DestinationError if writing else SourceError
        return cls(f"{path}: corrupt redb file (redb stopped: {msg})")
    return None


class _Mapped:
    """Context manager turning native errors into the contract's errors."""

    def __init__(self, path: Path, *, writing: bool = False) -> None:
        self.path = path
        self.writing = writing

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, typ: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None or isinstance(exc, StateMigrateError):
            return
        mapped = _native_error(exc, self.path, writing=self.writing)
        if mapped is not None:
            raise mapped from exc


def table_info(desc: Mapping[str, Any]) -> TableInfo:
    """The state-model table of a native table description."""
    kind = desc["kind"]
    if kind == "plain":
        return TableInfo(desc["name"], TableKind.PLAIN)
    if kind == "versioned":
        return TableInfo(desc["name"], TableKind.VERSIONED)
    meta = {
        "redb": {
            "multimap": bool(desc["multimap"]),
            "key": dict(desc["key"]),
            "value": dict(desc["value"]),
            # "custom": a user-defined type; records are in key byte order, not redb's.
            "order": "custom" if kind == "custom" else "redb",
        }
    }
    return TableInfo(desc["name"], TableKind.PLAIN, meta)


def _desc(table: TableInfo) -> dict[str, Any] | None:
    """The native description of a typed table from its meta (None for a default-layout table)."""
    redb = table.meta.get("redb") if table.meta else None
    if not redb:
        return None
    return {
        "name": table.name,
        "multimap": bool(redb.get("multimap", False)),
        "key": dict(redb["key"]),
        "value": dict(redb["value"]),
    }


def _meta_updates(metadata: Mapping[str, bytes | None] | None) -> list[tuple[str, bytes | None]]:
    return [(k, None if v is None else bytes(v)) for k, v in (metadata or {}).items()]


class RedbReader(Reader):
    """One read transaction over a redb file (read-only; never modifies it)."""

    def __init__(self, path: Path, native: Any) -> None:
        self.path = path
        self._native = native
        self._descs: dict[str, dict[str, Any]] = {}

    def list_tables(self) -> list[TableInfo]:
        """Every table and multimap table, typed ones with their redb types in ``meta``."""
        with _Mapped(self.path):
            descs = self._native.list_tables()
        self._descs = {d["name"]: d for d in descs}
        return [table_info(d) for d in descs]

    def metadata(self) -> dict[str, bytes]:
        """The ``__statemigrate__`` table."""
        with _Mapped(self.path):
            return dict(self._native.metadata())

    def _desc_of(self, table: TableInfo) -> dict[str, Any]:
        if not self._descs:
            self.list_tables()
        desc = self._descs.get(table.name)
        if desc is None:
            raise SourceError(f"{self.path}: no table {table.name!r}")
        return desc

    def read_batches(
        self,
        table: TableInfo,
        after: bytes | None = None,
        *,
        max_records: int = DEFAULT_BATCH_RECORDS,
        max_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> Iterator[Batch]:
        """Whole batches from the binding, each read with the GIL released."""
        desc = self._desc_of(table)
        while True:
            with _Mapped(self.path):
                batch = self._native.read_batch(desc, after, max_records, max_bytes)
            if not batch:
                return
            yield batch
            after = batch[-1][0]

    def iter_records(self, table: TableInfo, after: bytes | None = None) -> Iterator[Record]:
        """Records of ``table`` in key order, strictly after ``after``."""
        for batch in self.read_batches(table, after):
            yield from batch

    def close(self) -> None:
        """Release the read transaction and the file."""
        self._native.close()


class RedbWriter(Writer):
    """Writes a redb file: one commit per batch, durable at checkpoints and at the end."""

    def __init__(self, path: Path, native: Any, options: Mapping[str, Any]) -> None:
        self.path = path
        self._native = native
        self._bytewise = set(options.get("bytewise_key_types") or ())
        self._kinds: dict[str, str] = {}

    def list_tables(self) -> list[TableInfo]:
        """Tables that exist in the file being written."""
        with _Mapped(self.path, writing=True):
            return [table_info(d) for d in self._native.list_tables()]

    def metadata(self) -> dict[str, bytes]:
        """The metadata committed so far."""
        with _Mapped(self.path, writing=True):
            return dict(self._native.metadata())

    def _kind(self, table: TableInfo) -> tuple[str, dict[str, Any]]:
        desc = _desc(table)
        if desc is None:
            value = _VERSIONED if table.versioned else _BYTES
            desc = {"name": table.name, "multimap": False, "key": _BYTES, "value": value}
            return ("versioned" if table.versioned else "plain"), desc
        if table.versioned:
            raise DestinationError(f"table {table.name!r}: a typed redb table cannot be versioned")
        kind = self._native.kind_of(desc)
        if kind == "custom":
            for part in ("key", "value") if desc["multimap"] else ("key",):
                t = desc[part]
                builtin = t.get("class") != "UserDefined"
                if builtin and self._parses(t):
                    continue
                if not builtin and t["name"] not in self._bytewise:
                    raise DestinationError(
                        f"table {table.name!r}: redb {part} type {t['name']!r} is user-defined and its "
                        "order may not be bytewise",
                        hint=f"if it is, pass --bytewise-key {t['name']!r}",
                    )
                elif builtin:
                    raise DestinationError(
                        f"table {table.name!r}: the redb writer cannot produce {part} type {t['name']!r}"
                    )
        return kind, desc

    def _parses(self, t: Mapping[str, Any]) -> bool:
        probe = {"name": "probe", "multimap": False, "key": dict(t), "value": _BYTES}
        return bool(self._native.kind_of(probe) == "typed")

    def create_table(self, table: TableInfo) -> None:
        """Create an empty table: default layout, or the redb types its meta records."""
        kind, desc = self._kind(table)
        with _Mapped(self.path, writing=True):
            self._native.create_table(desc, kind)
        self._kinds[table.name] = kind

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        """Insert a batch and update the metadata in one commit."""
        kind, desc = self._kind(table)
        with _Mapped(self.path, writing=True):
            self._native.write_batch(desc, kind, batch, _meta_updates(metadata))

    def read_batches(
        self,
        table: TableInfo,
        after: bytes | None = None,
        *,
        max_records: int = DEFAULT_BATCH_RECORDS,
        max_bytes: int = DEFAULT_BATCH_BYTES,
    ) -> Iterator[Batch]:
        """Batches of ``table`` as committed so far (in-place upgrades)."""
        _, desc = self._kind(table)
        while True:
            with _Mapped(self.path, writing=True):
                batch = self._native.read_batch(desc, after, max_records, max_bytes)
            if not batch:
                return
            yield batch
            after = batch[-1][0]

    def drop_table(self, name: str) -> None:
        """Drop a table and its ``table:`` metadata in one commit (nothing if absent)."""
        with _Mapped(self.path, writing=True):
            self._native.drop_table(name, [(META_TABLE_PREFIX + name, None)])

    def sync(self) -> None:
        """Make every commit so far durable (intermediate batches are not)."""
        with _Mapped(self.path, writing=True):
            self._native.sync()

    def backup(self, path: Path) -> None:
        """A copy of the file after a durable commit (redb repairs the copy when opened)."""
        import shutil

        self.sync()
        shutil.copy2(self.path, path)

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        """Commit metadata updates alone."""
        with _Mapped(self.path, writing=True):
            self._native.put_metadata(_meta_updates(metadata))

    def finish(self) -> None:
        """Durable commit, then compaction (redb fsyncs on a durable commit)."""
        with _Mapped(self.path, writing=True):
            self._native.finish()

    def close(self) -> None:
        """Release the file."""
        self._native.close()


_BYTES = {"name": "&[u8]", "class": "Internal", "width": None}
# The writer spells it as its own redb version does (Internal3 in format 3).
_VERSIONED = {"name": "(u64,&[u8])", "class": "Internal", "width": None}


class RedbEngine(Engine):
    """redb files of format 1, 2 (read) and 3 (read and write; format 2 on request)."""

    name: ClassVar[str] = "redb"
    extra: ClassVar[str] = "redb"
    driver_module: ClassVar[str] = "statemigrate._native"
    description: ClassVar[str] = "redb 1.x/2.x/4.x files through the bundled native binding"
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic_multi_table=True,
        read_only_open=True,
        multi_process_readers=False,
        directory=False,
        typed_keys=True,
        in_place=True,
        transactional_ddl=False,
    )
    space_factor: ClassVar[float] = 2.0

    @classmethod
    def detect(cls, path: Path) -> bool:
        """A file starting with redb's magic number (read with plain I/O)."""
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        """The file format (from the primary commit slot) and which redb versions write it."""
        return read_header(path)

    @classmethod
    def _source_format(cls, path: Path) -> int:
        info = read_header(path)
        fmt = int(info["format"])
        if fmt not in FORMAT_WRITERS:
            known = "; ".join(f"{k} ({v})" for k, v in FORMAT_WRITERS.items())
            raise SourceError(
                f"{path}: unsupported redb file format {fmt}; this build reads formats {known}"
            )
        return fmt

    @classmethod
    def open_reader(cls, path: Path, options: Mapping[str, Any] | None = None) -> Reader:
        """Open at one snapshot, read-only (redb 4.x) or through a copy-on-write view."""
        check_options(cls, options, OPTIONS)
        native = cls.require_driver()
        fmt = cls._source_format(path)
        try:
            with _Mapped(path):
                handle = native.RedbReader(str(path), fmt)
        except SourceError as exc:
            if "unsupported redb file format" in exc.message:
                raise SourceError(
                    f"{path}: unsupported redb file format {fmt} (written by {FORMAT_WRITERS[fmt]})"
                ) from exc
            raise
        return RedbReader(path, handle)

    @classmethod
    def _writer_options(cls, options: Mapping[str, Any] | None) -> dict[str, Any]:
        opts = check_options(cls, options, OPTIONS)
        value = opts.get("redb_format")
        text = str(value).strip()
        if value is None:
            fmt = DEFAULT_FORMAT
        elif not isinstance(value, bool) and text.isdigit() and int(text) in WRITABLE_FORMATS:
            fmt = int(text)
        else:
            raise UsageError(
                f"redb_format must be 2 or 3 (the redb engine writes file formats 2 and 3),"
                f" not {value!r}"
            )
        opts["redb_format"] = fmt
        return opts

    @classmethod
    def create_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        """Create a redb file of format 3 (or ``redb_format`` 2)."""
        opts = cls._writer_options(options)
        native = cls.require_driver()
        if path.exists():
            raise DestinationError(f"{path}: already exists")
        with _Mapped(path, writing=True):
            handle = native.RedbWriter(str(path), opts["redb_format"], True)
        return RedbWriter(path, handle, opts)

    @classmethod
    def open_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        """Open an existing redb file for writing, in the format it already has."""
        opts = cls._writer_options(options)
        native = cls.require_driver()
        fmt = cls._source_format(path)
        if fmt not in WRITABLE_FORMATS:
            raise DestinationError(
                f"{path}: redb file format {fmt} ({FORMAT_WRITERS[fmt]}) cannot be written"
            )
        with _Mapped(path, writing=True):
            handle = native.RedbWriter(str(path), fmt, False)
        return RedbWriter(path, handle, opts)


__all__ = ["METADATA_TABLE", "RedbEngine", "read_header"]
