"""The source side of a convert: opening it and choosing its tables."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..engines.base import Engine, Reader
from ..errors import SourceError, UsageError
from ..model import TableInfo


def open_source(engine: type[Engine], path: Path, options: dict[str, Any] | None) -> Reader:
    """The engine's reader, with a file-system refusal turned into a source error (exit 4)."""
    try:
        return engine.open_reader(path, options)
    except PermissionError as exc:
        raise SourceError(f"{path}: permission denied ({exc.filename or path})") from exc
    except OSError as exc:
        raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc


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
