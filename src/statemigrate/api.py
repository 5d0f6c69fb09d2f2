"""The library's verbs: typed functions that the CLI only calls.

This module is the one home of the verbs, as Alembic's ``command.py`` is of its
commands: each verb of the command line is one function here, with its docstring,
which resolves what it was given and hands one job to the package that does the work
(:mod:`.pipeline` for ``convert``, :mod:`.verification` for ``verify`` and
``checksum``, :mod:`.schema` for the schema verbs). Paths are ``str`` or
:class:`os.PathLike` (a ``pathlib.Path``); a string may name the engine as
``ENGINE:PATH``. Failures raise :class:`~statemigrate.errors.StateMigrateError`
subclasses carrying the contract's exit code. The schema verbs load Alembic's glue
when first called, so that the command line's ``--help`` stays light.
"""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .engines.base import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_RECORDS,
    META_REVISION,
    META_SCHEMA,
    Engine,
    Reader,
)
from .errors import SourceError, StoreBusyError, UsageError
from .pipeline import ConvertReport, Job, TableReport
from .progress import Progress, ProgressLike, as_progress, run_total, table_total
from .registry import StorePath, engine_names, get_engine, resolve_source
from .schema.reports import CurrentReport, UpgradeReport
from .stores.opening import Source, resolve_destination
from .verification import ChecksumReport, VerifyReport

if TYPE_CHECKING:
    from .schema.job import UpgradeJob


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
    progress: ProgressLike | None = None,
    should_stop: Callable[[], bool] = lambda: False,
    allow_empty: bool = False,
) -> ConvertReport:
    """Convert a store to another engine (or the same one), verified, never in place.

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
        progress: receives progress events: a :class:`~statemigrate.progress.Progress`,
            or a callable given a :class:`~statemigrate.progress.ProgressEvent` each time.
        should_stop: polled between batches; True stops with a resumable checkpoint.
        allow_empty: convert even when the reader left every part of the source out
            (``skip_foreign_tables``); refused otherwise (exit 4).

    Returns:
        A :class:`ConvertReport`.

    Raises:
        StateMigrateError: a subclass carrying the exit code of the contract.
    """
    from .pipeline import run

    job = Job(
        *resolve_source(source, from_engine),
        *resolve_destination(destination, to_engine),
        src_options=source_options,
        dst_options=destination_options,
        tables=tables,
        batch_records=batch_records,
        batch_bytes=batch_bytes,
        overwrite=overwrite,
        verify=verify,
        resume=resume,
        force=force,
        progress=as_progress(progress) or Progress(),
        should_stop=should_stop,
        allow_empty=allow_empty,
    )
    return run(job)


def verify(
    a: StorePath,
    b: StorePath,
    *,
    engine_a: str | None = None,
    engine_b: str | None = None,
    limit: int = 20,
    options_a: dict[str, Any] | None = None,
    options_b: dict[str, Any] | None = None,
    progress: ProgressLike | None = None,
    workers: int = 1,
) -> VerifyReport:
    """Compare two stores record by record, on any two engines.

    Args:
        a: the first store (path or ``ENGINE:PATH``).
        b: the second store.
        engine_a: engine of ``a`` when not detected.
        engine_b: engine of ``b`` when not detected.
        limit: how many differences to list (all are counted).
        options_a: reader options for ``a``.
        options_b: reader options for ``b``.
        progress: receives progress events: the phase ``verifying``, then one table at
            a time, advanced by A's records (B's where A lacks the table), its total
            from A's engine where it knows the count cheaply.
        workers: 2 reads B's tables in a second process while this one reads A's, so
            that two drivers holding the GIL scan at once (the command line does; it
            pays for stores of a few tens of MB and more). 1 (default) stays in this
            process. Engines that walk their files natively (LMDB, redb) walk both
            sides at once on threads either way.

    Returns:
        A :class:`VerifyReport`; ``equal`` is False when anything differs.
    """
    from .verification import compare

    return compare(
        Source.named(a, engine_a, options_a),
        Source.named(b, engine_b, options_b),
        limit,
        as_progress(progress),
        workers,
    )


def verify_manifest(
    store: StorePath,
    manifest: str | os.PathLike[str],
    *,
    engine: str | None = None,
    options: dict[str, Any] | None = None,
    progress: ProgressLike | None = None,
) -> VerifyReport:
    """Check a store against a saved manifest (per-table counts and digests).

    Args:
        store: a path or ``ENGINE:PATH``.
        manifest: a manifest written by ``checksum --json``.
        engine: the engine, when not detected.
        options: reader options of the engine.
        progress: receives progress events (one table at a time, as it is digested).

    Returns:
        A :class:`VerifyReport`; ``equal`` is False when anything differs.

    Raises:
        UsageError: the manifest is missing or malformed (exit 2).
    """
    from .verification import against_manifest

    return against_manifest(Source.named(store, engine, options), manifest, as_progress(progress))


