"""Where a store stands: its stamp read, never changed.

:func:`statemigrate.api.current` and ``check`` call :func:`current_report` (an
interrupted upgrade is reported, never finished).
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


def current_report(
    store: StorePath,
    schema: str | os.PathLike[str] | None,
    engine: str | None,
    options: Mapping[str, Any] | None,
) -> CurrentReport:
    """The store's stamp, read only (:func:`statemigrate.api.current` and ``check``)."""
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


__all__ = ["current_report"]
