"""Same-engine converts by the engine's own copy (SQLite's backup API, LMDB's compacting
copy, a RocksDB checkpoint, redb's file copy and its format upgrade).

A convert to the same engine that changes nothing but the file (no ``--tables``, no
source options, the source's metadata carried as it is) asks the engine for its own
copy of the reader's snapshot (:meth:`~statemigrate.engines.base.Engine.native_copy`)
instead of running the batch loop. The source is digested from that snapshot first
(the digests the batch loop would carry, by the same code), then the engine copies
the same snapshot into ``DST.partial`` and the finished mark is set. An engine that
opens a second reader of the same snapshot (SQLite outside WAL mode) is digested
through it while it copies on another thread; an engine whose pages a native walk
digests without the GIL (LMDB, redb) digests them during the copy and its read back,
and the walk is waited for when the two sides are compared.
Reading back, syncing and placing are the pipeline's, as for any convert. Under
``--no-verify`` the source is not digested at all: the copy is the only read.

No checkpoint is written: a ``DST.partial`` without one and without the finished mark
(a run killed during the copy) is started over by the next ``--resume``; one with the
mark is read back and kept, as after the batch loop.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor

from ..checkpoint import is_checkpoint_entry
from ..digest import Digest
from ..engines.base import META_TABLE_PREFIX, NativeCopy, Reader
from ..errors import InterruptedByUser
from ..fsutil import crash_point, fsync_tree
from ..model import TableInfo
from ..stores.walk import digest_store, digests_answered
from .job import Job
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
    source options (they change what is read), whose metadata the batch loop would
    carry unchanged; the engine may still decline this store (a SQLite file holding
    views, triggers or tables outside the layout) or the destination options (any
    but redb's file format).
    """
    if plan.start is not Start.FRESH or job.src_engine is not job.dst_engine:
        return None
    if job.tables or job.src_options:
        return None
    if not carried_as_is(source_meta, chosen):
        return None
    return job.dst_engine.native_copy(reader, job.dst_options)


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


def _source_digests(
    job: Job,
    reader: Reader,
    chosen: list[TableInfo],
    native: list[tuple[int, int, int]] | None,
    written: bool,
    phase: str = "reading the source",
) -> dict[str, Digest]:
    """The source's digests: the page walk's when it answered, else the batch loop's
    (``written``: after the copy began, whose ``DST.partial`` the next ``--resume``
    starts over)."""
    if native is not None:
        return digests_answered(chosen, native, job.progress, job.sizes)
    job.progress.phase(phase)
    try:
        return digest_store(
            reader, chosen, str(job.src_path), job.progress, job.should_stop, sizes=job.sizes
        )
    except InterruptedByUser:
        if written:
            raise InterruptedByUser("interrupted", hint=job.resume_hint) from None
        raise InterruptedByUser(_NOTHING_WRITTEN) from None


