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

import json
import struct
from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ..errors import DestinationError, SourceError, UsageError
from ..locks import LockProbe
from ..model import METADATA_TABLE, Batch, TableInfo, TableKind, shown_name
from .base import (
    META_TABLE_PREFIX,
    Capabilities,
    Engine,
    Reader,
    StoreFacts,
    Writer,
    check_options,
)
from .errors import DriverErrors, Meaning, Rule

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


# What the binding's errors mean (its exception classes), and where a holder shows: every
# redb version takes a flock on its file.
REDB_FACTS = StoreFacts(
    errors=DriverErrors(
        rules=(
            Rule(Meaning.BUSY, types=("RedbBusyError",)),
            Rule(
                Meaning.UNSUPPORTED,
                types=("RedbUnsupportedError",),
                message="{path}: unsupported redb {text}",
            ),
            Rule(
                Meaning.DAMAGED,
                types=("RedbCorruptError",),
                message="{path}: corrupt redb file ({text})",
            ),
            Rule(Meaning.REFUSED, types=("RedbRefusedError",)),
            # redb asserts on some corrupt pages; the binding turns the panic into an exception.
            Rule(
                Meaning.FAILED,
                types=("PanicException",),
                message="{path}: corrupt redb file (redb stopped: {text})",
            ),
        ),
        driver=(
            "RedbBusyError",
            "RedbUnsupportedError",
            "RedbCorruptError",
            "RedbRefusedError",
            "RedbError",
        ),
        failed="{path}: redb error: {text}",
        whole_text=True,
    ),
    locks=(LockProbe("", "flock"),),
    busy_hint="stop the application that uses it",
)


def _native_batches(
    handle: Any, desc: dict[str, Any], after: bytes | None, max_records: int, max_bytes: int
) -> Iterator[Batch]:
    """Whole batches from the binding, each read with the GIL released."""
    while True:
        batch = handle.read_batch(desc, after, max_records, max_bytes)
        if not batch:
            return
        yield batch
        after = batch[-1][0]


def table_info(desc: Mapping[str, Any], fmt: int) -> TableInfo:
    """The state-model table of a native table description from a file of format ``fmt``.

    Every table records the file format (``meta["redb"]["format"]`` for typed tables,
    ``meta["redb_file"]["format"]`` for default-layout ones) and its stored types
    (a versioned table's value type is spelt differently by each redb version), so
    that a redb destination can be written back as the source was.
    """
    kind = desc["kind"]
    if kind in ("plain", "versioned"):
        fact: dict[str, Any] = {"format": fmt}
        if kind == "versioned":
            fact["value"] = dict(desc["value"])
            return TableInfo(desc["name"], TableKind.VERSIONED, {"redb_file": fact})
        return TableInfo(desc["name"], TableKind.PLAIN, {"redb_file": fact})
    meta = {
        "redb": {
            "multimap": bool(desc["multimap"]),
            "key": dict(desc["key"]),
            "value": dict(desc["value"]),
            # "custom": a user-defined type; records are in key byte order, not redb's.
            "order": "custom" if kind == "custom" else "redb",
            "format": fmt,
        }
    }
    return TableInfo(desc["name"], TableKind.PLAIN, meta)


def recorded_format(meta: Mapping[str, Any] | None) -> int | None:
    """The redb file format a table was read from, as its meta records it (None: not from redb)."""
    for key in ("redb", "redb_file"):
        fact = (meta or {}).get(key)
        if isinstance(fact, Mapping):
            fmt = fact.get("format")
            if isinstance(fmt, int) and not isinstance(fmt, bool):
                return fmt
    return None


def _written_by_redb2(meta: Mapping[str, Any]) -> bool:
    """Whether a table of a format-3 file has redb 2.6's spelling (old tuple layout)."""
    fact = meta.get("redb") or meta.get("redb_file") or {}
    types = [fact.get("key"), fact.get("value")]
    return any(
        isinstance(t, Mapping) and t.get("legacy") is True and t.get("class") == "Internal"
        for t in types
    )


