"""The portable dump (DESIGN.md, "The portable dump"): UTF-8 JSON lines.

A header line ``{"statemigrate": 1, "schema": text|null, "revision": [ids]|null,
"meta": {...}}``, then per table a table line, its records (``k``/``v`` in base64,
``ver`` when versioned) and a batch line after each batch with the batch's digest;
a footer with every table's digest, the offset of its table line, the store digest
and ``meta``. The reader checks every batch line as it reads it and every table
against the footer, and refuses a file without a valid footer (a truncated dump).

Metadata: the header's documented ``schema`` and ``revision`` are the stamp (a dump
written to DESIGN.md has nothing else); the ``meta`` maps of the header and footer
(base64 values, what statemigrate 0.1 read the stamp from) carry every other entry
and the stamp again for older readers. ``revision`` is a JSON list of revision ids,
as in the metadata entry ``revision`` (:data:`~.base.META_REVISION`).

While a dump is being written, its checkpoint lives in ``PATH.checkpoint`` beside it:
the byte offset of the last complete batch and the metadata changed since the header.
Its size does not grow with the tables written: ``--resume`` truncates the dump at
that offset and rebuilds the list of tables from the table and batch lines before it.
"""

from __future__ import annotations

import base64
import itertools
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from ..digest import Digest, batch_digest, store_digest
from ..errors import DestinationError, SourceError
from ..model import MAX_VERSION, Batch, TableInfo, TableKind
from .base import (
    META_CHECKPOINT,
    META_REVISION,
    META_SCHEMA,
    Capabilities,
    Engine,
    Reader,
    StoreFacts,
    Writer,
    check_options,
    take_batches,
)
from .errors import DriverErrors, Meaning, Rule

FORMAT = 1
CHECKPOINT_SUFFIX = ".checkpoint"
CHUNK = 1 << 16  # bytes read per step while looking for the footer line
STAMP = (META_SCHEMA, META_REVISION)  # the metadata the header's own fields show
RECORD_LINE = b'{"k":'  # how the writer starts a record line (the resume scan skips them)
# What reading back a partial dump and its checkpoint may raise when they do not match.
_UNUSABLE = (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError)
_b64e = base64.b64encode
_b64d = base64.b64decode


def _meta_to_json(meta: Mapping[str, bytes]) -> dict[str, str]:
    return {k: _b64e(v).decode() for k, v in sorted(meta.items())}


def _meta_from_json(data: Mapping[str, str]) -> dict[str, bytes]:
    return {k: _b64d(v) for k, v in data.items()}


