"""Writing a dump: appended batch by batch, resumable from the checkpoint beside it."""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, BinaryIO

from ...digest import Digest, batch_digest, store_digest
from ...errors import DestinationError
from ...model import Batch, TableInfo, TableKind
from ..base import META_CHECKPOINT, Writer
from .format import (
    _UNUSABLE,
    CHECKPOINT_SUFFIX,
    FORMAT,
    RECORD_LINE,
    STAMP,
    _b64d,
    _b64e,
    _changes,
    _dict,
    _header_meta,
    _meta_from_json,
    _meta_to_json,
    _table_entry,
    _whole,
    _why,
    stamp_fields,
)


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
            # Never through a link planted there since the writer opened (O_TRUNC).
            flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
            with open(os.open(tmp, flags, 0o644), "w") as f:
                f.write(json.dumps(state))
            os.replace(tmp, self.sidecar)
        except OSError as exc:
            raise DestinationError(f"{self.path}: write failed ({exc.strerror or exc})") from exc

    def _write(self, text: str) -> None:
        self._write_parts([text.encode("utf-8")])

    def _write_parts(self, parts: list[bytes]) -> None:
        try:
            self.file.writelines(parts)
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
        # Each line as the pieces of its bytes, never joined into one text: a huge
        # value is then held once as base64 beside the record (a joined batch text,
        # then its encoding, held it four times over: 5x a 200 MB value).
        parts: list[bytes] = []
        for record in batch:
            parts += (b'{"k":"', _b64e(record[0]), b'","v":"', _b64e(record[1]))
            parts.append(b'","ver":%d}\n' % record[2] if table.versioned else b'"}\n')
        self.batch_no += 1
        footer = {"batch": self.batch_no, "records": d.count, "sum": d.hex()}
        parts.append(json.dumps(footer).encode() + b"\n")
        self._write_parts(parts)
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
