"""The source side of a convert: opening it and choosing its tables."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..engines.base import Engine, Reader
from ..errors import SourceError, UsageError
from ..model import TableInfo


def open_source(engine: type[Engine], path: Path, options: Mapping[str, Any] | None) -> Reader:
    """The engine's reader, with a file-system refusal turned into a source error (exit 4).

    A store that cannot be opened while another statemigrate writes it (an upgrade
    whose engine changes files under a reader's private image) is busy, not damaged.

    Raises:
        StoreBusyError: the open failed and another statemigrate holds the store's
            writer lock (exit 3, its pid).
        SourceError: the open failed otherwise (exit 4).
    """
    try:
        try:
            return engine.open_reader(path, options)
        except PermissionError as exc:
            raise SourceError(f"{path}: permission denied ({exc.filename or path})") from exc
        except OSError as exc:
            raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    except SourceError:
        from .lockfile import refuse_if_written

        refuse_if_written(path, "statemigrate is writing it")
        raise


def select_tables(tables: list[TableInfo], wanted: list[str] | None) -> list[TableInfo]:
    """The source's tables, or only those named (each must exist)."""
    if not wanted:
        return tables
    by_name = {t.name: t for t in tables}
    missing = [n for n in wanted if n not in by_name]
    if missing:
        raise UsageError(
            f"no table {missing[0]!r} in the source; it has: {', '.join(by_name) or '(none)'}"
        )
    return [by_name[n] for n in sorted(set(wanted), key=lambda n: n.encode())]