def choose_format(explicit: int | None, metas: Iterable[Mapping[str, Any]]) -> tuple[int, bool]:
    """The file format a new redb destination gets, and whether redb 2.6 writes it.

    An explicit ``redb_format`` wins (the types are then re-spelt for it). Otherwise
    the format the tables' meta records (written back as it was read), or the newest
    when nothing was recorded (the data did not come from redb).

    Raises:
        DestinationError: the data came from a format-1 file (redb 1.x), which this
            engine cannot write, and no format was asked for.
    """
    metas = [m for m in metas if m]
    if explicit is not None:
        return explicit, False
    formats = {f for f in (recorded_format(m) for m in metas) if f is not None}
    if not formats:
        return DEFAULT_FORMAT, False
    if formats - set(WRITABLE_FORMATS):
        raise DestinationError(
            "the data was read from a redb file of format 1 (redb 1.x), which no redb "
            "version this engine writes can open as it was",
            hint="pass --redb-format 2 (redb 2.x) or 3 (redb 3.x and 4.x) to convert it on purpose",
        )
    fmt = max(formats)
    redb2 = fmt == 3 and any(recorded_format(m) == 3 and _written_by_redb2(m) for m in metas)
    return fmt, redb2


class _Target:
    """How tables are written to one redb destination: its format and redb version.

    Args:
        module: the native binding.
        fmt: the file format written (2 or 3).
        redb2: written through redb 2.6 (format 2, or format 3 as redb 2.6 writes it).
        options: the destination options (``redb_format``, ``bytewise_key_types``).
    """

    def __init__(self, module: Any, fmt: int, redb2: bool, options: Mapping[str, Any]) -> None:
        self.module = module
        self.format = fmt
        self.redb2 = redb2
        self.explicit: int | None = options.get("redb_format")
        self.bytewise = sorted(set(options.get("bytewise_key_types") or ()))

    def exact(self, meta: Mapping[str, Any] | None) -> bool:
        """Whether a table is written back with its recorded types as they are."""
        return self.explicit is None and recorded_format(meta) == self.format

    def describe(self, table: TableInfo) -> tuple[str, dict[str, Any]]:
        """The native kind (``plain``, ``versioned``, ``typed``, ``custom``) and description."""
        redb = table.meta.get("redb") if table.meta else None
        if not redb or table.versioned:
            return ("versioned" if table.versioned else "plain"), self._default_layout(table)
        desc = {
            "name": table.name,
            "multimap": bool(redb.get("multimap", False)),
            "key": dict(redb["key"]),
            "value": dict(redb["value"]),
            "exact": self.exact(table.meta),
            "bytewise": self.bytewise,
        }
        return str(self.module.redb_table_kind(desc, self.format, self.redb2)), desc

    def _default_layout(self, table: TableInfo) -> dict[str, Any]:
        """A plain or versioned table's description; a versioned one keeps its recorded spelling."""
        value = _BYTES
        exact = False
        if table.versioned:
            value = _VERSIONED
            fact = (table.meta or {}).get("redb_file")
            recorded = fact.get("value") if isinstance(fact, Mapping) else None
            if isinstance(recorded, Mapping) and self.exact(table.meta):
                value, exact = dict(recorded), True
        return {
            "name": table.name,
            "multimap": False,
            "key": _BYTES,
            "value": value,
            "exact": exact,
        }

    def problems(self, table: TableInfo) -> list[str]:
        """Why ``table`` cannot be written (empty when it can), each naming what would allow it."""
        name = shown_name(table.name)
        if table.versioned and table.meta and table.meta.get("redb"):
            return [f"table {name}: a typed redb table cannot be versioned"]
        kind, desc = self.describe(table)
        if kind == "plain":
            return []
        found = self.module.redb_table_problems(desc, self.format, self.redb2)
        return [f"table {name}: {part} type {ty!r} {why}" for part, ty, why in found]

    def check(
        self, tables: Iterable[TableInfo], where: str, first: DestinationError | None = None
    ) -> None:
        """Refuse, in one error listing every offending table, tables that cannot be written.

        Args:
            tables: the tables to write.
            where: the destination, for the message.
            first: a refusal of the whole destination, listed first (its hint kept).

        Raises:
            DestinationError: some table cannot be written (exit 5).
        """
        problems = [p for t in tables for p in self.problems(t)]
        if not problems and first is None:
            return
        parts = [first.message] if first else []
        if problems:
            many = len(problems) > 1
            what = "these tables" if many else "this table"
            parts.append(
                f"the redb writer (file format {self.format}) cannot write {what}: "
                + "; ".join(problems)
            )
        raise DestinationError(
            f"{where}: " + "; and ".join(parts), hint=first.hint if first else None
        )


