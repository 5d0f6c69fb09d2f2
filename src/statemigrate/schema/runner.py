"""Running the verbs that change a store: upgrade, downgrade, stamp, finish_interrupted.

The verbs themselves, with their arguments and docstrings, are
:mod:`statemigrate.api`'s; they call :func:`migrate` with an :class:`~.job.UpgradeJob`,
:func:`stamp_store` and :func:`finish`.

Order of an upgrade (the installer contract): take the store's lock (busy: exit 3),
read its stamp (a revision the schema does not know: exit 1, nothing changed),
finish or roll back what an interrupted run left, back up if asked, then run each
revision atomically with its stamp (see :mod:`.journal`).
"""

from __future__ import annotations

import contextlib
import json
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..digest import store_digest
from ..engines.base import META_REVISION, Engine
from ..errors import StateMigrateError
from ..model import TableInfo
from ..registry import StorePath
from . import op as op_module
from .backup import write_backup
from .errors import RevisionFailedError, RevisionUnknownError, with_adoption_hint
from .first_install import is_vacant, make_store
from .heads import already_at_head
from .job import RevisionRun, UpgradeJob
from .journal import (
    META_CHECKSUMS,
    crash_point,
    needs_recovery,
    recover,
)
from .recorder import Recorder
from .reports import UpgradeReport
from .scripts import Schema, Step
from .sort import leftovers, remove_leftovers
from .staging import Staging
from .store import (
    CREATE_HINT,
    FULL_DISK_ERRNOS,
    MISSING_HINT,
    atomic,
    digest_writer,
    in_place_engine,
    is_missing,
    new_store_engine,
    open_writer,
    peek,
    stamped_revisions,
)


def _record_steps(
    eng: type[Engine], steps: list[Step], tables: list[TableInfo], report: UpgradeReport
) -> None:
    """What each step would do (``--dry-run``), recorded without touching the store."""
    for step in steps:
        rec = Recorder(eng, step.revision, tables)
        with op_module.bind(rec):
            step.fn()
        report.revisions.append(_step_json(step, 0.0, rec.log))


def _dry_run_of_a_new_store(job: UpgradeJob, schema: Schema) -> UpgradeReport:
    eng, path = new_store_engine(job.store, job.engine)
    report = UpgradeReport(str(path), eng.name, str(schema.dir), dry_run=True, status="dry_run")
    steps = schema.steps([], job.target, True)
    report.to_revisions = steps[-1].heads_after if steps else []
    _record_steps(eng, steps, [], report)
    report.seconds = job.seconds()
    return report


def _check_known(schema: Schema, path: Path, current: list[str]) -> None:
    unknown = [r for r in current if not schema.knows(r)]
    if unknown:
        raise RevisionUnknownError(
            f"{path}: the store is at revision {', '.join(unknown)}, which the schema in {schema.dir} "
            "does not know (a newer version of the app wrote it); nothing was changed",
            hint="run the newer app's schema (its downgrade) first, or restore a backup",
        )


def _recover(run: RevisionRun) -> str | None:
    remove_leftovers(run.path)
    with atomic(run.engine, run.writer):
        return recover(
            run.writer, run.engine.capabilities.rename_table, run.batch_records, run.batch_bytes
        )


def migrate(job: UpgradeJob) -> UpgradeReport:
    """Run an upgrade or downgrade job (:func:`statemigrate.api.upgrade`'s work)."""
    progress = job.progress
    created = False
    vacant = job.create and is_vacant(job.store, job.engine)  # nothing there, or empty
    if job.at_head_asked and not vacant and not is_missing(job.store, job.engine):
        # Answered from the stamp and the revision files' literals: Alembic not loaded.
        at_head = already_at_head(job.store, job.engine, job.schema_dir, job.options)
        if at_head is not None:
            at_head.seconds = job.seconds()
            return at_head
    if vacant:
        schema = Schema(job.schema_dir)  # a broken schema is refused before anything exists
        if job.dry_run:
            return _dry_run_of_a_new_store(job, schema)
        new_eng, new_path = new_store_engine(job.store, job.engine)
        created = make_store(new_eng, new_path, job.options)
        job.store, job.engine = str(new_path), new_eng.name
    eng, path = in_place_engine(job.store, job.engine, CREATE_HINT if job.up else MISSING_HINT)
    schema = Schema(job.schema_dir)
    report = UpgradeReport(
        str(path), eng.name, str(schema.dir), dry_run=job.dry_run, created=created
    )
    meta, tables, reader = peek(eng, path, job.options)
    with reader:
        raw = meta.get(META_REVISION)
        current = sorted(json.loads(raw)) if raw else []
        _check_known(schema, path, current)
        report.from_revisions = list(current)
        steps = schema.steps(current, job.target, job.up)
        report.to_revisions = steps[-1].heads_after if steps else list(current)
        pending = needs_recovery(meta)
        if job.dry_run or not (steps or pending):
            if pending:
                report.recovered = "an interrupted revision would be finished or rolled back first"
            _record_steps(eng, steps, tables, report)
            # At the target: the stamp answers; no digest (the store is not read).
            report.status = "dry_run" if job.dry_run else "up_to_date"
            report.seconds = job.seconds()
            return report
    with open_writer(eng, path, job.options) as writer:
        run = RevisionRun(eng, writer, path, job.batch_records, job.batch_bytes, progress)
        report.recovered = _recover(run)
        current = stamped_revisions(eng, path, writer.metadata(), job.options)
        _check_known(schema, path, current)
        report.from_revisions = list(current)
        steps = schema.steps(current, job.target, job.up)
        report.to_revisions = steps[-1].heads_after if steps else list(current)
        if job.digests:
            progress.phase("digesting the store before")
            run.digests = {}  # each table's, carried over every commit (Staging)
            report.digest_before = digest_writer(writer, progress, run.counts, run.digests)
        if not steps:
            report.status = "up_to_date"
            report.digest_after = report.digest_before
            writer.finish()
            report.seconds = job.seconds()
            return report
        if job.backup is not None and not created:  # nothing was there to back up
            progress.phase(f"writing the backup {job.backup}")
            report.backup = str(write_backup(eng, writer, job.backup))
        checksums = json.loads(writer.metadata().get(META_CHECKSUMS) or b"{}")
        for i, step in enumerate(steps, 1):
            t0 = time.monotonic()
            progress.phase(
                f"revision {step.revision} ({i} of {len(steps)}, {step.direction}): {step.doc}"
            )
            try:
                log = _run_step(run, schema, step, checksums)
            except RevisionFailedError as exc:
                with_adoption_hint(exc, current, tables, path, schema.dir)
                raise
            report.revisions.append(_step_json(step, time.monotonic() - t0, log))
            crash_point(f"{step.revision} done")
        progress.phase("syncing")
        writer.finish()
        if job.digests and run.digests is not None:
            # Untouched tables keep their digests from before; a rewritten table's is
            # the sum of the records its operation wrote: no walk of the store after.
            report.digest_after = store_digest(
                (name, kind, d) for name, (kind, d) in run.digests.items()
            )
        elif job.digests:  # op.execute changed tables in ways only a walk can tell
            progress.phase("digesting the store after")
            report.digest_after = digest_writer(writer, progress, run.counts)
    progress.close()
    report.status = "upgraded" if job.up else "downgraded"
    report.seconds = job.seconds()
    return report


