"""The source side of a convert: opening it and choosing its tables."""

from __future__ import annotations

from ..errors import UsageError
from ..model import TableInfo


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
