"""The verbs that change no store: where a store stands, the schema's revisions.

``current`` and ``check`` read the store's stamp (an interrupted upgrade is reported,
never finished); ``history`` lists the schema's revisions; ``revision`` writes a new
revision file into the schema.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from ..engines.base import META_REVISION
from ..registry import StorePath
from ..stores.interrupted import interrupted
from .journal import META_CHECKSUMS, unrecorded_private
from .reports import CurrentReport
from .scripts import Schema
from .store import resolve_store


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
    eng, path = resolve_store(store, engine)
    with eng.open_reader(path, options) as reader:
        meta = reader.metadata()
        tables = reader.list_tables()
    raw = meta.get(META_REVISION)
    report = CurrentReport(
        str(path),
        eng.name,
        sorted(json.loads(raw)) if raw else [],
        checksums=json.loads(meta.get(META_CHECKSUMS) or b"{}"),
        interrupted=interrupted(meta),
        unrecorded_private=unrecorded_private(meta, tables),
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
    return current(store, schema=schema, engine=engine, options=options)


def history(schema: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The schema's revisions, newest first.

    Args:
        schema: the schema directory.

    Returns:
        One dict per revision: id, down revisions, message, head/merge/branch point.
    """
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
    return Schema(schema).new_revision(message, head=head, rev_id=rev_id)
