"""Writing a redb file: one commit per batch, in the format the tables record."""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...model import Batch, TableInfo
from ..base import META_TABLE_PREFIX, Reader, Writer
from .header import REDB_FACTS
from .reader import RedbReader, _native_batches
from .tables import _TYPED, _meta_updates, _table_facts, _Target, choose_format, table_info

if TYPE_CHECKING:
    from .options import RedbOptions


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
        options: RedbOptions,
        handle: Any = None,
        redb2: bool = False,
    ) -> None:
        self.path = path
        self._module = module
        self._options = options
        self._native = handle
        self._target: _Target | None = None
        self._checked: set[str] = set()
        if handle is not None:
            self._target = _Target(module, int(handle.format), redb2, options)

    def _handle(self, metas: Iterable[Mapping[str, Any]] = ()) -> Any:
        """The native writer, creating the file (in the format ``metas`` record) if needed."""
        if self._native is None:
            fmt, redb2 = choose_format(self._options.redb_format, metas)
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

    def takes_held(self, reader: Reader) -> bool:
        """A redb source's batches go from its binding to this one as they are held."""
        return isinstance(reader, RedbReader)

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        """Insert a batch (a list, or a redb reader's held batch) and update the metadata in
        one commit."""
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

        from ...fsutil import copy_file_written_back

        self.sync()
        copy_file_written_back(self.path, path)
        shutil.copystat(self.path, path)

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
