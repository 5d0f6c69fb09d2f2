"""Reading a redb file: one read transaction, whole batches from the native binding."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from ...errors import SourceError
from ...model import Batch, TableInfo
from ..base import Reader
from .header import REDB_FACTS
from .tables import table_info


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

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        """redb's stored length of the table (a multimap's key-value pairs), exact."""
        with contextlib.suppress(Exception):  # progress only: a failure here is no error
            return int(self._native.count(self._desc_of(table))), True
        return None

    def close(self) -> None:
        """Release the read transaction and the file."""
        self._native.close()
