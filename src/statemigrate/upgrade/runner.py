"""The verbs: upgrade, downgrade, stamp, current, check, history, revision.

Order of an upgrade (the installer contract): take the store's lock (busy: exit 3),
read its stamp (a revision the schema does not know: exit 1, nothing changed),
finish or roll back what an interrupted run left, back up if asked, then run each
revision atomically with its stamp (see :mod:`.journal`).
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ..digest import Digest, batch_digest, store_digest
from ..engines.base import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_RECORDS,
    META_REVISION,
    Engine,
    Reader,
    Writer,
)
from ..errors import DestinationError, StateMigrateError, UsageError
from ..model import TableInfo
from ..perms import no_wider_than
from ..registry import resolve_source
from . import op as op_module
from .errors import RevisionFailedError, RevisionUnknownError
from .journal import META_CHECKSUMS, crash_point, needs_recovery, recover
from .scripts import Schema, Step
from .sort import remove_leftovers
from .staging import Recorder, Staging


@dataclass
class UpgradeReport:
    """What :func:`upgrade`, :func:`downgrade` or :func:`stamp` did (or would do)."""

    store: str
    engine: str
    schema: str
    status: str = ""  # upgraded, downgraded, stamped, up_to_date, dry_run
    from_revisions: list[str] = field(default_factory=list)
    to_revisions: list[str] = field(default_factory=list)
    revisions: list[dict[str, Any]] = field(default_factory=list)
    digest_before: str | None = None
    digest_after: str | None = None
    backup: str | None = None
    recovered: str | None = None
    dry_run: bool = False
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["from"] = out.pop("from_revisions")
        out["to"] = out.pop("to_revisions")
        return out


@dataclass
class CurrentReport:
    """What :func:`current` and :func:`check` found."""

    store: str
    engine: str
    current: list[str]
    heads: list[str] | None = None
    at_head: bool | None = None
    unknown: list[str] = field(default_factory=list)
    changed_files: list[dict[str, str]] = field(default_factory=list)
    checksums: dict[str, str] = field(default_factory=dict)
    recovered: str | None = None

    @property
    def ok(self) -> bool:
        """At head, every revision known, no applied file changed."""
        return bool(self.at_head) and not self.unknown and not self.changed_files

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        if self.heads is not None:
            out["ok"] = self.ok
        return out


def _in_place_engine(store: str, engine: str | None) -> tuple[type[Engine], Path]:
    eng, path = resolve_source(store, engine)
    if not eng.capabilities.in_place:
        raise UsageError(
            f"the {eng.name} engine does not support schema upgrades in place",
            hint="convert the store to an engine that does (statemigrate engines lists them), upgrade, convert back",
        )
    return eng, path


@contextlib.contextmanager
def _open(eng: type[Engine], path: Path) -> Iterator[Writer]:
    from ..pipeline import destination_lock

    # What the upgrade creates (lock, new files, spills, --backup) is no wider than the store.
    with no_wider_than(path), destination_lock(path):
        writer = eng.open_writer(path)
        try:
            yield writer
        finally:
            writer.close()


def _atomic(eng: type[Engine], writer: Writer) -> Any:
    return writer.transaction() if eng.capabilities.transactional_ddl else contextlib.nullcontext()


def _stamped(eng: type[Engine], path: Path, meta: dict[str, bytes]) -> list[str]:
    raw = meta.get(META_REVISION)
    if raw is None and eng.capabilities.sql:
        # A store stamped by Alembic's own tools only: its reader reads alembic_version.
        with contextlib.suppress(StateMigrateError):
            try:
                reader = eng.open_reader(path, {"skip_foreign_tables": True})
            except UsageError:
                reader = eng.open_reader(path)
            with reader:
                raw = reader.metadata().get(META_REVISION)
    return sorted(json.loads(raw)) if raw else []


def _check_known(schema: Schema, path: Path, current: list[str]) -> None:
    unknown = [r for r in current if not schema.knows(r)]
    if unknown:
        raise RevisionUnknownError(
            f"{path}: the store is at revision {', '.join(unknown)}, which the schema in {schema.dir} "
            "does not know (a newer version of the app wrote it); nothing was changed",
            hint="run the newer app's schema (its downgrade) first, or restore a backup",
        )


def digest_writer(writer: Writer) -> str:
    """The store digest, read through the writer (it sees what the writer sees)."""
    parts = []
    for table in writer.list_tables():
        total = Digest()
        for batch in writer.read_batches(table):
            total = total + batch_digest(batch, table.versioned)
        parts.append((table.name, table.kind, total))
    return store_digest(parts)


def _recover(
    eng: type[Engine], writer: Writer, path: Path, batch_records: int, batch_bytes: int
) -> str | None:
    remove_leftovers(path)
    with _atomic(eng, writer):
        return recover(writer, eng.capabilities.rename_table, batch_records, batch_bytes)


def _peek(eng: type[Engine], path: Path) -> tuple[dict[str, bytes], list[TableInfo], Reader]:
    """Open a read-only view: deciding what to do must change nothing (dry run, at head, too new)."""
    try:
        reader = eng.open_reader(path, {"skip_foreign_tables": True})
    except UsageError:
        reader = eng.open_reader(path)
    return reader.metadata(), reader.list_tables(), reader


def _digest_reader(reader: Reader) -> str:
    parts = []
    for table in reader.tables():
        total = Digest()
        for batch in reader.read_batches(table):
            total = total + batch_digest(batch, table.versioned)
        parts.append((table.name, table.kind, total))
    return store_digest(parts)


def _migrate(
    store: str,
    schema_dir: str | Path,
    target: str,
    up: bool,
    *,
    engine: str | None,
    dry_run: bool,
    backup: str | Path | None,
    digests: bool,
    batch_records: int,
    batch_bytes: int,
) -> UpgradeReport:
    started = time.monotonic()
    eng, path = _in_place_engine(store, engine)
    schema = Schema(schema_dir)
    report = UpgradeReport(str(path), eng.name, str(schema.dir), dry_run=dry_run)
    meta, tables, reader = _peek(eng, path)
    with reader:
        raw = meta.get(META_REVISION)
        current = sorted(json.loads(raw)) if raw else []
        _check_known(schema, path, current)
        report.from_revisions = list(current)
        steps = schema.steps(current, target, up)
        report.to_revisions = steps[-1].heads_after if steps else list(current)
        pending = needs_recovery(meta, tables)
        if dry_run or not (steps or pending):
            if pending:
                report.recovered = "an interrupted revision would be finished or rolled back first"
            for step in steps:
                rec = Recorder(eng, step.revision, tables)
                with op_module.bind(rec):
                    step.fn()
                report.revisions.append(_step_json(step, 0.0, rec.log))
            report.status = "dry_run" if dry_run else "up_to_date"
            if digests and not dry_run:
                report.digest_before = report.digest_after = _digest_reader(reader)
            report.seconds = time.monotonic() - started
            return report
    with _open(eng, path) as writer:
        report.recovered = _recover(eng, writer, path, batch_records, batch_bytes)
        current = _stamped(eng, path, writer.metadata())
        _check_known(schema, path, current)
        report.from_revisions = list(current)
        steps = schema.steps(current, target, up)
        report.to_revisions = steps[-1].heads_after if steps else list(current)
        if digests:
            report.digest_before = digest_writer(writer)
        if not steps:
            report.status = "up_to_date"
            report.digest_after = report.digest_before
            writer.finish()
            report.seconds = time.monotonic() - started
            return report
        if backup is not None:
            report.backup = str(_backup(writer, Path(backup)))
        checksums = json.loads(writer.metadata().get(META_CHECKSUMS) or b"{}")
        counter = [0]
        for step in steps:
            t0 = time.monotonic()
            log = _run_step(
                eng, writer, path, schema, step, checksums, counter, batch_records, batch_bytes
            )
            report.revisions.append(_step_json(step, time.monotonic() - t0, log))
            crash_point(f"{step.revision} done")
        writer.finish()
        if digests:
            report.digest_after = digest_writer(writer)
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


def _backup(writer: Writer, dest: Path) -> Path:
    if dest.exists():
        raise DestinationError(f"{dest}: backup destination already exists")
    if not dest.parent.is_dir():
        raise DestinationError(f"{dest.parent}: no such directory for the backup")
    writer.backup(dest)
    return dest


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
) -> list[str]:
    """One revision and its stamp, atomically; on failure the store stays at the revision before."""
    try:
        with _atomic(eng, writer):
            staging = Staging(eng, writer, path, step.revision, batch_records, batch_bytes, counter)
            try:
                with op_module.bind(staging):
                    step.fn()
            except StateMigrateError:
                raise
            except Exception as exc:
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
    store: str,
    schema: str | Path,
    *,
    to: str = "head",
    engine: str | None = None,
    dry_run: bool = False,
    backup: str | Path | None = None,
    digests: bool = True,
    batch_records: int = DEFAULT_BATCH_RECORDS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
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

    Returns:
        An :class:`UpgradeReport` (status ``up_to_date`` when nothing was to do).

    Raises:
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
    )


def downgrade(
    store: str,
    schema: str | Path,
    *,
    to: str,
    engine: str | None = None,
    dry_run: bool = False,
    backup: str | Path | None = None,
    digests: bool = True,
    batch_records: int = DEFAULT_BATCH_RECORDS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
) -> UpgradeReport:
    """Take a store back to an earlier revision (``base``, an id, ``-N``) through the downgrades.

    Arguments, result and errors as :func:`upgrade`.
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
    )


