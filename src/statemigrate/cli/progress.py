"""Progress on stderr, drawn at the CLI's edge (the library only calls a Progress).

In a terminal: one bar for the whole run (records done of the run's total, over every
table and phase: a convert's copy and its read-back, a resume from what its checkpoint
holds; bytes, rate, ETA), with the table in progress on a bar under it (its total
where the engine knows the count cheaply; an estimate is labelled as one), and a line
per phase. Elsewhere (CI, an installer's log): one line per table when it ends, and one
every :data:`LOG_EVERY` seconds (``$STATEMIGRATE_PROGRESS_EVERY``) while a table runs,
each with the run's share done and its ETA where the total is known. Before any message
the bars are cleared (:func:`clear`), so no message lands on a bar's line. A convert and
a verify end with a summary table (:func:`print_summary`).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Mapping
from typing import IO, Any

from ..progress import Estimate, Progress, Tracker

LOG_EVERY = 10.0  # seconds between log lines while one table runs
EVERY_ENV = "STATEMIGRATE_PROGRESS_EVERY"  # overrides LOG_EVERY (seconds)

_ACTIVE: list[Progress] = []  # the progress drawing now, for clear()


def for_stderr(quiet: bool, *, log: bool = True) -> Tracker | None:
    """The progress a command draws on stderr: bars in a terminal, else log lines
    (None with ``log`` False, for a quick command whose output is its point), or None
    (``--quiet``)."""
    if quiet or not (log or sys.stderr.isatty()):
        return None
    progress: Tracker = BarProgress() if sys.stderr.isatty() else LogProgress()
    _ACTIVE.append(progress)
    return progress


def clear() -> None:
    """End whatever progress is drawn, so that the next message starts a clean line."""
    while _ACTIVE:
        _ACTIVE.pop().close()


def _mb(nbytes: int) -> str:
    return f"{nbytes / 1e6:,.1f} MB"


def _duration(seconds: float) -> str:
    """``42s``, ``3m05s``, ``1h02m``."""
    s = round(seconds)
    if s < 60:
        return f"{s}s"
    if s < 3600:
        return f"{s // 60}m{s % 60:02d}s"
    return f"{s // 3600}h{s % 3600 // 60:02d}m"


class BarProgress(Tracker):
    """One tqdm bar for the run, one under it for the table in progress; phases as lines."""

    def __init__(self, file: IO[str] | None = None) -> None:
        super().__init__()
        self.file = file if file is not None else sys.stderr
        self.overall: Any = None
        self.bar: Any = None

    def _tqdm(self, **kwargs: Any) -> Any:
        from tqdm import tqdm

        return tqdm(
            unit="rec",
            unit_scale=True,
            leave=False,
            dynamic_ncols=True,
            file=self.file,
            **kwargs,
        )

    def _overall(self) -> Any:
        if self.overall is None:
            self.overall = self._tqdm(
                total=self.run_total, initial=self.run_done, desc=self._overall_desc(), position=0
            )
        return self.overall

    def _overall_desc(self) -> str:
        return "run (total estimated)" if isinstance(self.run_total, Estimate) else "run"

    def phase(self, name: str) -> None:
        from tqdm import tqdm

        self._close_table()
        super().phase(name)
        tqdm.write(f"statemigrate: {name}", file=self.file)

    def expect(self, total: int | None, done: Mapping[str, int] | None = None) -> None:
        super().expect(total, done)
        if self.overall is None:
            self._overall()
        else:  # a second plan of the run (a finished .partial that had to be remade)
            self.overall.reset(total=self.run_total)
            self.overall.update(self.run_done)
            self.overall.set_description_str(self._overall_desc(), refresh=False)

    def start_table(self, table: str, total: int | None) -> None:
        self._close_table()
        super().start_table(table, total)
        overall = self._overall()
        estimate = " (total estimated)" if isinstance(total, Estimate) else ""
        self.bar = self._tqdm(
            total=total, initial=self.table_done, desc=f"  {table}{estimate}", position=1
        )
        overall.refresh()

    def advance(self, records: int, nbytes: int) -> None:
        super().advance(records, nbytes)
        if self.bar is not None:
            # The bytes first: update() redraws, and the line shows this batch's figure.
            self.bar.set_postfix_str(_mb(self.table_bytes), refresh=False)
            self.bar.update(records)
        overall = self._overall()
        if overall.total != self.run_total:
            overall.total = self.run_total  # an estimate fell short
        overall.set_postfix_str(_mb(self.run_bytes), refresh=False)
        overall.update(records)

    def _close_table(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None

    def end_table(self) -> None:
        self._close_table()
        super().end_table()

    def close(self) -> None:
        self._close_table()
        if self.overall is not None:
            self.overall.refresh()  # its last figures drawn, 100 % at a verified end
            self.overall.close()
            self.overall = None
        super().close()


class LogProgress(Tracker):
    """Lines for a log: a table's records, bytes, time and rate when it ends, and while
    it runs; the run's share and ETA where its total is known."""

    def __init__(self) -> None:
        super().__init__()
        self.logged = 0.0
        self.logged_done = -1
        self.every = LOG_EVERY
        try:
            self.every = float(os.environ.get(EVERY_ENV, LOG_EVERY))
        except ValueError:
            pass
        self.closed_stream = False  # stderr's reader has gone: the job goes on unlogged

    def _line(self, text: str) -> None:
        from .output import say

        if not self.closed_stream:
            self.closed_stream = not say(f"statemigrate: {text}")

    def phase(self, name: str) -> None:
        super().phase(name)
        self._line(name)

    def start_table(self, table: str, total: int | None) -> None:
        super().start_table(table, total)
        self.logged = self.table_started
        self.logged_done = -1  # the table's records when its last line was logged

    def _figures(self) -> str:
        self.logged_done = self.table_done
        seconds = max(time.monotonic() - self.table_started, 1e-9)
        of = ""
        if self.table_total is not None:
            about = "about " if isinstance(self.table_total, Estimate) else ""
            of = f" of {about}{self.table_total:,}"
        label = f"{self.phase_name} " if self.phase_name else ""
        # A table a native walk answered in one go has no rate worth printing.
        handled = self.table_done - self.table_from
        rate = f", {handled / seconds:,.0f} records/s" if seconds >= 0.05 else ""
        return (
            f"{label}{self.table}: {self.table_done:,}{of} records, {_mb(self.table_bytes)}, "
            f"{seconds:.1f}s{rate}{self._share()}"
        )

    def _share(self) -> str:
        """``; 42% of the run, ETA 3m05s`` where the run's total is known."""
        if not self.run_total:
            return ""
        about = "about " if isinstance(self.run_total, Estimate) else ""
        share = int(100 * min(self.run_done / self.run_total, 1.0))
        eta = self.eta()
        left = f", ETA {_duration(eta)}" if eta is not None and share < 100 else ""
        return f"; {about}{share}% of the run{left}"

    def advance(self, records: int, nbytes: int) -> None:
        super().advance(records, nbytes)
        now = time.monotonic()
        if now - self.logged >= self.every:
            self.logged = now
            self._line(self._figures())

    def end_table(self) -> None:
        if self.table is not None and self.logged_done != self.table_done:
            self._line(self._figures())  # not twice the same line
        super().end_table()

    def close(self) -> None:
        self.table = None  # a table cut short is not reported as done
        super().close()


