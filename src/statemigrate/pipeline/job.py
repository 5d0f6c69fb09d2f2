"""One convert: both stores, what to copy, and how the run is told to stop."""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..checkpoint import fingerprint
from ..engines.base import DEFAULT_BATCH_BYTES, DEFAULT_BATCH_RECORDS, Engine
from ..errors import UsageError
from ..progress import Progress
from .destination import done_mark, partial_path
from .report import ConvertReport


@dataclass
class Job:
    """What :func:`~statemigrate.api.convert` was asked to do, resolved; passed down whole.

    Attributes:
        src_engine: the source's engine.
        src_path: the source store.
        src_options: reader options of the source's engine.
        dst_engine: the destination's engine.
        final: where the destination goes.
        dst_options: writer options of the destination's engine.
        tables: only these tables (all when None).
        batch_records: records per batch at most.
        batch_bytes: payload bytes per batch at most.
        overwrite: an existing destination may be replaced.
        verify: read the built store back before placing it.
        resume: go on from what an interrupted run left.
        force: skip the free-space check.
        progress: receives progress events.
        should_stop: polled between batches.
        allow_empty: a source whose every part the reader left out (``skip_foreign_tables``)
            may be converted into an empty store.
        sizes: each source table's payload bytes, from the last whole read of it.
        started: when the job began (``time.monotonic``), for the report's seconds.
    """

    src_engine: type[Engine]
    src_path: Path
    dst_engine: type[Engine]
    final: Path
    src_options: Mapping[str, Any] | None = None
    dst_options: Mapping[str, Any] | None = None
    tables: list[str] | None = None
    batch_records: int = DEFAULT_BATCH_RECORDS
    batch_bytes: int = DEFAULT_BATCH_BYTES
    overwrite: bool = False
    verify: bool = True
    resume: bool = False
    force: bool = False
    progress: Progress = field(default_factory=Progress)
    should_stop: Callable[[], bool] = lambda: False
    allow_empty: bool = False
    sizes: dict[str, int] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.batch_records < 1 or self.batch_bytes < 1:
            raise UsageError("batch sizes must be positive")

    def seconds(self) -> float:
        """Seconds since the job began."""
        return time.monotonic() - self.started

    @property
    def partial(self) -> Path:
        """Where the destination is built (``DST.partial``)."""
        return partial_path(self.final)

    @property
    def done_mark(self) -> Path:
        """Beside ``DST.partial`` once every batch is written and synced."""
        return done_mark(self.partial)

    @property
    def resume_hint(self) -> str:
        """What to tell the user when the run stops with its work kept."""
        return f"run the same command with --resume to finish ({self.partial} holds it)"

    def source_fingerprint(self) -> dict[str, Any]:
        """The source's files as a checkpoint records them (its volatile files left out)."""
        engine = self.src_engine
        return fingerprint(
            engine.name,
            self.src_path,
            engine.store_paths(self.src_path)[1:],
            engine.volatile_files,
        )

    def new_report(self) -> ConvertReport:
        """An empty report naming both stores."""
        return ConvertReport(
            str(self.src_path), self.src_engine.name, str(self.final), self.dst_engine.name
        )
