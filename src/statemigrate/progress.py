"""Progress reporting: the library calls a :class:`Progress`; the CLI draws it with tqdm."""

from __future__ import annotations


class Progress:
    """Receives progress events; the default does nothing (the library prints nothing)."""

    def phase(self, name: str) -> None:
        """A new phase starts: ``converting``, ``verifying`` …"""

    def start_table(self, table: str, total: int | None) -> None:
        """A table starts; ``total`` is its record count when known."""

    def advance(self, records: int, nbytes: int) -> None:
        """A batch of ``records`` records, ``nbytes`` payload bytes, was handled."""

    def end_table(self) -> None:
        """The table in progress is done."""

    def close(self) -> None:
        """No more events."""