def _table_facts(metadata: Mapping[str, bytes | None]) -> list[dict[str, Any]]:
    """The tables' meta among metadata updates (``table:<name>`` entries, JSON)."""
    out = []
    for key, raw in metadata.items():
        if key.startswith(META_TABLE_PREFIX) and raw:
            try:
                fact = json.loads(raw)
            except ValueError:
                continue
            if isinstance(fact, dict):
                out.append(fact)
    return out


def _meta_updates(metadata: Mapping[str, bytes | None] | None) -> list[tuple[str, bytes | None]]:
    return [(k, None if v is None else bytes(v)) for k, v in (metadata or {}).items()]


class RedbReader(Reader):
    """One read transaction over a redb file (read-only; never modifies it)."""

    facts = REDB_FACTS

    def __init__(self, path: Path, native: Any) -> None:
        self.path = path
        self._native = native
        self._descs: dict[str, dict[str, Any]] = {}

    def list_tables(self) -> list[TableInfo]:
        """Every table and multimap table, typed ones with their redb types in ``meta``."""
        with self.errors():
            descs = self._native.list_tables()
        self._descs = {d["name"]: d for d in descs}
        return [table_info(d, self._native.format) for d in descs]

    def raw_metadata(self) -> dict[str, bytes]:
        """The ``__statemigrate__`` table."""
        with self.errors():
            return dict(self._native.metadata())

    def _desc_of(self, table: TableInfo) -> dict[str, Any]:
        if not self._descs:
            self.list_tables()
        desc = self._descs.get(table.name)
        if desc is None:
            raise SourceError(f"{self.path}: no table {table.name!r}")
        return desc

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        """Whole batches from the binding, each read with the GIL released."""
        yield from _native_batches(
            self._native, self._desc_of(table), after, max_records, max_bytes
        )

    def close(self) -> None:
        """Release the read transaction and the file."""
        self._native.close()


class RedbWriter(Writer):
    """Writes a redb file: one commit per batch, durable at checkpoints and at the end.

    A new file is created at the first write, in the format the tables' meta records
    (see :func:`choose_format`): the first metadata a convert writes holds every
    table's meta, so the whole store decides it.
    """

    facts = REDB_FACTS

    def __init__(
        self,
        path: Path,
        module: Any,
        options: Mapping[str, Any],
        handle: Any = None,
        redb2: bool = False,
    ) -> None:
        self.path = path
        self._module = module
        self._options = dict(options)
        self._native = handle
        self._target: _Target | None = None
        self._checked: set[str] = set()
        if handle is not None:
            self._target = _Target(module, int(handle.format), redb2, options)

    def _handle(self, metas: Iterable[Mapping[str, Any]] = ()) -> Any:
        """The native writer, creating the file (in the format ``metas`` record) if needed."""
        if self._native is None:
            fmt, redb2 = choose_format(self._options.get("redb_format"), metas)
            with self.errors():
                self._native = self._module.RedbWriter(str(self.path), fmt, True, redb2)
            self._target = _Target(self._module, fmt, redb2, self._options)
        return self._native

    @property
    def target(self) -> _Target:
        """The destination's format and redb version (creating the file if needed)."""
        self._handle()
        assert self._target is not None
        return self._target

    def list_tables(self) -> list[TableInfo]:
        """Tables that exist in the file being written."""
        if self._native is None:
            return []
        with self.errors():
            return [table_info(d, self.target.format) for d in self._native.list_tables()]

    def raw_metadata(self) -> dict[str, bytes]:
        """The metadata committed so far."""
        if self._native is None:
            return {}
        with self.errors():
            return dict(self._native.metadata())

    def _kind(self, table: TableInfo) -> tuple[str, dict[str, Any]]:
        self._handle([table.meta])
        if table.name not in self._checked:
            self.target.check([table], str(self.path))
            self._checked.add(table.name)
        return self.target.describe(table)

    def create_table(self, table: TableInfo) -> None:
        """Create an empty table: default layout, or the redb types its meta records."""
        kind, desc = self._kind(table)
        with self.errors():
            self._handle().create_table(desc, "typed" if kind in _TYPED else kind)

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        """Insert a batch and update the metadata in one commit."""
        kind, desc = self._kind(table)
        with self.errors():
            self._handle().write_batch(desc, kind, batch, _meta_updates(metadata))

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        """Batches of ``table`` as committed so far (in-place upgrades)."""
        if self._native is None:
            return
        _, desc = self._kind(table)
        yield from _native_batches(self._native, desc, after, max_records, max_bytes)

    def drop_table(self, name: str) -> None:
        """Drop a table and its ``table:`` metadata in one commit (nothing if absent)."""
        with self.errors():
            self._handle().drop_table(name, [(META_TABLE_PREFIX + name, None)])

    def sync(self) -> None:
        """Make every commit so far durable (intermediate batches are not)."""
        with self.errors():
            self._handle().sync()

    def backup(self, path: Path) -> None:
        """A copy of the file after a durable commit (redb repairs the copy when opened)."""
        import shutil

        self.sync()
        shutil.copy2(self.path, path)

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        """Commit metadata updates alone (the first creates the file, see the class)."""
        handle = self._handle(_table_facts(metadata))
        with self.errors():
            handle.put_metadata(_meta_updates(metadata))

    def finish(self) -> None:
        """Durable commit, then compaction (redb fsyncs on a durable commit)."""
        with self.errors():
            self._handle().finish()

    def close(self) -> None:
        """Release the file (nothing was created if nothing was written)."""
        if self._native is not None:
            self._native.close()