def _revision_list(raw: bytes) -> list[str] | None:
    """The revision ids of a ``revision`` metadata entry, or None if it is not a JSON list
    of strings."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, list) and all(isinstance(r, str) for r in value):
        return value
    return None


def stamp_fields(meta: Mapping[str, bytes]) -> dict[str, Any]:
    """The header's documented ``schema`` and ``revision`` fields for ``meta``.

    Args:
        meta: the metadata entries the dump carries.

    Returns:
        ``{"schema": text or None, "revision": list of ids or None}``: None where the
        metadata has no such entry, or one the field cannot show (a schema that is not
        UTF-8, a revision that is not a JSON list of strings; those stay in ``meta``).
    """
    schema = meta.get(META_SCHEMA)
    try:
        text = schema.decode("utf-8") if schema is not None else None
    except UnicodeDecodeError:
        text = None
    revision = meta.get(META_REVISION)
    return {
        "schema": text,
        "revision": _revision_list(revision) if revision is not None else None,
    }


def stamp_from_header(header: Mapping[str, Any], meta: Mapping[str, bytes]) -> dict[str, bytes]:
    """The stamp a dump's header states, as metadata entries.

    Args:
        header: the parsed header line.
        meta: the metadata read from the ``meta`` maps; an entry that says the same as
            the header (the same revision ids, however spaced) is kept byte for byte.

    Returns:
        ``schema`` and ``revision`` entries for the fields the header states (a missing
        or null field states nothing).

    Raises:
        TypeError: a field that is neither null nor of its documented type.
    """
    out: dict[str, bytes] = {}
    schema = header.get("schema")
    if schema is not None:
        if not isinstance(schema, str):
            raise TypeError(f"its schema must be a string or null, not {schema!r}")
        out[META_SCHEMA] = schema.encode("utf-8")
    revision = header.get("revision")
    if revision is not None:
        if not isinstance(revision, list) or not all(isinstance(r, str) for r in revision):
            raise TypeError(
                f"its revision must be a JSON list of revision ids or null, not {revision!r}"
            )
        had = meta.get(META_REVISION)
        same = had is not None and _revision_list(had) == revision
        out[META_REVISION] = had if same and had is not None else json.dumps(revision).encode()
    return out


def _last_line(f: BinaryIO) -> tuple[bytes, int]:
    """The last line of a file (without its newline) and the offset where it starts.

    The start is searched for backwards, :data:`CHUNK` bytes at a time, so memory per
    step is bounded whatever the line's size; only the line itself is then read whole.
    """
    stop = pos = f.seek(0, os.SEEK_END)
    start = None
    while pos > 0 and start is None:
        low = max(0, pos - CHUNK)
        f.seek(low)
        chunk = f.read(pos - low)
        if stop == pos:  # still in the newlines that end the file
            chunk = chunk.rstrip(b"\n")
            stop = low + len(chunk)
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            start = low + nl + 1
        pos = low
    start = start or 0
    f.seek(start)
    return f.read(stop - start), start


def _why(exc: BaseException) -> str:
    """What is wrong with a line, for a message."""
    return "JSON nested too deeply" if isinstance(exc, RecursionError) else str(exc)


# A damaged line of a table, as the base maps it while the table is read.
JSONL_FACTS = StoreFacts(
    errors=DriverErrors(
        rules=(
            Rule(
                Meaning.DAMAGED,
                types=("builtins.RecursionError",),
                message="{where}: damaged line (JSON nested too deeply)",
            ),
        ),
        driver=tuple(f"builtins.{e.__name__}" for e in _UNUSABLE),
        scan_failed="{where}: damaged line ({text})",
    )
)


def _whole(value: Any, what: str, limit: int) -> int:
    """``value`` if it is a JSON whole number from 0 to ``limit``, else ValueError."""
    if type(value) is not int or not 0 <= value <= limit:
        raise ValueError(f"{what} must be a whole number from 0 to {limit}, not {value!r}")
    return value


def _version(value: Any) -> int:
    """A record's ``ver``: an unsigned 64-bit integer (ValueError otherwise)."""
    if type(value) is not int or not 0 <= value <= MAX_VERSION:
        raise ValueError(f"a version must be a whole number from 0 to 2^64-1, not {value!r}")
    return value


def _dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"{what} is not a JSON object")
    return value


def _footer_table(t: Any, first_line_end: int, footer_start: int) -> tuple[TableInfo, int, Digest]:
    """One table entry of the footer, checked: (table, offset of its table line, digest)."""
    t = _dict(t, "a table entry")
    name = t["table"]
    if not isinstance(name, str):
        raise TypeError(f"a table name must be a string, not {name!r}")
    info = TableInfo(name, TableKind(t["kind"]), _dict(t.get("meta") or {}, f"{name!r} meta"))
    offset = t["offset"]
    if type(offset) is not int or not first_line_end <= offset < footer_start:
        raise ValueError(
            f"table {name!r} is said to start at offset {offset!r}, outside the dump's"
            f" records (bytes {first_line_end} to {footer_start})"
        )
    total = t["sum"]
    if not isinstance(total, str) or not re.fullmatch(r"[0-9a-fA-F]{32}", total):
        raise ValueError(f"table {name!r} has a sum that is not 32 hex digits: {total!r}")
    count = _whole(t["count"], f"table {name!r}'s count", 2**64 - 1)
    return info, offset, Digest(count, int(total, 16))


