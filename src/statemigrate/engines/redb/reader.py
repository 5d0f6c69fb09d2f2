"""Reading a redb file: one read transaction, whole batches from the native binding."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import DestinationError, SourceError, StoreBusyError
from ...fsutil import copy_file_written_back, crash_point
from ...model import Batch, TableInfo
from ..access import batches_after
from ..base import Reader
from .header import HEADER_LEN, REDB_FACTS
from .tables import table_info


def _native_batches(
    handle: Any, desc: dict[str, Any], after: bytes | None, max_records: int, max_bytes: int
) -> Iterator[Batch]:
    """Whole batches from the binding, each read with the GIL released."""
    return batches_after(lambda at: handle.read_batch(desc, at, max_records, max_bytes), after)


class RedbReader(Reader):
    """One read transaction over a redb file (read-only; never modifies it)."""

    facts = REDB_FACTS
    threadsafe_reads = True  # the binding holds its snapshot behind a lock, reads without the GIL

    def __init__(self, path: Path, native: Any) -> None:
        self.path = path
        self._native = native
        self._descs: dict[str, dict[str, Any]] = {}

    @property
    def format(self) -> int:
        """The file format this reader opened (1, 2 or 3)."""
        return int(self._native.format)

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

    def scan_held(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        """The same batches held by the binding (``_native.HeldBatch``), for a redb writer."""
        desc = self._desc_of(table)
        yield from batches_after(
            lambda at: self._native.read_held(desc, at, max_records, max_bytes), after
        )

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        """redb's stored length of the table (a multimap's key-value pairs), exact."""
        with contextlib.suppress(Exception):  # progress only: a failure here is no error
            return int(self._native.count(self._desc_of(table))), True
        return None

    def native_digests(self, tables: list[TableInfo]) -> list[tuple[int, int, int]] | None:
        """The tables' digests from the binding's own reads (the batches ``scan`` yields,
        hashed in Rust without the GIL); None when it cannot read them, so that the batch
        loop names the problem."""
        from ... import _native  # the binding this reader was opened with

        unread = (SourceError, ValueError, _native.RedbError, _native.RedbCorruptError)
        try:
            descs = [self._desc_of(t) for t in tables]
            found = self._native.digests(descs)
        except unread:  # the batch loop reads it again and names the problem
            return None
        return [(int(c), int(s), int(n)) for c, s, n in found]

    def copy_into(self, path: Path, *, redb2: bool, upgrade: bool) -> None:
        """Copy the file's bytes to the new file ``path``, then make the copy a clean file
        of the redb version that writes its format (``_native.redb_settle_copy``), upgraded
        from format 2 to 3 by redb 2.6's ``Database::upgrade`` when ``upgrade``.

        The copy is of this reader's snapshot: redb commits only by rewriting the header,
        and a process that opens the file for writing meanwhile (redb takes a lock this
        reader's shared one excludes, except redb 4.3+'s shared mode) would change it, so a
        header that is not the same before and after the copy is refused as busy.
        """
        before = _head(self.path)
        try:
            copy_file_written_back(self.path, path)
        except OSError as exc:
            raise DestinationError(f"{path}: copy failed ({exc.strerror or exc})") from exc
        if _head(self.path) != before or _head(path) != before:
            raise StoreBusyError(
                f"{self.path}: another process committed to the file while it was copied",
                hint="stop the app (or let it finish) and run again",
            )
        crash_point("native copy")
        from ... import _native  # the binding this reader was opened with

        failed = f"{path}: copy failed ({{text}})"
        with REDB_FACTS.mapped(self.path, "copying", writing=True, source=True, failed=failed):
            _native.redb_settle_copy(str(path), self.format, redb2, upgrade)

    def close(self) -> None:
        """Release the read transaction and the file."""
        self._native.close()


def _head(path: Path) -> bytes:
    """The file's header (its commit slots) and size: what every commit changes."""
    with open(path, "rb") as f:
        return f.read(HEADER_LEN) + path.stat().st_size.to_bytes(8, "little")
