"""The resume plan: what an earlier run left at ``DST.partial``, and what this run does.

An interrupted convert leaves ``DST.partial`` with a checkpoint in its metadata (go on
after its last key), or, killed after its last batch, without one but beside the
finished mark ``DST.partial.done`` (keep it if it reads back equal to the source).
Anything else there is started over. A destination already in place that equals the
source (killed right after the rename) leaves nothing to do.
"""

from __future__ import annotations

import contextlib
import errno
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from enum import Enum
from pathlib import Path
from typing import Any

from ..checkpoint import Checkpoint
from ..digest import Digest
from ..engines.base import Engine, Reader
from ..errors import (
    DestinationError,
    InterruptedByUser,
    LinkRefusedError,
    SourceError,
    StoreBusyError,
)
from ..fsutil import fsync_tree, remove_path
from ..model import TableInfo
from ..stores.opening import open_source
from ..stores.walk import digest_store
from .destination import remove_store
from .job import Job
from .readback import Built, check_built, check_partial
from .report import ConvertReport, fill_report
from .source import select_tables


class Start(Enum):
    """Where the run starts building ``DST.partial``."""

    FRESH = "fresh"  # from nothing: it is created
    CONTINUE = "continue"  # after the last key of the checkpoint it holds
    FINISHED = "finished"  # every batch was written and synced: it is checked
    COMPLETE = "complete"  # it was finished and reads back equal to the source: kept


@dataclass
class ResumePlan:
    """What this run does with ``DST.partial``.

    Attributes:
        start: where the run starts.
        checkpoint: how far the copy got (set once the copy starts).
        created: this run created ``DST.partial``: a failure that no ``--resume``
            finishes removes it (one an earlier run made is never removed here).
    """

    start: Start
    checkpoint: Checkpoint | None = None
    created: bool = False

    def check_source(self, fingerprint: dict[str, Any], job: Job) -> None:
        """Refuse (exit 4) a source whose files changed since the checkpoint was written.

        Raises:
            SourceError: the fingerprints differ.
        """
        if self.checkpoint is not None and self.checkpoint.source != fingerprint:
            raise SourceError(
                f"{job.src_path}: the source changed since the interrupted conversion",
                hint=f"start over: remove {job.partial}",
            )


def plan_resume(job: Job) -> ResumePlan:
    """Look at what an earlier run left at ``DST.partial`` and decide where to start.

    A ``.partial`` without ``--resume`` is refused; one that holds no checkpoint and
    no finished mark (killed while it was being created) is removed.

    Raises:
        DestinationError: a ``.partial`` is there and ``--resume`` was not given (exit 5).
    """
    engine, partial, mark = job.dst_engine, job.partial, job.done_mark
    if not engine.store_paths(partial):
        remove_path(mark)
        return ResumePlan(Start.FRESH)
    if not job.resume:
        raise DestinationError(
            f"{partial}: an interrupted conversion left this behind",
            hint="pass --resume to continue it, or remove it to start over",
        )
    checkpoint = load_checkpoint(engine, partial, job.dst_options)
    if checkpoint is not None:
        remove_path(mark)
        return ResumePlan(Start.CONTINUE, checkpoint)
    if mark.exists():
        return ResumePlan(Start.FINISHED)
    remove_store(engine, partial)  # the finished mark with it
    return ResumePlan(Start.FRESH)


def load_checkpoint(
    engine: type[Engine], partial: Path, options: Mapping[str, Any] | None
) -> Checkpoint | None:
    """The checkpoint committed in ``partial``, or None (nothing there can be trusted)."""
    try:
        writer = engine.open_for_writing(partial, options)
    except LinkRefusedError:
        raise  # a link planted in it: not written through, nor removed as a failed start
    except (DestinationError, SourceError, OSError):
        return None  # nothing committed that we can trust (killed while creating it): start over
    try:
        meta = writer.metadata()
    finally:
        writer.close()
    return Checkpoint.from_metadata(meta)


