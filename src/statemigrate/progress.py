"""Progress reporting: the library calls a :class:`Progress`; the CLI draws it with tqdm."""

from __future__ import annotations

from typing import Any


class Estimate(int):
    """A table's record count that is the engine's estimate (RocksDB), not exact."""


class Progress:
    """Receives progress events; the default does nothing (the library prints nothing)."""

    def phase(self, name: str) -> None:
        """A new phase starts: ``converting``, ``verifying`` …"""

    def start_table(self, table: str, total: int | None) -> None:
        """A table starts; ``total`` is its record count when known cheaply (an
        :class:`Estimate` when it is the engine's estimate), else None."""

    def advance(self, records: int, nbytes: int) -> None:
        """A batch of ``records`` records, ``nbytes`` payload bytes, was handled."""

    def end_table(self) -> None:
        """The table in progress is done."""

    def close(self) -> None:
        """No more events."""


def table_total(progress: Progress | None, reader: Any, table: Any) -> int | None:
    """``table``'s record count for ``progress``, where the reader knows it cheaply.

    None when nobody draws progress (the default :class:`Progress`): the count costs a
    query on some engines.
    """
    if progress is None or type(progress).start_table is Progress.start_table:
        return None
    found = reader.estimate_count(table)
    if found is None:
        return None
    count, exact = found
    return count if exact else Estimate(count)