def summary_lines(progress: Tracker, report: Any) -> list[str]:
    """The end summary: a row per table (records, bytes, time, rate, "resumed" where
    the table was), and a total row.

    ``report`` is a convert's report (its tables' records and bytes), or None (a
    verify: the figures the progress saw).
    """
    from .output import count
    from .tables import printable, table

    figures = progress.tables
    if report is not None:
        names = [(t.name, t.records, t.bytes) for t in report.tables]
        wall = report.seconds
        resumed = bool(getattr(report, "resumed", False))
    else:
        names = [(n, f.records, f.bytes) for n, f in figures.items()]
        wall = progress.elapsed
        resumed = False
    rows = []
    for name, records, nbytes in names:
        f = figures.get(name)
        seconds = f.seconds if f is not None else 0.0
        note = "resumed" if f is not None and f.done_before else ""
        rows.append(
            [printable(name), count(records), count(nbytes), *_time_rate(records, seconds), note]
        )
    records = None if any(r is None for _, r, _ in names) else sum(r for _, r, _ in names)
    nbytes = None if any(b is None for _, _, b in names) else sum(b for _, _, b in names)
    total = ["total", count(records), count(nbytes), *_time_rate(records, wall)]
    rows.append([*total, "resumed" if resumed else ""])
    return table(["table", "records", "bytes", "time", "rate", ""], rows, right={1, 2, 3, 4})


def _time_rate(records: int | None, seconds: float) -> list[str]:
    # A table a native walk answered in one go has no rate worth printing, nor one
    # whose records nothing counted (the engine's own copy under --no-verify).
    rate = f"{records / seconds:,.0f}/s" if records is not None and seconds >= 0.01 else "-"
    return [f"{seconds:.1f}s", rate]


def print_summary(progress: Tracker | None, report: Any = None) -> None:
    """Print :func:`summary_lines` on stderr, when progress was drawn (not ``-q``, ``--json``)."""
    if progress is None or getattr(report, "already_complete", False):
        return
    from .output import say

    for line in summary_lines(progress, report):
        if not say(line):
            return