class JsonlReader(Reader):
    """Seeks to each table through the footer's offsets; checks batches as it reads."""

    facts = JSONL_FACTS

    def __init__(self, path: Path):
        self.path = path
        try:
            self.file: BinaryIO | None = open(path, "rb")  # noqa: SIM115 - held by the reader until close()
        except OSError as exc:
            raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
        try:
            self._open(self.file)
        except BaseException:
            self.close()
            raise

    def _open(self, f: BinaryIO) -> None:
        path = self.path
        try:
            header = json.loads(f.readline())
            first_line_end = f.tell()
            last, footer_start = _last_line(f)
            footer = json.loads(last)
        except (OSError, ValueError, RecursionError) as exc:
            raise SourceError(f"{path}: not a statemigrate JSON-lines dump ({_why(exc)})") from exc
        if not isinstance(header, dict) or header.get("statemigrate") != FORMAT:
            raise SourceError(f"{path}: not a statemigrate JSON-lines dump (no header line)")
        if not isinstance(footer, dict) or "footer" not in footer:
            raise SourceError(f"{path}: the dump is truncated or damaged (no footer line)")
        try:
            self._meta = _meta_from_json(_dict(header.get("meta", {}), "its meta"))
        except (ValueError, TypeError, AttributeError) as exc:
            raise SourceError(f"{path}: the dump's header is damaged ({exc})") from exc
        try:
            self._meta.update(_meta_from_json(_dict(footer.get("meta", {}), "its meta")))
            self._tables: dict[str, tuple[TableInfo, int]] = {}
            self._expect: dict[str, Digest] = {}
            tables = footer["tables"]
            if not isinstance(tables, list):
                raise TypeError("its tables are not a JSON list")
            for t in tables:
                info, offset, digest = _footer_table(t, first_line_end, footer_start)
                if info.name in self._tables:
                    raise ValueError(f"table {info.name!r} is listed twice")
                self._tables[info.name] = (info, offset)
                self._expect[info.name] = digest
            digests = [(n, info.kind, self._expect[n]) for n, (info, _o) in self._tables.items()]
            if store_digest(digests) != footer["digest"]:
                raise SourceError(f"{path}: the footer's store digest does not match its tables")
        except (KeyError, ValueError, TypeError, AttributeError) as exc:
            raise SourceError(f"{path}: the dump's footer is damaged ({exc})") from exc
        try:
            # The header's documented fields are the stamp (DESIGN.md); the meta maps
            # were all statemigrate 0.1 read, and say the same in a dump it wrote.
            self._meta.update(stamp_from_header(header, self._meta))
        except TypeError as exc:
            raise SourceError(f"{path}: the dump's header is damaged ({exc})") from exc

    def list_tables(self) -> list[TableInfo]:
        return [info for info, _off in self._tables.values()]

    def raw_metadata(self) -> dict[str, bytes]:
        return dict(self._meta)

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        """The records of the dump's batches, each batch checked before its records are used."""
        rows = itertools.chain.from_iterable(self._checked_batches(table, after))
        return take_batches(rows, max_records, max_bytes)

    def _checked_batches(self, table: TableInfo, after: bytes | None) -> Iterator[Batch]:
        """The dump's own batches of ``table`` after ``after``, each checked against its line."""
        info, offset = self._tables[table.name]
        where = f"{self.path} table {table.name!r}"
        f = self.file
        assert f is not None, "read after close()"
        f.seek(offset)
        head = json.loads(f.readline())
        if not isinstance(head, dict) or head.get("table") != table.name:
            raise SourceError(f"{where}: the footer points at the wrong line")
        total = Digest()
        batch: list = []
        versioned = info.versioned
        for line in f:
            obj = json.loads(line)
            if "k" in obj:
                if versioned:
                    batch.append((_b64d(obj["k"]), _b64d(obj["v"]), _version(obj["ver"])))
                else:
                    batch.append((_b64d(obj["k"]), _b64d(obj["v"])))
                continue
            if "batch" not in obj:
                break  # next table or footer
            got = batch_digest(batch, versioned)
            if got.count != obj["records"] or got.hex() != obj["sum"]:
                raise SourceError(f"{where}: batch {obj['batch']} fails its checksum")
            total = total + got
            if after is not None:
                batch = [r for r in batch if r[0] > after]
            if batch:
                yield batch
            batch = []
        if batch:
            raise SourceError(f"{where}: records after the last batch line (truncated dump)")
        if total != self._expect[table.name]:
            raise SourceError(f"{where}: table digest differs from the footer's")

    def close(self) -> None:
        f = getattr(self, "file", None)
        if f is not None:
            f.close()
            self.file = None


