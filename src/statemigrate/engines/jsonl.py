"""The portable dump (DESIGN.md, "The portable dump"): UTF-8 JSON lines.

A header line, then per table a table line, its records (``k``/``v`` in base64,
``ver`` when versioned) and a batch line after each batch with the batch's digest;
a footer with every table's digest, the offset of its table line and the store
digest. The reader checks every batch line as it reads it and every table against
the footer, and refuses a file without a valid footer (a truncated dump).

While a dump is being written, its checkpoint lives in ``PATH.checkpoint`` beside it
(the byte offset of the last complete batch): ``--resume`` truncates the file there.
"""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any, BinaryIO

from ..digest import Digest, batch_digest, store_digest
from ..errors import DestinationError, SourceError
from ..model import MAX_VERSION, Batch, Record, TableInfo, TableKind
from .base import Capabilities, Engine, Reader, Writer, check_options

FORMAT = 1
CHECKPOINT_SUFFIX = ".checkpoint"
CHUNK = 1 << 16  # bytes read per step while looking for the footer line
_b64e = base64.b64encode
_b64d = base64.b64decode


def _meta_to_json(meta: Mapping[str, bytes]) -> dict[str, str]:
    return {k: _b64e(v).decode() for k, v in sorted(meta.items())}


def _meta_from_json(data: Mapping[str, str]) -> dict[str, bytes]:
    return {k: _b64d(v) for k, v in data.items()}


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
            self._meta = _meta_from_json(_dict(header.get("meta", {}), "the header's meta"))
            self._meta.update(_meta_from_json(_dict(footer.get("meta", {}), "the footer's meta")))
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

    def list_tables(self) -> list[TableInfo]:
        return [info for info, _off in self._tables.values()]

    def metadata(self) -> dict[str, bytes]:
        return dict(self._meta)

    def iter_records(self, table: TableInfo, after: bytes | None = None) -> Iterator[Record]:
        for batch in self.read_batches(table, after):
            yield from batch

    def read_batches(self, table, after=None, *, max_records=10_000, max_bytes=8 << 20):  # type: ignore[override]
        """The dump's own batches (bounded when it was written), each checked first."""
        info, offset = self._tables[table.name]
        where = f"{self.path} table {table.name!r}"
        f = self.file
        assert f is not None, "read after close()"
        try:
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
        except (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError) as exc:
            raise SourceError(f"{where}: damaged line ({_why(exc)})") from exc

    def close(self) -> None:
        f = getattr(self, "file", None)
        if f is not None:
            f.close()
            self.file = None


class JsonlWriter(Writer):
    """Appends; the checkpoint sidecar records the offset of the last complete batch."""

    def __init__(self, path: Path, create: bool):
        self.path = path
        self.sidecar = Path(str(path) + CHECKPOINT_SUFFIX)
        self.meta: dict[str, bytes] = {}
        self.tables: list[dict[str, Any]] = []  # name, kind, meta, offset, count, sum
        self.batch_no = 0
        self.header_written = False
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
        try:
            state = json.loads(self.sidecar.read_text())
        except (OSError, ValueError) as exc:
            raise DestinationError(
                f"{self.path}: no usable checkpoint beside the dump ({exc})"
            ) from exc
        self.file = open(self.path, "r+b")  # noqa: SIM115 - held by the writer until close()
        self.file.truncate(state["offset"])
        self.file.seek(state["offset"])
        self.meta = _meta_from_json(state["meta"])
        self.tables = state["tables"]
        self.batch_no = state["batch_no"]
        self.header_written = state["header_written"]

    def _save(self) -> None:
        self.file.flush()
        state = {
            "offset": self.file.tell(),
            "meta": _meta_to_json(self.meta),
            "tables": self.tables,
            "batch_no": self.batch_no,
            "header_written": self.header_written,
        }
        tmp = Path(str(self.sidecar) + ".tmp")
        tmp.write_text(json.dumps(state))
        os.replace(tmp, self.sidecar)

    def _write(self, text: str) -> None:
        try:
            self.file.write(text.encode("utf-8"))
        except OSError as exc:
            raise DestinationError(f"{self.path}: write failed ({exc.strerror or exc})") from exc

    def _header(self) -> None:
        if not self.header_written:
            persistent = {k: v for k, v in self.meta.items() if k != "checkpoint"}
            head = {
                "statemigrate": FORMAT,
                "schema": _text(persistent.get("schema")),
                "revision": json.loads(persistent["revision"])
                if "revision" in persistent
                else None,
                "meta": _meta_to_json(persistent),
            }
            self._write(json.dumps(head) + "\n")
            self.header_written = True

    def list_tables(self) -> list[TableInfo]:
        return [TableInfo(t["name"], TableKind(t["kind"]), t["meta"]) for t in self.tables]

    def metadata(self) -> dict[str, bytes]:
        return dict(self.meta)

    def create_table(self, table: TableInfo) -> None:
        self._header()
        self.file.flush()
        entry = {
            "name": table.name,
            "kind": table.kind.value,
            "meta": table.meta,
            "offset": self.file.tell(),
            "count": 0,
            "sum": 0,
        }
        line: dict[str, Any] = {"table": table.name, "kind": table.kind.value}
        if table.meta:
            line["meta"] = table.meta
        self._write(json.dumps(line) + "\n")
        self.tables.append(entry)
        self._save()

    def write_batch(self, table: TableInfo, batch: Batch, metadata=None) -> None:  # type: ignore[override]
        entry = self.tables[-1]
        if entry["name"] != table.name:
            raise DestinationError(f"{self.path}: tables of a dump are written one after another")
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

    def _apply(self, metadata: Mapping[str, bytes | None] | None) -> None:
        for key, value in (metadata or {}).items():
            if value is None:
                self.meta.pop(key, None)
            else:
                self.meta[key] = value

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
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
        persistent = {k: v for k, v in self.meta.items() if k != "checkpoint"}
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

    def close(self) -> None:
        f = getattr(self, "file", None)
        if f is not None:
            f.close()
            del self.file


def _text(value: bytes | None) -> str | None:
    return value.decode("utf-8") if value is not None else None


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
