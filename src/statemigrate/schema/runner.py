"""The verbs that change a store: upgrade, downgrade, stamp, finish_interrupted.

``current``, ``check``, ``history`` and ``revision`` change no store: they are
:mod:`.queries`', importable from here too.

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

from ..engines.base import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_RECORDS,
    META_REVISION,
    Engine,
    Reader,
    Writer,
)
from ..errors import StateMigrateError
from ..model import TableInfo
from ..progress import Progress, ProgressLike, as_progress
from ..registry import StorePath
from ..stores.walk import store_digest_of
from . import op as op_module
from .backup import write_backup
from .errors import RevisionFailedError, RevisionUnknownError, with_adoption_hint
from .first_install import is_vacant, make_store
from .heads import already_at_head
from .journal import (
    META_CHECKSUMS,
    crash_point,
    needs_recovery,
    recover,
)
from .queries import check, current, history, revision
from .recorder import Recorder
from .reports import CurrentReport, UpgradeReport
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


def _dry_run_of_a_new_store(
    store: str, engine: str | None, schema: Schema, target: str, started: float
) -> UpgradeReport:
    eng, path = new_store_engine(store, engine)
    report = UpgradeReport(str(path), eng.name, str(schema.dir), dry_run=True, status="dry_run")
    steps = schema.steps([], target, True)
    report.to_revisions = steps[-1].heads_after if steps else []
    _record_steps(eng, steps, [], report)
    report.seconds = time.monotonic() - started
    return report


def _check_known(schema: Schema, path: Path, current: list[str]) -> None:
    unknown = [r for r in current if not schema.knows(r)]
    if unknown:
        raise RevisionUnknownError(
            f"{path}: the store is at revision {', '.join(unknown)}, which the schema in {schema.dir} "
            "does not know (a newer version of the app wrote it); nothing was changed",
            hint="run the newer app's schema (its downgrade) first, or restore a backup",
        )


def _recover(
    eng: type[Engine], writer: Writer, path: Path, batch_records: int, batch_bytes: int
) -> str | None:
    remove_leftovers(path)
    with atomic(eng, writer):
        return recover(writer, eng.capabilities.rename_table, batch_records, batch_bytes)


def _digest_reader(reader: Reader) -> str:
    return store_digest_of(reader.tables(), reader.read_batches, str(reader.path))


def _migrate(
    store: StorePath,
    schema_dir: str | os.PathLike[str],
    target: str,
    up: bool,
    *,
    engine: str | None,
    dry_run: bool,
    backup: str | os.PathLike[str] | None,
    digests: bool,
    batch_records: int,
    batch_bytes: int,
    create: bool = False,
    progress: ProgressLike | None = None,
    options: Mapping[str, Any] | None = None,
) -> UpgradeReport:
    started = time.monotonic()
    progress = as_progress(progress) or Progress()
    created = False
    store = os.fspath(store)
    vacant = create and is_vacant(store, engine)  # nothing there, or an empty directory
    at_head_asked = up and not dry_run and target in ("head", "heads")
    if at_head_asked and not vacant and not is_missing(store, engine):
        at_head = already_at_head(store, engine, schema_dir, options)  # Alembic not loaded
        if at_head is not None:
            at_head.seconds = time.monotonic() - started
            return at_head
    if vacant:
        schema = Schema(schema_dir)  # a broken schema is refused before anything exists
        if dry_run:
            return _dry_run_of_a_new_store(store, engine, schema, target, started)
        new_eng, new_path = new_store_engine(store, engine)
        created = make_store(new_eng, new_path, options)
        store, engine = str(new_path), new_eng.name
    eng, path = in_place_engine(store, engine, CREATE_HINT if up else MISSING_HINT)
    schema = Schema(schema_dir)
    report = UpgradeReport(str(path), eng.name, str(schema.dir), dry_run=dry_run, created=created)
    meta, tables, reader = peek(eng, path, options)
    with reader:
        raw = meta.get(META_REVISION)
        current = sorted(json.loads(raw)) if raw else []
        _check_known(schema, path, current)
        report.from_revisions = list(current)
        steps = schema.steps(current, target, up)
        report.to_revisions = steps[-1].heads_after if steps else list(current)
        pending = needs_recovery(meta)
        if dry_run or not (steps or pending):
            if pending:
                report.recovered = "an interrupted revision would be finished or rolled back first"
            _record_steps(eng, steps, tables, report)
            # At the target: the stamp answers; no digest (the store is not read).
            report.status = "dry_run" if dry_run else "up_to_date"
            report.seconds = time.monotonic() - started
            return report
    with open_writer(eng, path, options) as writer:
        report.recovered = _recover(eng, writer, path, batch_records, batch_bytes)
        current = stamped_revisions(eng, path, writer.metadata(), options)
        _check_known(schema, path, current)
        report.from_revisions = list(current)
        steps = schema.steps(current, target, up)
        report.to_revisions = steps[-1].heads_after if steps else list(current)
        counts: dict[str, int] = {}  # tables' record counts, progress totals
        if digests:
            progress.phase("digesting the store before")
            report.digest_before = digest_writer(writer, progress, counts)
        if not steps:
            report.status = "up_to_date"
            report.digest_after = report.digest_before
            writer.finish()
            report.seconds = time.monotonic() - started
            return report
        if backup is not None and not created:  # nothing was there to back up
            progress.phase(f"writing the backup {backup}")
            report.backup = str(write_backup(eng, writer, Path(backup)))
        checksums = json.loads(writer.metadata().get(META_CHECKSUMS) or b"{}")
        counter = [0]
        for i, step in enumerate(steps, 1):
            t0 = time.monotonic()
            progress.phase(
                f"revision {step.revision} ({i} of {len(steps)}, {step.direction}): {step.doc}"
            )
            try:
                log = _run_step(
                    eng,
                    writer,
                    path,
                    schema,
                    step,
                    checksums,
                    counter,
                    batch_records,
                    batch_bytes,
                    progress,
                    counts,
                )
            except RevisionFailedError as exc:
                with_adoption_hint(exc, current, tables, path, schema.dir)
                raise
            report.revisions.append(_step_json(step, time.monotonic() - t0, log))
            crash_point(f"{step.revision} done")
        progress.phase("syncing")
        writer.finish()
        if digests:
            progress.phase("digesting the store after")
            report.digest_after = digest_writer(writer, progress, counts)
    progress.close()
    report.status = "upgraded" if up else "downgraded"
    report.seconds = time.monotonic() - started
    return report


def _step_json(step: Step, seconds: float, log: list[str]) -> dict[str, Any]:
    return {
        "revision": step.revision,
        "direction": step.direction,
        "message": step.doc,
        "seconds": round(seconds, 3),
        "operations": log,
    }


def _run_step(
    eng: type[Engine],
    writer: Writer,
    path: Path,
    schema: Schema,
    step: Step,
    checksums: dict[str, str],
    counter: list[int],
    batch_records: int,
    batch_bytes: int,
    progress: Progress,
    counts: dict[str, int] | None = None,
) -> list[str]:
    """One revision and its stamp, atomically; on failure the store stays at the revision before."""
    try:
        with atomic(eng, writer):
            staging = Staging(
                eng,
                writer,
                path,
                step.revision,
                batch_records,
                batch_bytes,
                counter,
                to=step.heads_after,
                direction=step.direction,
                progress=progress,
                counts=counts,
            )
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
            _recover(eng, writer, path, batch_records, batch_bytes)
        raise
    return staging.log


def upgrade(
    store: StorePath,
    schema: str | os.PathLike[str],
    *,
    to: str = "head",
    engine: str | None = None,
    dry_run: bool = False,
    backup: str | os.PathLike[str] | None = None,
    digests: bool = True,
    batch_records: int = DEFAULT_BATCH_RECORDS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    create: bool = False,
    progress: ProgressLike | None = None,
    options: Mapping[str, Any] | None = None,
) -> UpgradeReport:
    """Bring a store to a revision of its schema, in place, one atomic revision at a time.

    Args:
        store: a path or ``ENGINE:PATH``.
        schema: the schema directory (an Alembic script directory).
        to: the target: ``head`` (default), ``heads``, a revision id, ``+N``.
        engine: the engine, when not detected.
        dry_run: only list the revisions and operations that would run.
        backup: first write an engine-native backup of the store there.
        digests: compute the store digest before and after (for the report).
        batch_records: records per batch at most.
        batch_bytes: payload bytes per batch at most.
        create: make the store first when nothing is at the path, or an empty directory
            where a directory engine's store goes (a first install); its engine is named
            (``ENGINE:PATH``, ``engine``) or told by the path's suffix. A store made so is
            not backed up (``backup``: nothing was there).
        progress: receives the phases (each revision, the digests) and a table's
            records as each operation writes them.
        options: the engine's options for the store (a layout file: ``layout``).

    Returns:
        An :class:`UpgradeReport` (status ``up_to_date`` when nothing was to do;
        ``created`` when ``create`` made the store).

    Raises:
        StoreMissingError: nothing is at the path and ``create`` is not set (exit 4).
        StoreBusyError: another process holds the store (exit 3).
        RevisionUnknownError: the store's revision is unknown to the schema (exit 1).
        RevisionFailedError: a revision failed; the store is at the revision before it.
    """
    return _migrate(
        store,
        schema,
        to,
        True,
        engine=engine,
        dry_run=dry_run,
        backup=backup,
        digests=digests,
        batch_records=batch_records,
        batch_bytes=batch_bytes,
        create=create,
        progress=progress,
        options=options,
    )


def downgrade(
    store: StorePath,
    schema: str | os.PathLike[str],
    *,
    to: str,
    engine: str | None = None,
    dry_run: bool = False,
    backup: str | os.PathLike[str] | None = None,
    digests: bool = True,
    batch_records: int = DEFAULT_BATCH_RECORDS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    progress: ProgressLike | None = None,
    options: Mapping[str, Any] | None = None,
) -> UpgradeReport:
    """Take a store back to an earlier revision through the revisions' downgrades.

    Args:
        store: a path or ``ENGINE:PATH``.
        schema: the schema directory.
        to: the target: ``base``, a revision id, ``-N``.
        engine: the engine, when not detected.
        dry_run: only list the revisions and operations that would run.
        backup: first write an engine-native backup of the store there.
        digests: compute the store digest before and after (for the report).
        batch_records: records per batch at most.
        batch_bytes: payload bytes per batch at most.
        progress: as :func:`upgrade`.
        options: as :func:`upgrade`.

    Returns:
        An :class:`UpgradeReport` (status ``downgraded``, or ``up_to_date``).

    Raises:
        StateMigrateError: as :func:`upgrade`.
    """
    return _migrate(
        store,
        schema,
        to,
        False,
        engine=engine,
        dry_run=dry_run,
        backup=backup,
        digests=digests,
        batch_records=batch_records,
        batch_bytes=batch_bytes,
        progress=progress,
        options=options,
    )


def stamp(
    store: StorePath,
    schema: str | os.PathLike[str],
    revision: str,
    *,
    engine: str | None = None,
    dry_run: bool = False,
    options: Mapping[str, Any] | None = None,
) -> UpgradeReport:
    """Set the store's revision without running anything (Alembic's ``stamp``).

    The checksums of the stamped revisions and their ancestors are recorded as applied.

    Args:
        store: a path or ``ENGINE:PATH``.
        schema: the schema directory.
        revision: a revision id, ``head`` or ``base``.
        engine: the engine, when not detected.
        dry_run: say what the stamp would be; change nothing.
        options: the engine's options for the store (a layout file: ``layout``).

    Returns:
        An :class:`UpgradeReport` (status ``stamped``, or ``dry_run``).

    Raises:
        StateMigrateError: the store is missing (exit 4), busy (exit 3), or the
            revision is not the schema's (exit 2).
    """
    started = time.monotonic()
    eng, path = in_place_engine(store, engine)
    sch = Schema(schema)
    report = UpgradeReport(str(path), eng.name, str(sch.dir), dry_run=dry_run)
    with open_writer(eng, path, options) as writer:
        if not dry_run:
            report.recovered = _recover(
                eng, writer, path, DEFAULT_BATCH_RECORDS, DEFAULT_BATCH_BYTES
            )
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


def finish_interrupted(
    store: StorePath, *, engine: str | None = None, options: Mapping[str, Any] | None = None
) -> str | None:
    """Finish (or roll back) an interrupted upgrade, and nothing else; no schema needed.

    ``upgrade`` and ``downgrade`` do this first on their own; this is for a caller
    that wants the store whole at its stamped revision without moving it.

    Args:
        store: a path or ``ENGINE:PATH``.
        engine: the engine, when not detected.
        options: the engine's options for the store (a layout file: ``layout``).

    Returns:
        What was done, or None when no upgrade was unfinished (nothing is written then;
        a sort directory that a re-key killed inside its transaction left beside the
        store is removed, under the store's lock).

    Raises:
        StoreBusyError: another process holds the store (exit 3).
    """
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
        done = _recover(eng, writer, path, DEFAULT_BATCH_RECORDS, DEFAULT_BATCH_BYTES)
        writer.finish()
    return done


__all__ = [
    "CurrentReport",
    "UpgradeReport",
    "check",
    "current",
    "digest_writer",
    "downgrade",
    "finish_interrupted",
    "history",
    "revision",
    "stamp",
    "upgrade",
]
