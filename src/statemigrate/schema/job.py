"""One upgrade or downgrade: what was asked, and the store it runs on once opened.

:class:`UpgradeJob` is what :func:`statemigrate.api.upgrade` (or ``downgrade``) was
asked, passed down whole, as :class:`statemigrate.pipeline.job.Job` is for a convert;
:class:`RevisionRun` is the open store a run's revisions share (its engine, writer and
path, the batch budget, the progress, the private names taken so far).
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..digest import Digest
from ..engines.base import DEFAULT_BATCH_BYTES, DEFAULT_BATCH_RECORDS, Engine, Writer
from ..errors import UsageError
from ..model import TableKind
from ..progress import Progress


@dataclass
class UpgradeJob:
    """What :func:`~statemigrate.api.upgrade` or ``downgrade`` was asked to do.

    Attributes:
        store: the store, a path or ``ENGINE:PATH``.
        schema_dir: the schema directory.
        target: the revision to reach (``head``, an id, ``+N``, ``base``, ``-N``).
        up: an upgrade (True) or a downgrade.
        engine: the store's engine when not detected.
        dry_run: list what would run; change nothing.
        backup: where the engine-native backup goes first, or None.
        digests: digest the store before and after, for the report.
        batch_records: records per batch at most.
        batch_bytes: payload bytes per batch at most.
        create: make the store first when nothing (or an empty directory) is there.
        progress: receives the phases and each operation's records.
        options: the engine's options for the store (a layout file: ``layout``).
        started: when the job began (``time.monotonic``), for the report's seconds.
    """

    store: str
    schema_dir: str | os.PathLike[str]
    target: str
    up: bool
    engine: str | None = None
    dry_run: bool = False
    backup: Path | None = None
    digests: bool = True
    batch_records: int = DEFAULT_BATCH_RECORDS
    batch_bytes: int = DEFAULT_BATCH_BYTES
    create: bool = False
    progress: Progress = field(default_factory=Progress)
    options: Mapping[str, Any] | None = None
    started: float = field(default_factory=time.monotonic)

    def __post_init__(self) -> None:
        if self.batch_records < 1 or self.batch_bytes < 1:
            raise UsageError("batch sizes must be positive")

    @property
    def at_head_asked(self) -> bool:
        """An upgrade to the head(s) that may be answered from the stamp alone."""
        return self.up and not self.dry_run and self.target in ("head", "heads")

    def seconds(self) -> float:
        """Seconds since the job began."""
        return time.monotonic() - self.started


@dataclass
class RevisionRun:
    """The open store the revisions of one run share.

    Attributes:
        engine: the store's engine.
        writer: the store, open for writing under its lock.
        path: the store's path.
        batch_records: records per batch at most, for copies and rewrites.
        batch_bytes: payload bytes per batch at most.
        progress: receives each operation's records.
        counter: private table names taken so far (they never repeat within a run).
        counts: the store's tables' record counts where known (progress totals),
            carried over each revision's commit.
        digests: each table's kind and digest, from the walk before the revisions and
            carried over each commit (a rewritten table's from the records its
            operation wrote); None when not kept, or no longer known (``op.execute``).
    """

    engine: type[Engine]
    writer: Writer
    path: Path
    batch_records: int = DEFAULT_BATCH_RECORDS
    batch_bytes: int = DEFAULT_BATCH_BYTES
    progress: Progress = field(default_factory=Progress)
    counter: list[int] = field(default_factory=lambda: [0])
    counts: dict[str, int] = field(default_factory=dict)
    digests: dict[str, tuple[TableKind, Digest]] | None = None


__all__ = ["RevisionRun", "UpgradeJob"]