def copy_natively(
    job: Job,
    plan: ResumePlan,
    reader: Reader,
    chosen: list[TableInfo],
    copy: NativeCopy,
    later: contextlib.ExitStack,
) -> SourceDigests:
    """Digest the source, copy the same snapshot into ``DST.partial``, sync it, mark it done.

    Without verification (``verify=False``) the source is not digested at all: the copy
    is the only read, and the digests returned are none.

    ``should_stop`` is polled while the source is read (nothing is written yet) and
    once the copy is done and marked (a ``--resume`` then reads it back and keeps it).
    Where the engine gives a second reader of the same snapshot (:attr:`NativeCopy.twin`:
    SQLite outside WAL mode), the copy runs on a second thread while the source is
    digested through it, and is told to stop if that digest fails or is stopped. Where
    the engine allows (:attr:`NativeCopy.digest_alongside`), the source's pages are
    walked on a second thread from before the copy until the source's digests are
    asked for, after the copy has been read back: the copy, then its read back, run
    beside the walk. ``later`` (closed before ``reader``) waits for the walk, whatever
    ends the convert.

    Returns:
        Each table's digest, as read from the source, when called.

    Raises:
        InterruptedByUser: ``should_stop`` said so (exit 6).
    """

    def copy_alone() -> None:
        if job.should_stop():
            raise InterruptedByUser(_NOTHING_WRITTEN)
        job.progress.phase(f"copying natively ({copy.method})")
        plan.created = True
        copy.run(job.partial)
        crash_point("copied")

    if not job.verify:
        # --no-verify does no verification work: the source is not digested, the copy
        # is the engine's own, and the report carries no digests.
        copy_alone()
        digests = SourceDigests.known({})
    elif copy.digest_alongside:
        pool = ThreadPoolExecutor(max_workers=1)
        later.callback(pool.shutdown, wait=True)  # the walk ends before the reader closes
        job.progress.phase("reading the source")
        walked = pool.submit(reader.native_digests, chosen)
        copy_alone()

        def walk() -> dict[str, Digest]:
            native = walked.result()
            job.progress.phase("reading the source (beside the copy)")  # as the walk ends
            return _source_digests(job, reader, chosen, native, written=True)

        digests = SourceDigests(walk)
    elif (twin := copy.twin() if copy.twin is not None else None) is not None:
        with twin:
            pool = ThreadPoolExecutor(max_workers=1)
            later.callback(pool.shutdown, wait=True)  # the copy ends before the reader closes
            job.progress.phase("reading the source")
            if job.should_stop():
                raise InterruptedByUser(_NOTHING_WRITTEN)
            job.progress.phase(f"copying natively ({copy.method})")
            plan.created = True
            stopping = threading.Event()  # the digest failed or was stopped: so may the copy
            copying = pool.submit(copy.run, job.partial, stopping.is_set)
            beside = "reading the source (beside the copy)"
            try:
                known = _source_digests(job, twin, chosen, None, written=True, phase=beside)
            except BaseException:
                stopping.set()
                raise
        copying.result()
        crash_point("copied")
        digests = SourceDigests.known(known)
    elif copy.own_bytes is not None:
        # The copy may be the snapshot's own bytes (a checkpoint): then its read back is
        # the one walk, and the source is not walked at all; else it is, as below.
        copy_alone()
        if copy.own_bytes(job.partial):
            digests = SourceDigests.read_back()
        else:
            known = _source_digests(job, reader, chosen, None, written=True)
            digests = SourceDigests.known(known)
    else:
        known = _source_digests(job, reader, chosen, None, written=False)
        copy_alone()
        digests = SourceDigests.known(known)
    job.progress.phase("syncing")
    fsync_tree(job.partial)
    mark_done(job.done_mark)
    if job.should_stop():
        raise InterruptedByUser("interrupted after the copy", hint=job.resume_hint)
    return digests


class SourceDigests:
    """The source's digests: known, computed on first call (a walk that is still running),
    or, for a copy made of the source's own bytes, those its read back finds
    (:attr:`read_from_copy`: the verification :func:`settle` s them).

    Called, it returns them (waiting for the walk the first time, and raising its error).
    """

    def __init__(self, compute: Callable[[], dict[str, Digest]] | None) -> None:
        self._compute: Callable[[], dict[str, Digest]] | None = compute
        self._digests: dict[str, Digest] = {}
        self.read_from_copy = False

    @classmethod
    def known(cls, digests: dict[str, Digest]) -> SourceDigests:
        return cls(lambda: digests)

    @classmethod
    def read_back(cls) -> SourceDigests:
        """The digests of a copy that is the source's own bytes: its read back's."""
        made = cls(None)
        made.read_from_copy = True
        return made

    def settle(self, digests: dict[str, Digest]) -> None:
        """The copy's read back answered (:meth:`read_back`)."""
        self._digests, self.read_from_copy = digests, False

    def __call__(self) -> dict[str, Digest]:
        if self._compute is not None:
            self._digests = self._compute()
            self._compute = None
        return self._digests