def stamp(
    store: str,
    schema: str | Path,
    revision: str,
    *,
    engine: str | None = None,
    dry_run: bool = False,
) -> UpgradeReport:
    """Set the store's revision without running anything (Alembic's ``stamp``).

    The checksums of the stamped revisions and their ancestors are recorded as applied.
    """
    started = time.monotonic()
    eng, path = _in_place_engine(store, engine)
    sch = Schema(schema)
    report = UpgradeReport(str(path), eng.name, str(sch.dir), dry_run=dry_run)
    with _open(eng, path) as writer:
        if not dry_run:
            report.recovered = _recover(
                eng, writer, path, DEFAULT_BATCH_RECORDS, DEFAULT_BATCH_BYTES
            )
        current = _stamped(eng, path, writer.metadata())
        report.from_revisions = current
        known = [r for r in current if sch.knows(r)]
        heads = sch.stamp_heads(known, revision) if revision not in ("base",) else []
        report.to_revisions = heads
        checksums = {r: sch.checksum(r) for r in sch.ancestry(heads)}
        if not dry_run:
            with _atomic(eng, writer):
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


def current(
    store: str,
    *,
    schema: str | Path | None = None,
    engine: str | None = None,
    recover_store: bool = True,
) -> CurrentReport:
    """The store's stamped revision(s); with a schema, whether it is at head.

    An interrupted upgrade is finished or rolled back first (as SQLite rolls back a
    hot journal on open), so the revision named is the one the data is at.
    """
    eng, path = resolve_source(store, engine)
    with eng.open_reader(path) as reader:
        meta = reader.metadata()
        pending = needs_recovery(meta, reader.list_tables())
    recovered = None
    if pending and recover_store and eng.capabilities.in_place:
        with _open(eng, path) as writer:
            recovered = _recover(eng, writer, path, DEFAULT_BATCH_RECORDS, DEFAULT_BATCH_BYTES)
            writer.finish()
        with eng.open_reader(path) as reader:
            meta = reader.metadata()
    raw = meta.get(META_REVISION)
    report = CurrentReport(
        str(path),
        eng.name,
        sorted(json.loads(raw)) if raw else [],
        checksums=json.loads(meta.get(META_CHECKSUMS) or b"{}"),
        recovered=recovered,
    )
    if schema is not None:
        sch = Schema(schema)
        report.heads = sch.heads
        report.unknown = [r for r in report.current if not sch.knows(r)]
        report.at_head = set(report.current) == set(report.heads)
        for rev, recorded in sorted(report.checksums.items()):
            if sch.knows(rev) and sch.checksum(rev) != recorded:
                report.changed_files.append(
                    {
                        "revision": rev,
                        "path": sch.path_of(rev),
                        "applied": recorded,
                        "now": sch.checksum(rev),
                    }
                )
    return report


def check(store: str, schema: str | Path, *, engine: str | None = None) -> CurrentReport:
    """Whether the store is at the schema's head and no applied revision file changed.

    Returns:
        A :class:`CurrentReport`; ``report.ok`` is the answer (the CLI exits 0 or 1).
    """
    return current(store, schema=schema, engine=engine)


def history(schema: str | Path) -> list[dict[str, Any]]:
    """The schema's revisions, newest first (id, down revisions, message, head/merge/branch)."""
    return Schema(schema).history()


def revision(
    schema: str | Path, message: str, *, head: str = "head", rev_id: str | None = None
) -> str:
    """Write a new revision file from the schema's ``script.py.mako``; returns its path."""
    return Schema(schema).new_revision(message, head=head, rev_id=rev_id)
