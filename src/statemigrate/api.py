"""The library's verbs: typed functions that the CLI only calls.

Every verb of the command line is a function here, the schema commands included.
Paths are ``str`` or :class:`os.PathLike` (a ``pathlib.Path``); a string may name
the engine as ``ENGINE:PATH``. Failures raise :class:`~statemigrate.errors.StateMigrateError`
subclasses carrying the contract's exit code.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .engines.base import META_REVISION, META_SCHEMA, Engine, Reader
from .errors import SourceError, StoreBusyError, UsageError
from .pipeline import ConvertReport, TableReport, convert
from .progress import ProgressLike, as_progress, run_total, table_total
from .registry import StorePath, engine_names, get_engine, resolve_source
from .schema.reports import CurrentReport, UpgradeReport
from .verification import ChecksumReport, VerifyReport, checksum, verify, verify_manifest

if TYPE_CHECKING:
    from .schema.runner import (
        check,
        current,
        downgrade,
        finish_interrupted,
        history,
        revision,
        stamp,
        upgrade,
    )

# convert is statemigrate.pipeline's; verify, verify_manifest and checksum are
# statemigrate.verification's; the schema verbs statemigrate.schema.runner's.


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


# The schema commands (statemigrate.schema.runner) import Alembic's glue and the native
# extension: loaded when first asked for, so that the command line's --help stays light.
_SCHEMA_VERBS = frozenset(
    (
        "check",
        "current",
        "downgrade",
        "finish_interrupted",
        "history",
        "revision",
        "stamp",
        "upgrade",
    )
)


def __getattr__(name: str) -> Any:
    if name in _SCHEMA_VERBS:
        from .schema import runner

        value = getattr(runner, name)
        globals()[name] = value
        return value
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
