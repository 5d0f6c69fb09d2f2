"""A convert's run: one store to another engine, verified, never in place, as named steps.

:func:`statemigrate.api.convert` makes the :class:`~.job.Job` and calls :func:`run`.

Refuse what can be refused, lock the destination, plan the resume, check the source
and the destination's limits, copy batch by batch into ``DST.partial``, read it back,
sync it and rename it into place.
"""

from __future__ import annotations

import contextlib
from typing import Any

from ..checkpoint import Checkpoint, cleared
from ..digest import Digest
from ..engines.base import Reader, Writer
from ..errors import DestinationError, InterruptedByUser, SourceError
from ..fsutil import crash_point, fsync_tree, lexists, recover_placement
from ..model import META_CHECKPOINT_DONE, TableInfo, check_source_tables
from ..perms import keep_owner, no_wider_than
from ..progress import drawn, run_total, table_total
from ..stores.interrupted import refuse_interrupted
from ..stores.lockfile import writer_lock
from ..stores.opening import open_source
from .copy import carried_metadata, check_keys, copy_tables
from .destination import (
    check_destination,
    check_space,
    put_in_place,
    refuse_in_place,
    remove_store,
)
from .job import Job
from .native import SourceDigests, copy_natively, native_copy_for
from .readback import check_partial, read_partial
from .report import ConvertReport, fill_report
from .resume import (
    ResumePlan,
    Start,
    already_in_place,
    check_source_unchanged,
    discard_on_failure,
    mark_done,
    plan_resume,
    settle_finished,
)
from .sidefiles import check_built_side_files
from .source import select_tables


def run(job: Job) -> ConvertReport:
    """Run a convert job (:func:`statemigrate.api.convert`'s work), in the order above."""
    _refuse_before_locking(job)
    # Everything made from here (lock, .partial, side files) is no wider than the
    # source, nor than the store an --overwrite replaces.
    with no_wider_than(job.src_path, job.final), writer_lock(job.final):
        report = _convert_locked(job)
    report.seconds = job.seconds()
    job.progress.close()
    return report


def refuse_all_skipped(job: Job, chosen: list[TableInfo], report: ConvertReport) -> None:
    """Refuse (exit 4) a convert that would copy nothing because the reader left every
    part of the source out (``skip_foreign_tables``), unless ``allow_empty``."""
    if chosen or not report.skipped or job.allow_empty:
        return
    listed = ", ".join(skipped_text(s) for s in report.skipped)
    raise SourceError(
        f"{job.src_path}: nothing to convert: every part of the store was left out "
        f"as not in its layout ({listed})",
        hint="give the layout that describes the app's tables (`statemigrate layout init "
        "SRC` prints one), or pass --allow-empty",
    )


def skipped_text(skipped: dict[str, Any]) -> str:
    """A part the reader left out, for messages: "table 'users' (12 records)"."""
    n = skipped["records"]
    return skipped["what"] + ("" if n is None else f" ({n:,} records)")


def _refuse_before_locking(job: Job) -> None:
    """What can be refused before the lock file exists (checked again under the lock)."""
    refuse_in_place(job.src_engine, job.src_path, job.dst_engine, job.final)
    if not job.final.parent.is_dir():
        raise DestinationError(f"{job.final.parent}: no such directory")
    check_destination(job.dst_engine, job.final, overwrite=job.overwrite, resume=job.resume)


