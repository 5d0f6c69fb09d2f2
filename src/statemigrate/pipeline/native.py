"""Same-engine converts by the engine's own copy (SQLite's backup API, LMDB's compacting copy).

A convert to the same engine that changes nothing but the file (no ``--tables``, no
engine options, the source's metadata carried as it is) asks the engine for its own
copy of the reader's snapshot (:meth:`~statemigrate.engines.base.Engine.native_copy`)
instead of running the batch loop. The engine copies the reader's snapshot into
``DST.partial``, which is synced, marked finished and read back, while a second thread
digests the source from the same snapshot (the digests the batch loop would carry, by
the same code). Placing is the pipeline's, as for any convert.

No checkpoint is written: a ``DST.partial`` without one and without the finished mark
(a run killed during the copy) is started over by the next ``--resume``; one with the
mark is read back and kept, as after the batch loop.
"""

from __future__ import annotations

import threading

from ..checkpoint import is_checkpoint_entry
from ..digest import Digest
from ..engines.base import META_TABLE_PREFIX, NativeCopy, Reader
from ..errors import InterruptedByUser
from ..fsutil import crash_point, fsync_tree
from ..model import TableInfo
from .copy import digest_store
from .job import Job
from .readback import built_does_not_read_back, compare_built, read_built
from .resume import ResumePlan, Start, mark_done

_NOTHING_WRITTEN = "interrupted before anything was written"


def native_copy_for(
    job: Job,
    plan: ResumePlan,
    reader: Reader,
    chosen: list[TableInfo],
    source_meta: dict[str, bytes],
) -> NativeCopy | None:
    """The engine's own copy when this convert may use it, else None (the batch loop runs).

    Only a fresh start of a convert to the same engine with no ``--tables`` and no
    engine options (either side: they change what is read or how it is written), whose
    metadata the batch loop would carry unchanged; the engine may still decline this
    store (a SQLite file holding views, triggers or tables outside the layout).
    """
    if plan.start is not Start.FRESH or job.src_engine is not job.dst_engine:
        return None
    if job.tables or job.src_options or job.dst_options:
        return None
    if not carried_as_is(source_meta, chosen):
        return None
    return job.dst_engine.native_copy(reader)


def carried_as_is(source_meta: dict[str, bytes], chosen: list[TableInfo]) -> bool:
    """Whether the batch loop would give the destination the source's metadata unchanged.

    It leaves out a conversion checkpoint the source carries (a copy of the file would
    carry it into ``DST.partial``, where the next ``--resume`` would take it for this
    run's) and per-table entries (``table:<name>``) of tables the source does not hold.
    """
    kept = {META_TABLE_PREFIX + t.name for t in chosen if t.meta}
    return not any(
        is_checkpoint_entry(key) or (key.startswith(META_TABLE_PREFIX) and key not in kept)
        for key in source_meta
    )


def copy_natively(
    job: Job, plan: ResumePlan, reader: Reader, chosen: list[TableInfo], copy: NativeCopy
) -> dict[str, Digest]:
    """Copy the reader's snapshot into ``DST.partial``, sync it, mark it done; digest.

    The source is digested from the same snapshot on a second thread: beside the copy
    where the driver allows it (``NativeCopy.reads_beside``), else from the copy's end,
    and (verified, the default) beside the copy's read-back on this thread
    (``plan.read_back``).
    ``should_stop`` is polled before the copy (nothing is written yet), once it is done
    and marked, and between the batches of both reads (a ``--resume`` then reads the
    marked copy back and keeps it).

    Returns:
        Each table's digest, as read from the source.

    Raises:
        InterruptedByUser: ``should_stop`` said so (exit 6).
        SourceError: the source does not read whole (exit 4), whatever the copy did.
        DestinationError: the copy does not read back equal to the source (exit 5).
    """
    if job.should_stop():
        raise InterruptedByUser(_NOTHING_WRITTEN)
    job.progress.phase(f"copying natively ({copy.method})")
    source = _SourceDigest(job, reader, chosen)
    if copy.reads_beside:
        source.start()
    got: dict[str, Digest] | None = None
    try:
        plan.created = True
        copy.run(job.partial)
        crash_point("copied")
        source.start()  # the driver's copy is done with the reader: read it beside the rest
        job.progress.phase("syncing")
        fsync_tree(job.partial)
        mark_done(job.done_mark)
        if job.should_stop():
            raise InterruptedByUser("interrupted after the copy", hint=job.resume_hint)
        if job.verify:
            job.progress.phase("verifying")
            with built_does_not_read_back():
                got = read_built(
                    job.dst_engine,
                    job.partial,
                    chosen,
                    job.progress,
                    job.should_stop,
                    job.resume_hint,
                    job.dst_engine.options.for_reading_back(job.dst_options),
                )
    except BaseException:
        source.stop()
        source.raise_failure()  # a source that does not read is the cause
        raise
    digests = source.result()
    if got is not None:
        compare_built(job.partial, chosen, digests, got)
        plan.read_back = True
    return digests


class _SourceDigest:
    """The source's digests, read on a second thread from the reader's snapshot."""

    def __init__(self, job: Job, reader: Reader, chosen: list[TableInfo]) -> None:
        self._stopped = threading.Event()
        self._digests: dict[str, Digest] = {}
        self._failure: BaseException | None = None

        def should_stop() -> bool:
            return self._stopped.is_set() or job.should_stop()

        def run() -> None:
            try:
                self._digests = digest_store(
                    reader, chosen, str(job.src_path), None, should_stop, job.resume_hint, job.sizes
                )
            except BaseException as exc:  # noqa: BLE001 - handed to the caller's thread
                self._failure = exc

        self._thread = threading.Thread(target=run, name="statemigrate-source-digest", daemon=True)
        self._started = False

    def start(self) -> None:
        """Start the read (once)."""
        if not self._started:
            self._started = True
            self._thread.start()

    def stop(self) -> None:
        """Ask the read to end after its batch in flight, and wait for it."""
        self._stopped.set()
        if self._started:
            self._thread.join()

    def raise_failure(self) -> None:
        """Raise the read's own failure, if it had one (not the stop this side asked for)."""
        if self._failure is not None and not (
            isinstance(self._failure, InterruptedByUser) and self._stopped.is_set()
        ):
            raise self._failure

    def result(self) -> dict[str, Digest]:
        """The digests, once the read ended; its failure raised."""
        self.start()
        self._thread.join()
        self.raise_failure()
        return self._digests
