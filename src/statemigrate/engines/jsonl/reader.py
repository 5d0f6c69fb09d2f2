"""Reading a dump: each table found through the footer, each batch checked as it is read."""

from __future__ import annotations

import itertools
import json
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from ...digest import Digest, batch_digest, store_digest
from ...errors import SourceError
from ...model import Batch, TableInfo
from ..access import close_held
from ..base import Reader, take_batches
from .format import (
    FORMAT,
    JSONL_FACTS,
    _b64d,
    _dict,
    _footer_table,
    _last_line,
    _meta_from_json,
    _version,
    _why,
    loads_line,
    stamp_from_header,
)


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

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        """The footer's count, exact (every table's records are checked against it)."""
        expect = self._expect.get(table.name)
        return None if expect is None else (expect.count, True)

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
            obj = loads_line(line)
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
        close_held(self, "file")
