"""The ``[sql]`` section: how an app lays its state out in SQL tables.

Modes so far: ``one-table`` (every state table's records in one SQL table, told apart
by a name column). The SQL engines' default layout (one table per state table, named
as it, ``key``/``value``/``version`` columns) needs no layout file.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import fail, string, unknown_fields

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_FIELDS = {"mode", "table", "name_column", "key", "value", "version", "without_rowid"}
_KEPT = ("__statemigrate__", "alembic_version")


@dataclass(frozen=True)
class SqlOneTable:
    """``one-table`` mode: ``table(name_column, key, value[, version])``."""

    table: str
    name_column: str
    key: str
    value: str
    version: str | None = None
    without_rowid: bool = True

    def columns(self) -> list[str]:
        """The SQL columns the layout names, in its order."""
        return [self.name_column, self.key, self.value] + ([self.version] if self.version else [])

    def describe(self) -> str:
        """What the section lays out, for messages."""
        return f"one-table {self.table}({', '.join(self.columns())})"


def _identifier(path: Path, section: dict[str, Any], name: str, where: str) -> str:
    """A SQL name the layout gives: plain identifiers only (no quoting games)."""
    value = string(path, section, name, where)
    if not _IDENTIFIER.fullmatch(value):
        raise fail(
            path,
            f"{where}{name} = {value!r} is not a plain SQL identifier "
            "(letters, digits and '_', not starting with a digit)",
        )
    return value


def sql_section(
    path: Path, section: dict[str, Any], versioned: list[str], metadata: str, name: str
) -> SqlOneTable:
    """The ``[sql]`` section (``name``: the section's name in the file), validated.

    Raises:
        UsageError: a field unknown, missing or of the wrong type, or a mode not
            implemented (exit 2).
    """
    where = name + "."
    unknown_fields(path, section, _FIELDS, name)
    mode = section.get("mode", "one-table")
    if mode == "table-per-table":
        raise fail(
            path,
            f"{where}mode 'table-per-table' with other names is not implemented yet "
            "(statemigrate's default SQL layout is one table per table: give no layout)",
        )
    if mode != "one-table":
        raise fail(path, f"{where}mode must be 'one-table' or 'table-per-table', not {mode!r}")
    if metadata == "inline":
        raise fail(path, "metadata 'inline' is for key-value layouts; SQL has 'store' or 'none'")
    if metadata == "none":
        raise fail(path, "metadata 'none' is not implemented for SQL layouts yet")
    version = section.get("version")
    without_rowid = section.get("without_rowid", True)
    if not isinstance(without_rowid, bool):
        raise fail(path, f"{where}without_rowid must be true or false, not {without_rowid!r}")
    spec = SqlOneTable(
        table=_identifier(path, section, "table", where),
        name_column=_identifier(path, section, "name_column", where),
        key=_identifier(path, section, "key", where),
        value=_identifier(path, section, "value", where),
        version=_identifier(path, section, "version", where) if version is not None else None,
        without_rowid=without_rowid,
    )
    folded = [c.lower() for c in spec.columns()]
    if len(set(folded)) != len(folded):
        raise fail(path, f"the columns {', '.join(spec.columns())} are not all different")
    if spec.table.lower() in _KEPT or spec.table.lower().startswith("sqlite_"):
        raise fail(path, f"{where}table {spec.table!r} is a name SQLite or statemigrate keeps")
    if versioned and spec.version is None:
        raise fail(path, f"versioned tables need a version column ({where}version)")
    return spec
