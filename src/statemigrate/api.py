"""The library's verbs: typed functions that the CLI only calls.

Every verb of the command line is a function here, the schema commands included.
Paths are ``str`` or :class:`os.PathLike` (a ``pathlib.Path``); a string may name
the engine as ``ENGINE:PATH``. Failures raise :class:`~statemigrate.errors.StateMigrateError`
subclasses carrying the contract's exit code.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, TypeAlias

from . import pipeline, verification
from .engines.base import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_RECORDS,
    META_REVISION,
    META_SCHEMA,
    Engine,
    Reader,
)
from .errors import StoreBusyError
from .pipeline import ConvertReport, TableReport
from .progress import Progress
from .registry import engine_names, get_engine, resolve_source
from .schema.reports import CurrentReport, UpgradeReport
from .verification import ChecksumReport, VerifyReport

# A path, or a string naming the engine too (``ENGINE:PATH``).
StorePath: TypeAlias = str | os.PathLike[str]


def _spec(store: StorePath) -> str:
    """The store argument as the string the registry parses (``ENGINE:PATH`` or a path)."""
    return os.fspath(store)


def _dir(path: StorePath | None) -> str | None:
    return None if path is None else os.fspath(path)


# --- conversion and verification -------------------------------------------------------


def convert(
    source: StorePath,
    destination: StorePath,
    *,
    from_engine: str | None = None,
    to_engine: str | None = None,
    tables: list[str] | None = None,
    batch_records: int = DEFAULT_BATCH_RECORDS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    overwrite: bool = False,
    verify: bool = True,
    resume: bool = False,
    force: bool = False,
    source_options: dict[str, Any] | None = None,
    destination_options: dict[str, Any] | None = None,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> ConvertReport:
    """Convert a store to another engine (or the same one), verified, never in place.

    The destination is built at ``DST.partial``, read back and compared with the
    source's digests, synced, and only then renamed into place.

    Args:
        source: the source path, or ``ENGINE:PATH``.
        destination: the destination path, or ``ENGINE:PATH``.
        from_engine: the source engine, when not detected.
        to_engine: the destination engine, when not given in ``destination`` or its suffix.
        tables: only these tables (all by default).
        batch_records: records per batch at most.
        batch_bytes: payload bytes per batch at most (one record may exceed it).
        overwrite: replace an existing destination (kept until the new one verified).
        verify: read the destination back and compare digests before renaming it.
        resume: continue a ``DST.partial`` left by an interrupted run.
        force: skip the free-space check.
        source_options: engine options for the reader.
        destination_options: engine options for the writer.
        progress: receives progress events (nothing is printed by default).
        should_stop: polled between batches; True stops with a resumable checkpoint.

    Returns:
        A :class:`~statemigrate.pipeline.ConvertReport` (``already_complete`` when a
        ``resume`` found the destination already in place).

    Raises:
        StateMigrateError: a subclass carrying the exit code of the contract.
    """
    return pipeline.convert(
        _spec(source),
        _spec(destination),
        from_engine=from_engine,
        to_engine=to_engine,
        tables=tables,
        batch_records=batch_records,
        batch_bytes=batch_bytes,
        overwrite=overwrite,
        verify=verify,
        resume=resume,
        force=force,
        source_options=source_options,
        destination_options=destination_options,
        progress=progress,
        should_stop=should_stop,
    )


def verify(
    a: StorePath,
    b: StorePath,
    *,
    engine_a: str | None = None,
    engine_b: str | None = None,
    limit: int = 20,
    options_a: dict[str, Any] | None = None,
    options_b: dict[str, Any] | None = None,
) -> VerifyReport:
    """Compare two stores record by record, on any two engines.

    Args:
        a: the first store (path or ``ENGINE:PATH``).
        b: the second store.
        engine_a: the first store's engine, when not detected.
        engine_b: the second store's engine, when not detected.
        limit: how many differences to list (all are counted).
        options_a: reader options for the first store.
        options_b: reader options for the second store.

    Returns:
        A :class:`~statemigrate.verification.VerifyReport` (``equal`` is the answer).

    Raises:
        StateMigrateError: a store cannot be read (exit 3 or 4).
    """
    return verification.verify(
        _spec(a),
        _spec(b),
        engine_a=engine_a,
        engine_b=engine_b,
        limit=limit,
        options_a=options_a,
        options_b=options_b,
    )


def verify_manifest(
    store: StorePath, manifest: StorePath, *, engine: str | None = None
) -> VerifyReport:
    """Check a store against a manifest written by ``checksum --json``.

    Args:
        store: a path or ``ENGINE:PATH``.
        manifest: the manifest file.
        engine: the engine, when not detected.

    Returns:
        A :class:`~statemigrate.verification.VerifyReport` (``equal`` is the answer).

    Raises:
        UsageError: the manifest is missing or malformed (exit 2).
    """
    return verification.verify_manifest(_spec(store), os.fspath(manifest), engine=engine)


def checksum(
    store: StorePath,
    *,
    engine: str | None = None,
    options: dict[str, Any] | None = None,
    progress: Progress | None = None,
) -> ChecksumReport:
    """Digest every table of a store and the store as a whole.

    Args:
        store: a path or ``ENGINE:PATH``.
        engine: the engine, when not detected.
        options: reader options of the engine.
        progress: receives progress events.

    Returns:
        A :class:`~statemigrate.verification.ChecksumReport` whose JSON form is a
        manifest for :func:`verify_manifest`.

    Raises:
        StateMigrateError: the store cannot be read (exit 3 or 4).
    """
    return verification.checksum(_spec(store), engine=engine, options=options, progress=progress)


def open_store(
    store: StorePath, *, engine: str | None = None, options: dict[str, Any] | None = None
) -> Reader:
    """Open a store read-only at one consistent snapshot.

    Args:
        store: a path or ``ENGINE:PATH``.
        engine: the engine, when not detected.
        options: reader options of the engine.

    Returns:
        A :class:`~statemigrate.engines.base.Reader` (a context manager).
    """
    eng, path = resolve_source(_spec(store), engine)
    return eng.open_reader(path, options)


@dataclass
class InspectReport:
    """What :func:`inspect` found."""

    store: str
    engine: str
    format: dict[str, Any]
    tables: list[dict[str, Any]] = field(default_factory=list)
    schema: str | None = None
    revision: list[str] | None = None
    in_use_by: str | None = None
    # An upgrade left unfinished (statemigrate.schema.journal.interrupted), or None.
    upgrade_interrupted: dict[str, Any] | None = None

    def to_json(self) -> dict[str, Any]:
        """The report as a JSON-ready dict."""
        return dict(self.__dict__)


def inspect(
    store: StorePath, *, engine: str | None = None, options: dict[str, Any] | None = None
) -> InspectReport:
    """Describe a store: engine, format, tables with kind, records and bytes, revision.

    Args:
        store: a path or ``ENGINE:PATH``.
        engine: the engine, when not detected.
        options: reader options of the engine.

    Returns:
        An :class:`InspectReport`; an upgrade left unfinished is in ``upgrade_interrupted``.

    Raises:
        StoreBusyError: another process holds the store and it cannot be read (exit 3).
    """
    eng, path = resolve_source(_spec(store), engine)
    report = InspectReport(str(path), eng.name, eng.format_info(path))
    try:
        with eng.open_reader(path, options) as reader:
            meta = reader.metadata()
            for table in reader.tables():
                records = nbytes = 0
                for batch in reader.read_batches(table):
                    records += len(batch)
                    nbytes += sum(len(r[0]) + len(r[1]) for r in batch)
                row: dict[str, Any] = {
                    "table": table.name,
                    "kind": table.kind.value,
                    "records": records,
                    "bytes": nbytes,
                }
                if table.meta:
                    row["meta"] = table.meta
                report.tables.append(row)
    except StoreBusyError as exc:
        report.in_use_by = exc.message
        raise
    if META_SCHEMA in meta:
        report.schema = meta[META_SCHEMA].decode("utf-8", "replace")
    if META_REVISION in meta:
        report.revision = json.loads(meta[META_REVISION])
    from .schema.journal import interrupted

    report.upgrade_interrupted = interrupted(meta)
    return report


def engines() -> list[dict[str, Any]]:
    """Every registered engine: name, description, driver installed, capabilities.

    Returns:
        One dict per engine; a plugin that fails to load has ``error`` instead.
    """
    out: list[dict[str, Any]] = []
    for name in engine_names():
        try:
            eng: type[Engine] = get_engine(name)
        except Exception as exc:  # noqa: BLE001 - a broken third-party plugin must not hide the others
            out.append({"name": name, "error": str(exc)})
            continue
        out.append(
            {
                "name": name,
                "description": eng.description,
                "extra": eng.extra,
                "driver_installed": eng.driver_available(),
                "capabilities": eng.capabilities.to_json(),
            }
        )
    return out


# --- schema upgrades in place (statemigrate.schema) -------------------------------------
# The schema machinery imports Alembic and the native extension: loaded on first call.


def upgrade(
    store: StorePath,
    schema: StorePath,
    *,
    to: str = "head",
    engine: str | None = None,
    dry_run: bool = False,
    backup: StorePath | None = None,
    digests: bool = True,
    batch_records: int = DEFAULT_BATCH_RECORDS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    create: bool = False,
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
        create: make the store first when nothing is at the path (a first install); its
            engine is named (``ENGINE:PATH``, ``engine``) or told by the path's suffix.

    Returns:
        An :class:`~statemigrate.schema.reports.UpgradeReport` (status ``up_to_date``
        when nothing was to do; ``created`` when ``create`` made the store).

    Raises:
        StoreMissingError: nothing is at the path and ``create`` is not set (exit 4).
        StoreBusyError: another process holds the store (exit 3).
        RevisionUnknownError: the store's revision is unknown to the schema (exit 1).
        RevisionFailedError: a revision failed; the store is at the revision before it.
    """
    from .schema import runner

    return runner.upgrade(
        _spec(store),
        os.fspath(schema),
        to=to,
        engine=engine,
        dry_run=dry_run,
        backup=_dir(backup),
        digests=digests,
        batch_records=batch_records,
        batch_bytes=batch_bytes,
        create=create,
    )