def _scan(f: BinaryIO) -> tuple[dict[str, Any] | None, list[dict[str, Any]], int]:
    """What a partial dump holds: its header, its tables' entries and its last batch number.

    Reads the dump once from the start, parsing only the header, table and batch lines
    (record lines are skipped unparsed): each entry has the offset of its table line and
    the sum of its batch lines. Leaves ``f`` at the end.

    Raises:
        ValueError, KeyError, TypeError: a line the writer does not write there.
    """
    f.seek(0)
    header: dict[str, Any] | None = None
    tables: list[dict[str, Any]] = []
    batch_no = pos = 0
    for line in f:
        start, pos = pos, pos + len(line)
        if not line.endswith(b"\n"):
            raise ValueError(f"the line at byte {start} is cut short")
        if line.startswith(RECORD_LINE) and header is not None and tables:
            continue
        obj = _dict(json.loads(line), f"the line at byte {start}")
        if header is None:
            if obj.get("statemigrate") != FORMAT:
                raise ValueError("it does not start with a header line")
            header = obj
        elif "table" in obj:
            tables.append(_table_entry(obj, start))
        elif "batch" in obj and tables:
            entry = tables[-1]
            batch = Digest(
                _whole(obj["records"], f"batch {obj['batch']!r}'s records", 2**64 - 1),
                int(obj["sum"], 16),
            )
            total = Digest(entry["count"], entry["sum"]) + batch
            entry["count"], entry["sum"] = total.count, total.sum
            batch_no = _whole(obj["batch"], "a batch number", 2**63 - 1)
        else:
            raise ValueError(f"unexpected line at byte {start}")
    return header, tables, batch_no


def _table_entry(line: Mapping[str, Any], offset: int) -> dict[str, Any]:
    """The writer's entry for a table whose table line ``line`` starts at ``offset``."""
    name = line["table"]
    if not isinstance(name, str):
        raise TypeError(f"a table name must be a string, not {name!r}")
    meta = _dict(line.get("meta") or {}, f"{name!r} meta")
    kind = TableKind(line["kind"]).value
    return {"name": name, "kind": kind, "meta": meta, "offset": offset, "count": 0, "sum": 0}


def _header_meta(line: bytes) -> dict[str, bytes]:
    """The ``meta`` map of a dump's header line (ValueError if it is not one)."""
    head = _dict(json.loads(line), "the first line")
    if head.get("statemigrate") != FORMAT:
        raise ValueError("it does not start with a header line")
    return _meta_from_json(_dict(head.get("meta", {}), "the header's meta"))


def _changes(meta: Mapping[str, bytes], base: Mapping[str, bytes]) -> dict[str, bytes | None]:
    """The updates that turn ``base`` into ``meta`` (None deletes)."""
    out: dict[str, bytes | None] = {k: v for k, v in meta.items() if base.get(k) != v}
    out.update({k: None for k in base if k not in meta})
    return out


