"""tqdm progress bars on stderr (the CLI's edge; the library never imports this)."""

from __future__ import annotations

from typing import Any

from tqdm import tqdm

from .progress import Progress


class TqdmProgress(Progress):
    """A bar per table: records, bytes, rate, and ETA when the total is known."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.label = ""

    def phase(self, name: str) -> None:
        self.label = name

    def start_table(self, table: str, total: int | None) -> None:
        self.end_table()
        self.bar = tqdm(
            total=total,
            desc=f"{self.label} {table}",
            unit="rec",
            unit_scale=True,
            leave=False,
            dynamic_ncols=True,
        )
        self.bytes = 0

    def advance(self, records: int, nbytes: int) -> None:
        if self.bar is not None:
            self.bytes += nbytes
            self.bar.update(records)
            self.bar.set_postfix_str(f"{self.bytes / 1e6:.1f} MB", refresh=False)

    def end_table(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def close(self) -> None:
        self.end_table()