def settle_finished(
    plan: ResumePlan, job: Job, reader: Reader, chosen: list[TableInfo]
) -> dict[str, Digest] | None:
    """A finished ``.partial`` is kept when it reads back equal to the source.

    Killed after the last batch (while syncing, verifying, placing): the plan becomes
    COMPLETE, or FRESH once the ``.partial`` is removed. Other plans are left alone.

    Returns:
        The source's digests when the ``.partial`` is kept, else None.
    """
    if plan.start is not Start.FINISHED:
        return None
    job.progress.phase("checking the interrupted destination")
    digests = digest_store(
        reader, chosen, str(job.src_path), None, job.should_stop, job.resume_hint, job.sizes
    )
    if partial_is_complete(job, chosen, digests):
        plan.start = Start.COMPLETE
        return digests
    remove_store(job.dst_engine, job.partial)
    plan.start = Start.FRESH
    return None


def partial_is_complete(
    job: Job, chosen: list[TableInfo], source_digests: dict[str, Digest]
) -> bool:
    """Whether the job's ``.partial`` without checkpoint holds the whole source already."""
    try:
        check_partial(job, chosen, source_digests)
    except (DestinationError, SourceError):
        return False
    return True


def already_in_place(job: Job) -> ConvertReport | None:
    """With ``--resume``: the report of a destination already placed and equal to the source.

    A run killed after its rename leaves the finished store and nothing else; running
    the same command again finds nothing to do. Both sides are read and their digests
    compared (tables, kinds, records); None when they differ.
    """
    with open_source(job.src_engine, job.src_path, job.src_options) as reader:
        chosen = select_tables(reader.tables(), job.tables)
        expected = digest_store(
            reader, chosen, str(job.src_path), None, job.should_stop, sizes=job.sizes
        )
    try:
        check_built(Built.of(job, job.final, quiet=True), chosen, expected)
    except (DestinationError, SourceError):
        return None
    report = job.new_report()
    report.resumed = report.verified = report.already_complete = True
    fill_report(report, chosen, expected, job.sizes)
    return report


def check_source_unchanged(
    job: Job, reader: Reader, chosen: list[TableInfo], source_digests: dict[str, Digest]
) -> None:
    """Read the whole source again and compare with the digests the copy carried.

    A resumed copy holds tables digested by another run: a source changed meanwhile
    (even keeping its size and mtime) is caught here, never mixed into the result. The
    source is read again through this run's reader, at the snapshot this run copied
    from (a second reader of the same store is refused by some drivers: py-lmdb opens
    an environment once per process).

    Raises:
        SourceError: the source changed (exit 4).
    """
    # The whole source is read: its sizes replace those of the part this run copied.
    now = digest_store(
        reader,
        chosen,
        str(job.src_path),
        job.progress,
        job.should_stop,
        job.resume_hint,
        job.sizes,
    )
    if now != source_digests:
        raise SourceError(
            f"{job.src_path}: the source changed while the conversion was interrupted",
            hint=f"start over: remove {job.partial}",
        )


@contextmanager
def discard_on_failure(job: Job, plan: ResumePlan) -> Iterator[None]:
    """Remove the ``.partial`` this run created when it fails in a way no ``--resume`` finishes.

    Kept: an interruption (a signal), a busy store, a full disk; a ``--resume`` goes on
    from the last checkpoint. Removed: a refusal of the destination's engine, a source
    found damaged mid-copy, a verification that failed; a resume would meet the same.
    A ``.partial`` an earlier run made is never removed here.
    """
    try:
        yield
    except BaseException as exc:
        if plan.created and not resumable(exc):
            with contextlib.suppress(OSError):
                remove_store(job.dst_engine, job.partial)
        raise


def resumable(exc: BaseException) -> bool:
    """Whether a ``--resume`` can finish after ``exc``."""
    if isinstance(exc, (InterruptedByUser, KeyboardInterrupt, StoreBusyError)):
        return True
    seen: BaseException | None = exc
    for _ in range(8):  # the error and what caused it (drivers wrap the OSError)
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(seen).lower()
        if "disk full" in text or "no space left" in text or "quota exceeded" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


def mark_done(mark: Path) -> None:
    """Create the finished mark, durably: every batch is written and synced."""
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    try:
        os.close(os.open(mark, flags, 0o644))
    except OSError as exc:
        # A link planted at the mark (ELOOP) or anything else there is the destination's
        # problem (exit 5), not the source's: nothing is written through it.
        raise DestinationError(
            f"{mark}: cannot create the finished mark ({exc.strerror or exc})"
        ) from exc
    fsync_tree(mark)  # the file and its directory