class JsonlWriter(Writer):
    """Appends; the checkpoint sidecar records the offset of the last complete batch.

    The sidecar holds that offset and the metadata changed since the header (in a
    conversion, the conversion's checkpoint entry), so what each batch rewrites does not
    grow with the tables already written; a resume rebuilds the tables from the dump.
    """

    def __init__(self, path: Path, create: bool):
        self.path = path
        self.sidecar = Path(str(path) + CHECKPOINT_SUFFIX)
        self.meta: dict[str, bytes] = {}
        self.header_meta: dict[str, bytes] | None = None  # the header's meta, once written
        self.changed: dict[str, bytes | None] = {}  # meta's changes since the header
        self._tables: list[dict[str, Any]] | None = []  # None: not yet read back (resume)
        self.batch_no = 0
        try:
            if create:
                self.file: BinaryIO = open(path, "xb")  # noqa: SIM115 - held by the writer until close()
            else:
                self._restore()
        except FileExistsError as exc:
            raise DestinationError(f"{path}: already exists") from exc
        except OSError as exc:
            raise DestinationError(f"{path}: cannot write ({exc.strerror or exc})") from exc

    def _restore(self) -> None:
        """Truncate the dump at its checkpoint and take up its metadata.

        The tables are read back from the dump only when they are needed (a resume
        reads the checkpoint's metadata first, through a writer it then closes).
        """
        try:
            state = _dict(json.loads(self.sidecar.read_text()), "the checkpoint")
            offset = _whole(state["offset"], "its offset", 2**63 - 1)
        except (OSError, ValueError, KeyError, TypeError, RecursionError) as exc:
            raise DestinationError(
                f"{self.path}: no usable checkpoint beside the dump ({_why(exc)})"
            ) from exc
        self.file = open(self.path, "r+b")  # noqa: SIM115 - held by the writer until close()
        try:
            size = self.file.seek(0, os.SEEK_END)
            if size < offset:
                raise ValueError(f"{size} bytes, fewer than the {offset} its checkpoint counts")
            self.file.truncate(offset)
            self.file.seek(0)
            head = self.file.readline() if offset else None
            self.file.seek(offset)
            self._tables = None
            self._take_up(state, _header_meta(head) if head is not None else None)
        except _UNUSABLE as exc:
            self.file.close()
            raise DestinationError(
                f"{self.path}: the dump cannot be resumed ({_why(exc)}); convert it again"
                " without --resume"
            ) from exc

    def _take_up(self, state: Mapping[str, Any], header_meta: dict[str, bytes] | None) -> None:
        """The metadata of a checkpoint, given the header's."""
        self.header_meta = header_meta
        if "changes" in state:
            self.meta = dict(header_meta or {})
            changes = _dict(state["changes"], "the checkpoint's changes")
            self._apply({k: None if v is None else _b64d(v) for k, v in changes.items()})
        else:  # a checkpoint of statemigrate 0.1: all the metadata
            self.meta = _meta_from_json(_dict(state["meta"], "the checkpoint's meta"))
            self.changed = _changes(self.meta, header_meta or {})

    @property
    def tables(self) -> list[dict[str, Any]]:
        """Each table's entry (name, kind, meta, offset, count, sum), read back on resume."""
        if self._tables is None:
            try:
                _head, self._tables, self.batch_no = _scan(self.file)
                self.file.seek(0, os.SEEK_END)
            except _UNUSABLE as exc:
                raise DestinationError(
                    f"{self.path}: the dump cannot be resumed ({_why(exc)}); convert it again"
                    " without --resume"
                ) from exc
        return self._tables

    def _save(self) -> None:
        """Record the dump's length and the metadata changed since its header."""
        try:
            self.file.flush()
            state = {
                "format": FORMAT,
                "offset": self.file.tell(),
                "changes": {
                    k: None if v is None else _b64e(v).decode() for k, v in self.changed.items()
                },
            }
            tmp = Path(str(self.sidecar) + ".tmp")
            tmp.write_text(json.dumps(state))
            os.replace(tmp, self.sidecar)
        except OSError as exc:
            raise DestinationError(f"{self.path}: write failed ({exc.strerror or exc})") from exc

    def _write(self, text: str) -> None:
        try:
            self.file.write(text.encode("utf-8"))
        except OSError as exc:
            raise DestinationError(f"{self.path}: write failed ({exc.strerror or exc})") from exc

    def _header(self) -> None:
        if self.header_meta is None:
            persistent = {k: v for k, v in self.meta.items() if k != META_CHECKPOINT}
            head = {"statemigrate": FORMAT, **stamp_fields(persistent)}
            # The stamp stays in meta too: statemigrate 0.1 reads it only from there.
            head["meta"] = _meta_to_json(persistent)
            self._write(json.dumps(head) + "\n")
            self.header_meta = persistent
            self.changed = _changes(self.meta, persistent)

    def list_tables(self) -> list[TableInfo]:
        return [TableInfo(t["name"], TableKind(t["kind"]), t["meta"]) for t in self.tables]

    def raw_metadata(self) -> dict[str, bytes]:
        return dict(self.meta)

    def create_table(self, table: TableInfo) -> None:
        self._header()
        self.file.flush()
        line: dict[str, Any] = {"table": table.name, "kind": table.kind.value}
        if table.meta:
            line["meta"] = table.meta
        entry = _table_entry(line, self.file.tell())
        self._write(json.dumps(line) + "\n")
        self.tables.append(entry)
        self._save()

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        if not self.tables or self.tables[-1]["name"] != table.name:
            raise DestinationError(f"{self.path}: tables of a dump are written one after another")
        self._check_stamp(metadata)
        entry = self.tables[-1]
        d = batch_digest(batch, table.versioned)
        if table.versioned:
            lines = [
                f'{{"k":"{_b64e(k).decode()}","v":"{_b64e(v).decode()}","ver":{ver}}}\n'
                for k, v, ver in batch
            ]
        else:
            lines = [f'{{"k":"{_b64e(k).decode()}","v":"{_b64e(v).decode()}"}}\n' for k, v in batch]
        self.batch_no += 1
        lines.append(
            json.dumps({"batch": self.batch_no, "records": d.count, "sum": d.hex()}) + "\n"
        )
        self._write("".join(lines))
        total = Digest(entry["count"], entry["sum"]) + d
        entry["count"], entry["sum"] = total.count, total.sum
        self._apply(metadata)
        self._save()

    def _check_stamp(self, metadata: Mapping[str, bytes | None] | None) -> None:
        """Refuse a change of the stamp once the header that states it is written."""
        if self.header_meta is None:
            return
        for key in STAMP:
            if metadata and key in metadata and metadata[key] != self.meta.get(key):
                raise DestinationError(
                    f"{self.path}: the dump's header, which holds its {key}, is already"
                    " written: set the schema stamp before the first table"
                )

    def _apply(self, metadata: Mapping[str, bytes | None] | None) -> None:
        base = self.header_meta or {}
        for key, value in (metadata or {}).items():
            if value is None:
                self.meta.pop(key, None)
            else:
                self.meta[key] = value
            if base.get(key) == value or (value is None and key not in base):
                self.changed.pop(key, None)
            else:
                self.changed[key] = value

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        self._check_stamp(metadata)
        self._apply(metadata)
        self._save()

    def finish(self) -> None:
        self._header()
        tables = [
            {
                "table": t["name"],
                "kind": t["kind"],
                "count": t["count"],
                "sum": f"{t['sum']:032x}",
                "offset": t["offset"],
                **({"meta": t["meta"]} if t["meta"] else {}),
            }
            for t in self.tables
        ]
        digest = store_digest(
            (t["name"], TableKind(t["kind"]), Digest(t["count"], t["sum"])) for t in self.tables
        )
        persistent = {k: v for k, v in self.meta.items() if k != META_CHECKPOINT}
        footer = {
            "footer": FORMAT,
            "tables": tables,
            "digest": digest,
            "meta": _meta_to_json(persistent),
        }
        self._write(json.dumps(footer) + "\n")
        try:
            self.file.flush()
            os.fsync(self.file.fileno())
        except OSError as exc:
            raise DestinationError(f"{self.path}: write failed ({exc.strerror or exc})") from exc
        self.sidecar.unlink(missing_ok=True)
        Path(str(self.sidecar) + ".tmp").unlink(missing_ok=True)  # left by a kill mid-_save

    def close(self) -> None:
        f = getattr(self, "file", None)
        if f is not None:
            f.close()
            del self.file


class JsonlEngine(Engine):
    """The portable JSON-lines dump."""

    name = "jsonl"
    extra = "jsonl"
    driver_module = "json"
    description = "portable JSON-lines dump with batch and footer checksums"
    capabilities = Capabilities(
        atomic_multi_table=True,
        read_only_open=True,
        multi_process_readers=True,
        directory=False,
    )
    sidecar_suffixes = (CHECKPOINT_SUFFIX,)
    suffixes = (".jsonl",)
    space_factor = 1.5

    @classmethod
    def detect(cls, path: Path) -> bool:
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            return f.read(15) == b'{"statemigrate"'

    @classmethod
    def open_reader(cls, path: Path, options: Mapping[str, Any] | None = None) -> Reader:
        check_options(cls, options, set())
        if path.is_dir():
            raise SourceError(f"{path}: is a directory, not a JSON-lines dump")
        return JsonlReader(path)

    @classmethod
    def create_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        check_options(cls, options, set())
        return JsonlWriter(path, create=True)

    @classmethod
    def open_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        check_options(cls, options, set())
        return JsonlWriter(path, create=False)
