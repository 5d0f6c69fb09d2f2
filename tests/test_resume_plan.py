"""The resume plan: what an earlier run left at DST.partial decides where a convert starts.

Real stores of every engine stand for what an interrupted run leaves: a ``.partial``
with a checkpoint, one without (killed while creating it), one beside the finished mark.
"""

from __future__ import annotations

import errno
from pathlib import Path

import pytest

from statemigrate.checkpoint import Checkpoint
from statemigrate.engines.base import META_CHECKPOINT, Engine
from statemigrate.errors import DestinationError, InterruptedByUser, SourceError, StoreBusyError
from statemigrate.pipeline.job import Job
from statemigrate.pipeline.resume import ResumePlan, Start, plan_resume, resumable
from statemigrate.progress import Progress
from statemigrate.registry import get_engine


def _job(engine: type[Engine], tmp_path: Path, *, resume: bool = True) -> Job:
    suffix = engine.suffixes[0] if engine.suffixes else ""
    return Job(
        src_engine=get_engine("sqlite"),
        src_path=tmp_path / "src.sqlite",
        src_options=None,
        dst_engine=engine,
        final=tmp_path / f"dst{suffix}",
        dst_options=None,
        tables=None,
        batch_records=10,
        batch_bytes=1 << 20,
        overwrite=False,
        verify=True,
        resume=resume,
        force=False,
        progress=Progress(),
        should_stop=lambda: False,
    )


def _leave_partial(job: Job, checkpoint: Checkpoint | None) -> None:
    """A ``.partial`` as a run leaves it: stopped with its checkpoint committed (closed
    unfinished, as convert closes it on a stop), or finished without one."""
    writer = job.dst_engine.create_writer(job.partial)
    try:
        if checkpoint is not None:
            writer.put_metadata({META_CHECKPOINT: checkpoint.to_bytes()})
        else:
            writer.finish()
    finally:
        writer.close()


def test_nothing_left_starts_fresh_and_drops_a_stale_finished_mark(
    engine: type[Engine], tmp_path: Path
) -> None:
    job = _job(engine, tmp_path)
    job.done_mark.write_bytes(b"")
    plan = plan_resume(job)
    assert plan.start is Start.FRESH and plan.checkpoint is None and not plan.created
    assert not job.done_mark.exists()


def test_a_partial_without_resume_is_refused_and_kept(engine: type[Engine], tmp_path: Path) -> None:
    job = _job(engine, tmp_path, resume=False)
    _leave_partial(job, Checkpoint({"engine": "sqlite"}))
    with pytest.raises(DestinationError, match="an interrupted conversion left this behind"):
        plan_resume(job)
    assert engine.store_paths(job.partial)


def test_a_checkpoint_continues_after_its_last_key(engine: type[Engine], tmp_path: Path) -> None:
    job = _job(engine, tmp_path)
    left = Checkpoint({"engine": "sqlite", "files": {}}, table="t", last_key=b"k7")
    _leave_partial(job, left)
    job.done_mark.write_bytes(b"")  # a mark beside a checkpoint is stale
    plan = plan_resume(job)
    assert plan.start is Start.CONTINUE
    assert plan.checkpoint is not None and plan.checkpoint.to_bytes() == left.to_bytes()
    assert not job.done_mark.exists() and engine.store_paths(job.partial)


def test_no_checkpoint_and_no_finished_mark_starts_over(
    engine: type[Engine], tmp_path: Path
) -> None:
    job = _job(engine, tmp_path)
    _leave_partial(job, None)
    plan = plan_resume(job)
    assert plan.start is Start.FRESH
    assert not engine.store_paths(job.partial)


def test_the_finished_mark_without_checkpoint_is_checked_not_removed(
    engine: type[Engine], tmp_path: Path
) -> None:
    job = _job(engine, tmp_path)
    _leave_partial(job, None)
    job.done_mark.write_bytes(b"")
    plan = plan_resume(job)
    assert plan.start is Start.FINISHED
    assert job.done_mark.exists() and engine.store_paths(job.partial)


def test_a_checkpoint_of_another_source_is_refused(tmp_path: Path) -> None:
    job = _job(get_engine("sqlite"), tmp_path)
    plan = ResumePlan(Start.CONTINUE, Checkpoint({"engine": "sqlite", "files": {"a": [1, 2]}}))
    with pytest.raises(SourceError, match="the source changed since the interrupted conversion"):
        plan.check_source({"engine": "sqlite", "files": {"a": [1, 3]}}, job)
    plan.check_source({"engine": "sqlite", "files": {"a": [1, 2]}}, job)  # the same: no error


def _wrapped(inner: BaseException) -> BaseException:
    """A driver's error caused by ``inner``, as drivers wrap the OSError."""
    try:
        try:
            raise inner
        except BaseException as exc:
            raise RuntimeError("the driver failed") from exc
    except RuntimeError as outer:
        return outer


@pytest.mark.parametrize(
    ("exc", "expected"),
    [
        (InterruptedByUser("stop"), True),
        (KeyboardInterrupt(), True),
        (StoreBusyError("busy"), True),
        (OSError(errno.ENOSPC, "No space left on device"), True),
        (_wrapped(OSError(errno.EDQUOT, "Disk quota exceeded")), True),
        (RuntimeError("database or disk full"), True),
        (DestinationError("the engine cannot hold this table"), False),
        (SourceError("damaged block"), False),
        (_wrapped(ValueError("bad record")), False),
    ],
)
def test_only_a_stop_a_busy_store_or_a_full_disk_is_resumable(
    exc: BaseException, expected: bool
) -> None:
    assert resumable(exc) is expected