_BYTES = {"name": "&[u8]", "class": "Internal", "width": None}
# Unless written back exactly, the writer spells it as its own redb version does
# (Internal3 in format 3).
_VERSIONED = {"name": "(u64,&[u8])", "class": "Internal", "width": None}


class RedbEngine(Engine):
    """redb files of format 1, 2 and 3 (read); 2 and 3 written, as the source was by default."""

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
    suffixes: ClassVar[tuple[str, ...]] = (".redb",)

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
            with REDB_FACTS.mapped(path, writing=False):
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
            fmt = None
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
        """A writer of a new redb file, created at its first write (see :class:`RedbWriter`).

        The file gets ``redb_format`` if given, else the format the tables were read
        from (their meta), else the newest (3).
        """
        opts = cls._writer_options(options)
        native = cls.require_driver()
        if path.exists():
            raise DestinationError(f"{path}: already exists")
        return RedbWriter(path, native, opts)

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
        redb2 = fmt == 3 and cls._written_by_redb2(path, fmt)
        with REDB_FACTS.mapped(path, writing=True):
            handle = native.RedbWriter(str(path), fmt, False, redb2)
        return RedbWriter(path, native, opts, handle, redb2)

    @classmethod
    def _written_by_redb2(cls, path: Path, fmt: int) -> bool:
        """Whether a format-3 file's own tables are spelt as redb 2.6 spells them.

        Such a file is written through redb 2.6 again: redb 3.0 and later rewrite
        its allocator state in a way redb 2.6 no longer opens.
        """
        native = cls.require_driver()
        with REDB_FACTS.mapped(path, writing=False):
            reader = native.RedbReader(str(path), fmt)
            try:
                descs = reader.list_tables()
            finally:
                reader.close()
        return any(_written_by_redb2(table_info(d, fmt).meta) for d in descs)

    @classmethod
    def check_tables(cls, tables: list[TableInfo], options: Mapping[str, Any] | None) -> None:
        """Refuse, before anything is created, every table a new redb file cannot hold.

        Names first (the engine's rules), then the types: the file format the tables
        would be written in (see :func:`choose_format`), user-defined key types not
        asserted bytewise, types the writer cannot produce; one error lists them all.

        Raises:
            DestinationError: exit 5, every offending table with its type and the
                option that would allow it.
        """
        super().check_tables(tables, options)
        opts = cls._writer_options(options)
        first = None
        try:
            fmt, redb2 = choose_format(opts.get("redb_format"), [t.meta for t in tables])
        except DestinationError as exc:
            # Refused as a whole (format 1): the tables are checked for the newest
            # format, so that the user learns everything at once.
            first, fmt, redb2 = exc, DEFAULT_FORMAT, False
        _Target(cls.require_driver(), fmt, redb2, opts).check(tables, "redb destination", first)


__all__ = ["METADATA_TABLE", "RedbEngine", "read_header"]
