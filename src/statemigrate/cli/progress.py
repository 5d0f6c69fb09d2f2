"""Progress on stderr, drawn at the CLI's edge (the library only calls a Progress).

In a terminal: a tqdm bar per table with records, bytes, rate and, where the engine
knows the table's count cheaply, a total and an ETA (an estimate is labelled as one),
and a line per phase. Elsewhere (CI, an installer's log): one line per table when it
ends, and one every :data:`LOG_EVERY` seconds while a long table runs. Before any
message the bar is cleared (:func:`clear`), so no message lands on the bar's line.
"""

from __future__ import annotations

import sys
import time
from typing import Any

from ..progress import Estimate, Progress

LOG_EVERY = 10.0  # seconds between log lines while one table runs

_ACTIVE: list[Progress] = []  # the progress drawing now, for clear()


def for_stderr(quiet: bool, *, log: bool = True) -> Progress | None:
    """The progress a command draws on stderr: a bar in a terminal, else log lines
    (None with ``log`` False, for a quick command whose output is its point), or None
    (``--quiet``)."""
    if quiet or not (log or sys.stderr.isatty()):
        return None
    progress: Progress = BarProgress() if sys.stderr.isatty() else LogProgress()
    _ACTIVE.append(progress)
    return progress


def clear() -> None:
    """End whatever progress is drawn, so that the next message starts a clean line."""
    while _ACTIVE:
        _ACTIVE.pop().close()


def _mb(nbytes: int) -> str:
    return f"{nbytes / 1e6:,.1f} MB"


class BarProgress(Progress):
    """A tqdm bar per table; the phase as a line above it."""

    def __init__(self) -> None:
        self.bar: Any = None
        self.label = ""
        self.bytes = 0

    def phase(self, name: str) -> None:
        from tqdm import tqdm

        self.end_table()
        self.label = name
        tqdm.write(f"statemigrate: {name}", file=sys.stderr)

    def start_table(self, table: str, total: int | None) -> None:
        from tqdm import tqdm

        self.end_table()
        estimate = " (total estimated)" if isinstance(total, Estimate) else ""
        self.bar = tqdm(
            total=total,
            desc=f"{table}{estimate}",
            unit="rec",
            unit_scale=True,
            leave=False,
            dynamic_ncols=True,
            file=sys.stderr,
        )
        self.bytes = 0

    def advance(self, records: int, nbytes: int) -> None:
        if self.bar is not None:
            self.bytes += nbytes
            # The bytes first: update() redraws, and the line shows this batch's figure.
            self.bar.set_postfix_str(_mb(self.bytes), refresh=False)
            self.bar.update(records)

    def end_table(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def close(self) -> None:
        self.end_table()


class LogProgress(Progress):
    """Lines for a log: a table's records, bytes, time and rate when it ends."""

    def __init__(self) -> None:
        self.label = ""
        self.table = ""
        self.total: int | None = None
        self.records = self.bytes = 0
        self.started = self.logged = 0.0
        self.closed = False  # stderr's reader has gone: the job goes on unlogged

    def _line(self, text: str) -> None:
        from .output import say

        if not self.closed:
            self.closed = not say(f"statemigrate: {text}")

    def phase(self, name: str) -> None:
        self.label = name
        self._line(name)

    def start_table(self, table: str, total: int | None) -> None:
        self.table, self.total = table, total
        self.records = self.bytes = 0
        self.started = self.logged = time.monotonic()

    def _figures(self) -> str:
        seconds = max(time.monotonic() - self.started, 1e-9)
        of = ""
        if self.total is not None:
            about = "about " if isinstance(self.total, Estimate) else ""
            of = f" of {about}{self.total:,}"
        label = f"{self.label} " if self.label else ""
        # A table a native walk answered in one go has no rate worth printing.
        rate = f", {self.records / seconds:,.0f} records/s" if seconds >= 0.05 else ""
        return (
            f"{label}{self.table}: {self.records:,}{of} records, {_mb(self.bytes)}, "
            f"{seconds:.1f}s{rate}"
        )

    def advance(self, records: int, nbytes: int) -> None:
        self.records += records
        self.bytes += nbytes
        now = time.monotonic()
        if now - self.logged >= LOG_EVERY:
            self.logged = now
            self._line(self._figures())

    def end_table(self) -> None:
        if self.table:
            self._line(self._figures())
            self.table = ""

    def close(self) -> None:
        self.table = ""