def _convert_locked(job: Job) -> ConvertReport:
    """The conversion under the destination's lock: plan, build, check, place."""
    crash_point("locked")
    done = _tidy_destination(job)
    if done is not None:
        job.progress.phase(f"nothing to do: {job.final} is already complete")
        return done
    plan = plan_resume(job)
    report = job.new_report()
    source_fp = job.source_fingerprint()
    plan.check_source(source_fp, job)
    with (
        discard_on_failure(job, plan),
        open_source(job.src_engine, job.src_path, job.src_options) as reader,
        contextlib.ExitStack() as later,  # closed first: a source walk ends before the reader
    ):
        chosen = select_tables(reader.tables(), job.tables)
        report.skipped = [{"what": w, "records": n} for w, n in reader.skipped_tables()]
        refuse_all_skipped(job, chosen, report)
        source_digests = _build(job, plan, reader, chosen, source_fp, later)
        report.resumed = plan.start in (Start.CONTINUE, Start.COMPLETE)
        if plan.start is Start.CONTINUE:
            # Tables done before the interruption were digested by another run: the
            # source is read again, --no-verify or not, so that a source changed
            # meanwhile is caught, never mixed.
            job.progress.phase("reading the source again")
            check_source_unchanged(job, reader, chosen, source_digests())
        report.verified = _verify_built(job, plan, chosen, source_digests)
        digests = source_digests()
        crash_point("verified")
        check_built_side_files(job.dst_engine, job.partial)
    _place(job)
    fill_report(report, chosen, digests, job.sizes)
    return report


def _tidy_destination(job: Job) -> ConvertReport | None:
    """Finish or clear what a killed run left beside the destination; check it again.

    Returns:
        The report when ``--resume`` finds the destination already in place and equal
        to the source (nothing to do), else None.
    """
    recover_placement(job.final)
    if not lexists(job.partial):
        # Side files and finished mark of a .partial already renamed into place (a
        # run killed right after the rename): nothing can use them any more.
        remove_store(job.dst_engine, job.partial)
    existing = check_destination(
        job.dst_engine, job.final, overwrite=job.overwrite, resume=job.resume
    )
    if existing and job.resume and not lexists(job.partial):
        done = already_in_place(job)
        if done is not None:
            return done
        if not job.overwrite:
            raise DestinationError(
                f"{job.final}: already exists", hint="pass --overwrite to replace it"
            )
    return None


def _build(
    job: Job,
    plan: ResumePlan,
    reader: Reader,
    chosen: list[TableInfo],
    source_fp: dict[str, Any],
    later: contextlib.ExitStack,
) -> SourceDigests:
    """Bring ``DST.partial`` to the whole source, written and synced; the source's digests
    (the engine's own copy may still be digesting the source: see :func:`copy_natively`)."""
    source_meta = reader.metadata()
    refuse_interrupted(job.src_path, source_meta)  # a half-switched upgrade is no source
    kept = settle_finished(plan, job, reader, chosen)
    native = native_copy_for(job, plan, reader, chosen, source_meta)
    _expect(job, plan, reader, chosen, one_walk=native is not None and native.own_bytes is not None)
    if plan.start is Start.FRESH:
        # A store of the same engine holds only keys that engine can hold.
        _check_before_writing(job, reader, chosen, source_meta, own_copy=native is not None)
    if native is not None:
        digests = copy_natively(job, plan, reader, chosen, native, later)
    elif kept is not None:
        job.progress.phase("converting")
        digests = SourceDigests.known(kept)
    else:
        job.progress.phase("converting")
        writer = _open_writer(job, plan, chosen, source_meta, source_fp)
        digests = SourceDigests.known(_copy_and_finish(job, plan, reader, writer, chosen))
        mark_done(job.done_mark)
    crash_point("finished")
    return digests


def _expect(
    job: Job, plan: ResumePlan, reader: Reader, chosen: list[TableInfo], one_walk: bool = False
) -> None:
    """Tell the progress the run's total: the copy, the whole source read again on a
    resume, the read-back (``one_walk``: a copy of the source's own bytes, whose read
    back is the only walk); a resume starts from what its checkpoint holds."""
    if plan.start is Start.COMPLETE or not drawn(job.progress):
        return
    passes = 1 + (plan.start is Start.CONTINUE) + job.verify - (one_walk and job.verify)
    done: dict[str, int] = {}
    cp = plan.checkpoint
    if plan.start is Start.CONTINUE and cp is not None:
        names = {t.name for t in chosen}
        done = {name: d.count for name, d in cp.done.items() if name in names}
        if cp.table in names and cp.table not in done:
            done[cp.table] = cp.so_far.count
    counts = (table_total(job.progress, reader, t) for t in chosen)
    job.progress.expect(run_total(counts, passes), done)