def _step_json(step: Step, seconds: float, log: list[str]) -> dict[str, Any]:
    return {
        "revision": step.revision,
        "direction": step.direction,
        "message": step.doc,
        "seconds": round(seconds, 3),
        "operations": log,
    }


def _run_step(run: RevisionRun, schema: Schema, step: Step, checksums: dict[str, str]) -> list[str]:
    """One revision and its stamp, atomically; on failure the store stays at the revision before."""
    try:
        with atomic(run.engine, run.writer):
            staging = Staging(run, step.revision, to=step.heads_after, direction=step.direction)
            try:
                with op_module.bind(staging):
                    step.fn()
            except StateMigrateError:
                raise
            except Exception as exc:
                if isinstance(exc, OSError) and exc.errno in FULL_DISK_ERRNOS:
                    raise  # open_writer's full-disk refusal (exit 5): not the revision's fault
                raise RevisionFailedError(
                    f"revision {step.revision} ({step.direction}) failed: {type(exc).__name__}: {exc}",
                    hint=f"the store stays at the revision before it; fix {step.path}",
                ) from exc
            if step.upgrade:
                checksums[step.revision] = schema.checksum(step.revision)
            else:
                checksums.pop(step.revision, None)
            staging.commit(step.heads_after, dict(checksums))
    except BaseException:
        # Roll back what the failed revision built (non-transactional engines), or
        # finish a switch that was committed; never leave private tables behind.
        with contextlib.suppress(Exception):
            _recover(run)
        raise
    return staging.log


def stamp_store(
    store: StorePath,
    schema_dir: str | os.PathLike[str],
    revision: str,
    engine: str | None,
    dry_run: bool,
    options: Mapping[str, Any] | None,
) -> UpgradeReport:
    """Set the store's revision without running anything (:func:`statemigrate.api.stamp`)."""
    started = time.monotonic()
    eng, path = in_place_engine(store, engine)
    sch = Schema(schema_dir)
    report = UpgradeReport(str(path), eng.name, str(sch.dir), dry_run=dry_run)
    with open_writer(eng, path, options) as writer:
        if not dry_run:
            report.recovered = _recover(RevisionRun(eng, writer, path))
        current = stamped_revisions(eng, path, writer.metadata(), options)
        report.from_revisions = current
        known = [r for r in current if sch.knows(r)]
        heads = sch.stamp_heads(known, revision) if revision not in ("base",) else []
        report.to_revisions = heads
        checksums = {r: sch.checksum(r) for r in sch.ancestry(heads)}
        if not dry_run:
            with atomic(eng, writer):
                writer.put_metadata(
                    {
                        META_REVISION: json.dumps(heads).encode(),
                        META_CHECKSUMS: json.dumps(checksums, sort_keys=True).encode(),
                    }
                )
            writer.finish()
    report.status = "dry_run" if dry_run else "stamped"
    report.seconds = time.monotonic() - started
    return report


def finish(store: StorePath, engine: str | None, options: Mapping[str, Any] | None) -> str | None:
    """Finish or roll back an interrupted upgrade (:func:`statemigrate.api.finish_interrupted`)."""
    eng, path = in_place_engine(store, engine)
    meta, _tables, reader = peek(eng, path, options)
    reader.close()
    if not needs_recovery(meta):
        if not leftovers(path):
            return None
        # A re-key killed inside a transaction left its sort directory and nothing else.
        with open_writer(eng, path, options):
            remove_leftovers(path)
        return "removed the sort directory of an interrupted revision (the store is unchanged)"
    with open_writer(eng, path, options) as writer:
        done = _recover(RevisionRun(eng, writer, path))
        writer.finish()
    return done


__all__ = ["digest_writer", "finish", "migrate", "stamp_store"]
