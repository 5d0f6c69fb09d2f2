"""Progress reporting: the library calls a :class:`Progress`; the CLI draws it with tqdm.

Every verb that takes ``progress=`` takes either a :class:`Progress` (a subclass that
overrides the events it wants) or a plain callable, which receives a
:class:`ProgressEvent` at each event::

    statemigrate.convert("state.redb", "state.sqlite", progress=lambda e: print(
        e.kind, e.phase, e.table, e.done, e.total, e.run_done, e.run_total))

The library prints nothing by itself.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any


class Estimate(int):
    """A table's record count that is the engine's estimate (RocksDB), not exact."""


@dataclass(frozen=True)
class ProgressEvent:
    """What a plain callable given as ``progress=`` receives, at every event.

    Attributes:
        kind: ``"phase"`` (a phase starts), ``"total"`` (the run's total is known),
            ``"start"`` (a table starts), ``"advance"`` (a batch was handled), ``"end"``
            (the table is done) or ``"close"`` (no more events).
        phase: the phase in progress: ``converting``, ``verifying``, ``reading the
            source again``, ``revision 0002 (1 of 2, upgrade): …`` …; "" before the first.
        table: the table (or, in an upgrade, the operation) in progress, else None.
        done: records handled of that table in this phase (a table a resumed convert
            goes on with: from what its checkpoint holds).
        total: that table's record count when known (an :class:`Estimate` when it is
            the engine's estimate), else None.
        bytes: payload bytes handled of that table in this phase.
        records: the records of this batch (``advance``; else 0).
        nbytes: the payload bytes of this batch (``advance``; else 0).
        run_done: records handled over the whole run, every table and phase; a resumed
            convert starts from what its checkpoint holds.
        run_total: the records the whole run handles (a convert: its copy and its
            read-back, so each record twice), when known, else None.
        run_bytes: payload bytes handled over the whole run.
        elapsed: seconds since the first event.
    """

    kind: str
    phase: str
    table: str | None
    done: int
    total: int | None
    bytes: int
    records: int
    nbytes: int
    run_done: int
    run_total: int | None
    run_bytes: int
    elapsed: float

    @property
    def fraction(self) -> float | None:
        """``run_done / run_total`` (0 to 1), or None when the total is unknown."""
        if not self.run_total:
            return None
        return min(self.run_done / self.run_total, 1.0)


class Progress:
    """Receives progress events; the default does nothing (the library prints nothing).

    Override the methods you want; or pass a plain callable instead, which receives a
    :class:`ProgressEvent` for each (see the module's documentation).
    """

    def phase(self, name: str) -> None:
        """A new phase starts: ``converting``, ``verifying`` …"""

    def expect(self, total: int | None, done: Mapping[str, int] | None = None) -> None:
        """The whole run will handle ``total`` records over all its phases (None when
        unknown; an :class:`Estimate` when engines estimated it); ``done`` is what each
        table already held (a resumed convert's checkpoint), counted in ``total``.

        Called once the tables are known, before the first batch."""

    def start_table(self, table: str, total: int | None) -> None:
        """A table starts; ``total`` is its record count when known cheaply (an
        :class:`Estimate` when it is the engine's estimate), else None."""

    def advance(self, records: int, nbytes: int) -> None:
        """A batch of ``records`` records, ``nbytes`` payload bytes, was handled."""

    def end_table(self) -> None:
        """The table in progress is done."""

    def close(self) -> None:
        """No more events."""


#: What ``progress=`` takes: a :class:`Progress`, or a callable of a :class:`ProgressEvent`.
ProgressLike = Progress | Callable[[ProgressEvent], Any]


@dataclass
class TableFigures:
    """One table's figures over a run (for an end summary)."""

    records: int = 0  # the most records one phase handled
    bytes: int = 0  # the most bytes one phase handled
    seconds: float = 0.0  # over every phase
    done_before: int = 0  # records it held already (a resumed convert)


@dataclass
class Tracker(Progress):
    """A :class:`Progress` that keeps the run's figures: the base of the drawn ones.

    Subclasses call ``super()`` in each method, then draw from the attributes.
    """

    phase_name: str = ""
    table: str | None = None
    table_total: int | None = None
    table_done: int = 0
    table_from: int = 0  # table_done when the table started (a resumed one's checkpoint)
    table_bytes: int = 0
    table_started: float = 0.0
    run_total: int | None = None
    run_done: int = 0
    run_bytes: int = 0
    run_started_at: int = 0  # run_done when this run started (a resume's share)
    started: float = field(default_factory=time.monotonic)
    tables: dict[str, TableFigures] = field(default_factory=dict)
    resumed: dict[str, int] = field(default_factory=dict)  # until the table goes on
    closed: bool = False

    def phase(self, name: str) -> None:
        self._end()
        self.phase_name = name

    def expect(self, total: int | None, done: Mapping[str, int] | None = None) -> None:
        done = dict(done or {})
        self.run_done = sum(done.values())  # the total counts from here
        self.run_started_at = self.run_done
        for name, n in done.items():
            self.tables.setdefault(name, TableFigures()).done_before = n
        self.resumed = {name: n for name, n in done.items() if n}
        self.run_total = None if total is None else total

    def start_table(self, table: str, total: int | None) -> None:
        self._end()
        self.table, self.table_total = table, total
        # A resumed table goes on from what its checkpoint holds.
        self.table_done, self.table_bytes = self.resumed.pop(table, 0), 0
        self.table_from = self.table_done
        self.table_started = time.monotonic()

    def advance(self, records: int, nbytes: int) -> None:
        self.table_done += records
        self.table_bytes += nbytes
        self.run_done += records
        self.run_bytes += nbytes
        if self.run_total is not None and self.run_done > self.run_total:
            self.run_total = type(self.run_total)(self.run_done)  # an estimate fell short

    def end_table(self) -> None:
        self._end()

    def close(self) -> None:
        self._end()
        self.closed = True

    def _end(self) -> None:
        if self.table is None:
            return
        figures = self.tables.setdefault(self.table, TableFigures())
        figures.records = max(figures.records, self.table_done)
        figures.bytes = max(figures.bytes, self.table_bytes)
        figures.seconds += time.monotonic() - self.table_started
        self.table = None

    @property
    def elapsed(self) -> float:
        return time.monotonic() - self.started

    def eta(self) -> float | None:
        """Seconds left of the run at this run's rate, or None (no total, no rate yet)."""
        if self.run_total is None:
            return None
        handled = self.run_done - self.run_started_at
        if handled <= 0 or self.elapsed <= 0:
            return None
        return max(self.run_total - self.run_done, 0) / (handled / self.elapsed)

    def event(self, kind: str, records: int = 0, nbytes: int = 0) -> ProgressEvent:
        """The run as it stands, as a :class:`ProgressEvent` of ``kind``."""
        return ProgressEvent(
            kind,
            self.phase_name,
            self.table,
            self.table_done,
            self.table_total,
            self.table_bytes,
            records,
            nbytes,
            self.run_done,
            self.run_total,
            self.run_bytes,
            self.elapsed,
        )


class CallbackProgress(Tracker):
    """A plain callable as a :class:`Progress`: it gets a :class:`ProgressEvent` each time."""

    def __init__(self, callback: Callable[[ProgressEvent], Any]) -> None:
        super().__init__()
        self.callback = callback

    def phase(self, name: str) -> None:
        super().phase(name)
        self.callback(self.event("phase"))

    def expect(self, total: int | None, done: Mapping[str, int] | None = None) -> None:
        super().expect(total, done)
        self.callback(self.event("total"))

    def start_table(self, table: str, total: int | None) -> None:
        super().start_table(table, total)
        self.callback(self.event("start"))

    def advance(self, records: int, nbytes: int) -> None:
        super().advance(records, nbytes)
        self.callback(self.event("advance", records, nbytes))

    def end_table(self) -> None:
        if self.table is not None:
            event = self.event("end")
            super().end_table()
            self.callback(event)

    def close(self) -> None:
        if not self.closed:
            super().close()
            self.callback(self.event("close"))


def as_progress(progress: ProgressLike | None) -> Progress | None:
    """``progress=`` as a :class:`Progress`: itself, a callable wrapped, or None."""
    if progress is None or isinstance(progress, Progress):
        return progress
    if callable(progress):
        return CallbackProgress(progress)
    raise TypeError(f"progress must be a Progress or a callable, not {type(progress).__name__}")


def drawn(progress: Progress | None) -> bool:
    """Whether anybody draws ``progress`` (counting costs a query on some engines)."""
    return progress is not None and type(progress).start_table is not Progress.start_table


def table_total(progress: Progress | None, reader: Any, table: Any) -> int | None:
    """``table``'s record count for ``progress``, where the reader knows it cheaply.

    None when nobody draws progress (the default :class:`Progress`): the count costs a
    query on some engines. A count is taken once per reader and table for a progress.
    """
    if progress is None or not drawn(progress):
        return None
    cache: dict[tuple[int, str], int | None] = progress.__dict__.setdefault("_counted", {})
    key = (id(reader), table.name)
    if key not in cache:
        found = reader.estimate_count(table)
        if found is None:
            cache[key] = None
        else:
            count, exact = found
            cache[key] = count if exact else Estimate(count)
    return cache[key]


def run_total(counts: Iterable[int | None], passes: int = 1) -> int | None:
    """``passes`` times the sum of ``counts``; None when one is unknown; an
    :class:`Estimate` when one is."""
    counts = list(counts)
    if any(c is None for c in counts):
        return None
    total = passes * sum(c for c in counts if c is not None)
    return Estimate(total) if any(isinstance(c, Estimate) for c in counts) else total