def checksum(
    store: StorePath,
    *,
    engine: str | None = None,
    options: dict[str, Any] | None = None,
    progress: ProgressLike | None = None,
) -> ChecksumReport:
    """Digest every table of a store and the store as a whole.

    Args:
        store: a path or ``ENGINE:PATH``.
        engine: the engine, when not detected.
        options: reader options of the engine.
        progress: receives progress events.

    Returns:
        A :class:`ChecksumReport` whose JSON form is a manifest for :func:`verify_manifest`.
    """
    from .verification import digest_of

    return digest_of(Source.named(store, engine, options), as_progress(progress))


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
    eng, path = resolve_source(store, engine)
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
    store: StorePath,
    *,
    engine: str | None = None,
    options: dict[str, Any] | None = None,
    progress: ProgressLike | None = None,
) -> InspectReport:
    """Describe a store: engine, format, tables with kind, records and bytes, revision.

    Args:
        store: a path or ``ENGINE:PATH``.
        engine: the engine, when not detected.
        options: reader options of the engine.
        progress: receives progress events (one table at a time, as it is counted).

    Returns:
        An :class:`InspectReport`; an upgrade left unfinished is in ``upgrade_interrupted``.

    Raises:
        StoreBusyError: another process holds the store and it cannot be read (exit 3).
    """
    eng, path = resolve_source(store, engine)
    report = InspectReport(str(path), eng.name, eng.format_info(path))
    progress = as_progress(progress)
    try:
        with eng.open_reader(path, options) as reader:
            meta = reader.metadata()
            if progress:
                counts = (table_total(progress, reader, t) for t in reader.tables())
                progress.expect(run_total(counts))
            for table in reader.tables():
                records = nbytes = 0
                if progress:
                    progress.start_table(table.name, table_total(progress, reader, table))
                for batch in reader.read_batches(table):
                    records += len(batch)
                    size = sum(len(r[0]) + len(r[1]) for r in batch)
                    nbytes += size
                    if progress:
                        progress.advance(len(batch), size)
                if progress:
                    progress.end_table()
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
    from .stores.interrupted import interrupted

    report.upgrade_interrupted = interrupted(meta)
    return report


def layout(engine: str | None, store: StorePath) -> str:
    """A layout file guessed from an existing store (``statemigrate layout init``).

    Args:
        engine: the engine the store is read as (``sqlite``); None: detected from the
            store (or named as ``ENGINE:PATH``).
        store: the store's path.

    Returns:
        The layout file's TOML text, with comments saying what was seen and what could
        not be (which tables are versioned, and how), for the user to check and save.

    Raises:
        UsageError: the engine has no layout files yet (exit 2).
        LayoutNotNeeded: the store is in statemigrate's own layout for its engine already:
            it is read and written as it is, without a layout file (the command line
            says so and exits 0).
        SourceError: no part of the store looks like a layout this engine has (exit 4).
    """
    if engine is None:
        eng, path = resolve_source(store)
        engine = eng.name
    else:
        eng = get_engine(engine)
    guess = getattr(eng, "guess_layout", None)
    if guess is None:
        raise UsageError(
            f"layout files can be guessed for sqlite, rocksdb and lmdb only so far, not {engine!r}"
        )
    path = Path(os.fspath(store))
    if not path.exists():
        raise SourceError(f"{path}: no such file")
    text: str = guess(path)
    return text


# A new schema directory's alembic.ini: Alembic's own commands work on it too.
_INIT_INI = """\
# An Alembic config, so that `alembic -c DIR/alembic.ini history` works on this
# directory too. statemigrate runs the revisions (statemigrate upgrade STORE --schema DIR).
[alembic]
script_location = %(here)s
file_template = %%(rev)s_%%(slug)s
"""
_INIT_MESSAGE = "first revision"