def downgrade(
    store: StorePath,
    schema: StorePath,
    *,
    to: str,
    engine: str | None = None,
    dry_run: bool = False,
    backup: StorePath | None = None,
    digests: bool = True,
    batch_records: int = DEFAULT_BATCH_RECORDS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
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

    Returns:
        An :class:`~statemigrate.schema.reports.UpgradeReport`.

    Raises:
        StateMigrateError: as :func:`upgrade`.
    """
    from .schema import runner

    return runner.downgrade(
        _spec(store),
        os.fspath(schema),
        to=to,
        engine=engine,
        dry_run=dry_run,
        backup=_dir(backup),
        digests=digests,
        batch_records=batch_records,
        batch_bytes=batch_bytes,
    )


def stamp(
    store: StorePath,
    schema: StorePath,
    revision: str,
    *,
    engine: str | None = None,
    dry_run: bool = False,
) -> UpgradeReport:
    """Set the store's revision without running anything (Alembic's ``stamp``).

    Args:
        store: a path or ``ENGINE:PATH``.
        schema: the schema directory.
        revision: a revision id, ``head`` or ``base``.
        engine: the engine, when not detected.
        dry_run: say what the stamp would be; change nothing.

    Returns:
        An :class:`~statemigrate.schema.reports.UpgradeReport` (status ``stamped``).

    Raises:
        StateMigrateError: the store is missing, busy or the revision unknown.
    """
    from .schema import runner

    return runner.stamp(_spec(store), os.fspath(schema), revision, engine=engine, dry_run=dry_run)


def current(
    store: StorePath, *, schema: StorePath | None = None, engine: str | None = None
) -> CurrentReport:
    """The store's stamped revision(s); with a schema, whether it is at head. Read only.

    An upgrade that was interrupted is reported in ``interrupted``, never finished here
    (:func:`upgrade`, :func:`downgrade` or :func:`finish_interrupted` finish it).

    Args:
        store: a path or ``ENGINE:PATH``.
        schema: the schema directory, to say whether the store is at its head.
        engine: the engine, when not detected.

    Returns:
        A :class:`~statemigrate.schema.reports.CurrentReport`.

    Raises:
        StoreMissingError: nothing is at the path (exit 4).
    """
    from .schema import runner

    return runner.current(_spec(store), schema=_dir(schema), engine=engine)


def check(store: StorePath, schema: StorePath, *, engine: str | None = None) -> CurrentReport:
    """Whether the store is at the schema's head with nothing changed or unfinished.

    Read only, as :func:`current`.

    Args:
        store: a path or ``ENGINE:PATH``.
        schema: the schema directory.
        engine: the engine, when not detected.

    Returns:
        A :class:`~statemigrate.schema.reports.CurrentReport`; ``report.ok`` is the
        answer (the CLI exits 0 or 1).
    """
    from .schema import runner

    return runner.check(_spec(store), os.fspath(schema), engine=engine)


def finish_interrupted(store: StorePath, *, engine: str | None = None) -> str | None:
    """Finish (or roll back) an interrupted upgrade, and nothing else; no schema needed.

    Args:
        store: a path or ``ENGINE:PATH``.
        engine: the engine, when not detected.

    Returns:
        What was done, or None when no upgrade was unfinished (nothing is written then).

    Raises:
        StoreBusyError: another process holds the store (exit 3).
    """
    from .schema import runner

    return runner.finish_interrupted(_spec(store), engine=engine)


def history(schema: StorePath) -> list[dict[str, Any]]:
    """The schema's revisions, newest first.

    Args:
        schema: the schema directory.

    Returns:
        One dict per revision: id, down revisions, message, head/merge/branch point.
    """
    from .schema import runner

    return runner.history(os.fspath(schema))


def revision(
    schema: StorePath, message: str, *, head: str = "head", rev_id: str | None = None
) -> str:
    """Write a new revision file from the schema's ``script.py.mako``.

    Args:
        schema: the schema directory.
        message: what the revision does.
        head: the revision it follows.
        rev_id: the revision id (random by default, as Alembic makes them).

    Returns:
        The new file's path.
    """
    from .schema import runner

    return runner.revision(os.fspath(schema), message, head=head, rev_id=rev_id)


__all__ = [
    "ChecksumReport",
    "ConvertReport",
    "CurrentReport",
    "InspectReport",
    "StorePath",
    "TableReport",
    "UpgradeReport",
    "VerifyReport",
    "check",
    "checksum",
    "convert",
    "current",
    "downgrade",
    "engines",
    "finish_interrupted",
    "history",
    "inspect",
    "open_store",
    "revision",
    "stamp",
    "upgrade",
    "verify",
    "verify_manifest",
]