def _check_before_writing(
    job: Job,
    reader: Reader,
    chosen: list[TableInfo],
    source_meta: dict[str, bytes],
    own_copy: bool = False,
) -> None:
    """Refuse, before anything is created, a source or destination that cannot be copied.

    Reserved table names in the source (exit 4); tables, table facts, free space and
    keys the destination cannot hold (exit 5). The engine's own copy (``own_copy``) writes the
    tables as its source stored them: their names are checked, their keys are not.
    """
    check_source_tables(chosen, source_meta, str(job.src_path))
    if own_copy:
        job.dst_engine.check_own_copy(chosen, job.dst_options)
    else:
        job.dst_engine.check_tables(chosen, job.dst_options)
    job.dst_engine.check_facts_kept(chosen, job.dst_options)
    check_space(job.dst_engine, job.src_path, job.final.parent, job.force)
    if not own_copy:
        job.progress.phase("checking keys")
        check_keys(job.dst_engine, reader, chosen)


def _open_writer(
    job: Job,
    plan: ResumePlan,
    chosen: list[TableInfo],
    source_meta: dict[str, bytes],
    source_fp: dict[str, Any],
) -> Writer:
    """Create ``DST.partial`` with the source's metadata (FRESH), or open it (CONTINUE)."""
    if plan.start is Start.CONTINUE:
        return job.dst_engine.open_for_writing(job.partial, job.dst_options)
    if job.should_stop():  # from here a signal lets the batch in flight finish
        raise InterruptedByUser("interrupted before anything was written")
    plan.checkpoint = Checkpoint(source_fp)
    plan.created = True
    writer = job.dst_engine.open_for_writing(job.partial, job.dst_options, create=True)
    writer.put_metadata(carried_metadata(source_meta, chosen, plan.checkpoint))
    crash_point("created")
    return writer


def _copy_and_finish(
    job: Job, plan: ResumePlan, reader: Reader, writer: Writer, chosen: list[TableInfo]
) -> dict[str, Digest]:
    """Copy every table from the checkpoint on, drop the checkpoint, make it durable."""
    assert plan.checkpoint is not None
    try:
        digests = copy_tables(job, reader, writer, chosen, plan.checkpoint)
        writer.put_metadata(cleared(META_CHECKPOINT_DONE + name for name in plan.checkpoint.done))
        crash_point("copied")
        job.progress.phase("syncing")
        writer.finish()
    except BaseException:
        # The first error is the one to report (a full disk, a signal): a store that
        # then also fails to close must not hide it.
        with contextlib.suppress(Exception):
            writer.close()
        raise
    writer.close()
    return digests


def _verify_built(
    job: Job, plan: ResumePlan, chosen: list[TableInfo], digests: SourceDigests
) -> bool:
    """Read the built store back unless told not to; whether it was verified.

    The source's ``digests`` are asked for once the built store has been read.
    """
    if plan.start is Start.COMPLETE:
        return True  # read back equal to the source by settle_finished
    if not job.verify:
        return False
    job.progress.phase("verifying")
    if digests.read_from_copy:  # the copy is the source's own bytes: one walk, this one
        digests.settle(read_partial(job, chosen))
    else:
        check_partial(job, chosen, digests)
    return True


def _place(job: Job) -> None:
    """Sync the built store and rename it into place."""
    keep_owner(job.partial, job.final)
    fsync_tree(job.partial)
    crash_point("synced")
    job.progress.phase("renaming into place")
    put_in_place(job.dst_engine, job.partial, job.final)


__all__ = ["run"]