def init(directory: str | os.PathLike[str]) -> str:
    """Start a schema directory (``statemigrate init``): the template revisions are
    made from, an ``alembic.ini``, ``versions/`` and a first revision, 0001.

    The template is the example schema's, whose revisions import ``from statemigrate
    import op``; the first revision does nothing until it is edited.

    Args:
        directory: where; it must not exist yet, or be an empty directory.

    Returns:
        The first revision's path.

    Raises:
        DestinationError: something is at ``directory`` already (exit 5); nothing
            there is changed.
    """
    import shutil

    from .errors import DestinationError
    from .schema.scripts import Schema
    from .testing.example import EXAMPLE

    path = Path(os.fspath(directory))
    if path.is_dir() and not path.is_symlink():
        if any(path.iterdir()):
            raise DestinationError(
                f"{path}: not empty; a schema directory is started in a new or empty one",
                hint="name a new directory",
            )
        made = False
    elif os.path.lexists(path):
        raise DestinationError(
            f"{path}: exists and is not a directory", hint="name a new directory"
        )
    else:
        path.mkdir(parents=True)
        made = True
    try:
        shutil.copyfile(EXAMPLE / "script.py.mako", path / "script.py.mako")
        (path / "alembic.ini").write_text(_INIT_INI, encoding="utf-8")
        (path / "versions").mkdir()
        return Schema(path).new_revision(_INIT_MESSAGE, rev_id="0001")
    except BaseException:
        # Nothing half made is left: the directory as it was (gone, or empty).
        if made:
            shutil.rmtree(path, ignore_errors=True)
        else:
            for child in path.iterdir():
                shutil.rmtree(child) if child.is_dir() else child.unlink()
        raise


def engines() -> list[dict[str, Any]]:
    """Every registered engine: name, description, driver installed, capabilities, options.

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
                "options": [spec.to_json() for spec in eng.options.specs()],
            }
        )
    return out


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
    from .schema.job import UpgradeJob

    job = UpgradeJob(
        os.fspath(store),
        schema,
        to,
        up=True,
        engine=engine,
        dry_run=dry_run,
        backup=None if backup is None else Path(backup),
        digests=digests,
        batch_records=batch_records,
        batch_bytes=batch_bytes,
        create=create,
        progress=as_progress(progress) or Progress(),
        options=options,
    )
    return _migrate(job)


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
    from .schema.job import UpgradeJob

    job = UpgradeJob(
        os.fspath(store),
        schema,
        to,
        up=False,
        engine=engine,
        dry_run=dry_run,
        backup=None if backup is None else Path(backup),
        digests=digests,
        batch_records=batch_records,
        batch_bytes=batch_bytes,
        progress=as_progress(progress) or Progress(),
        options=options,
    )
    return _migrate(job)


def _migrate(job: UpgradeJob) -> UpgradeReport:
    from .schema.runner import migrate

    return migrate(job)


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
    from .schema.runner import stamp_store

    return stamp_store(store, schema, revision, engine, dry_run, options)


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
    from .schema.runner import finish

    return finish(store, engine, options)


def current(
    store: StorePath,
    *,
    schema: str | os.PathLike[str] | None = None,
    engine: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> CurrentReport:
    """The store's stamped revision(s); with a schema, whether it is at head.

    Read only: the store is never changed. An upgrade that was interrupted is reported
    in ``interrupted`` (``upgrade`` or ``downgrade`` finishes it, or
    :func:`finish_interrupted`); the revision named is the stamp, the one the store is
    at once that is done.

    Args:
        store: a path or ``ENGINE:PATH``.
        schema: the schema directory, to say whether the store is at its head.
        engine: the engine, when not detected.
        options: the engine's options for the store (a layout file: ``layout``).

    Returns:
        A :class:`CurrentReport`.

    Raises:
        StoreMissingError: nothing is at the path (exit 4).
    """
    from .schema.queries import current_report

    return current_report(store, schema, engine, options)


def check(
    store: StorePath,
    schema: str | os.PathLike[str],
    *,
    engine: str | None = None,
    options: Mapping[str, Any] | None = None,
) -> CurrentReport:
    """Whether the store is at the schema's head, no applied revision file changed and no
    upgrade is unfinished (read only, as :func:`current`).

    Args:
        store: a path or ``ENGINE:PATH``.
        schema: the schema directory.
        engine: the engine, when not detected.
        options: as :func:`current`.

    Returns:
        A :class:`CurrentReport`; ``report.ok`` is the answer (the CLI exits 0 or 1).
    """
    from .schema.queries import current_report

    return current_report(store, schema, engine, options)


def history(schema: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The schema's revisions, newest first.

    Args:
        schema: the schema directory.

    Returns:
        One dict per revision: id, down revisions, message, head/merge/branch point.
    """
    from .schema.scripts import Schema

    return Schema(schema).history()


def revision(
    schema: str | os.PathLike[str], message: str, *, head: str = "head", rev_id: str | None = None
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
    from .schema.scripts import Schema

    return Schema(schema).new_revision(message, head=head, rev_id=rev_id)


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
    "init",
    "inspect",
    "layout",
    "open_store",
    "revision",
    "stamp",
    "upgrade",
    "verify",
    "verify_manifest",
]
