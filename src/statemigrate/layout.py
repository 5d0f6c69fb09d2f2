"""Layout files: how one app lays its state out in one engine (``--source-layout`` …).

A layout file is TOML (README, "Your app's own layout")::

    engine = "sqlite"
    versioned = ["settings"]

    [sqlite]
    mode = "one-table"
    table = "kv"
    name_column = "tbl"
    key = "k"
    value = "v"
    version = "ver"
    without_rowid = true

It is validated when loaded: an unknown or ill-typed field is one line naming the file
and the field (:class:`UsageError`, exit 2), before anything is read or written. What
is implemented so far: SQLite's ``one-table`` mode (every state table's records in one
SQL table, told apart by a name column). The ``[kv]`` layouts (RocksDB, LMDB, fjall
prefixes) and SQLite's ``table-per-table`` mode with other column names are refused
with exit 2, saying so.
"""

from __future__ import annotations

import os
import re
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .errors import UsageError

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = ["Layout", "SqlOneTable", "load_layout"]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SQL_ENGINES = ("sqlite",)  # the engines a [sqlite] section is implemented for
_TOP = {"engine", "versioned", "sqlite", "kv"}
_SQL_FIELDS = {
    "mode",
    "table",
    "name_column",
    "key",
    "value",
    "version",
    "without_rowid",
}


@dataclass(frozen=True)
class SqlOneTable:
    """SQLite ``one-table`` mode: ``table(name_column, key, value[, version])``."""

    table: str
    name_column: str
    key: str
    value: str
    version: str | None = None
    without_rowid: bool = True

    def columns(self) -> list[str]:
        """The SQL columns the layout names, in its order."""
        return [self.name_column, self.key, self.value] + ([self.version] if self.version else [])


@dataclass(frozen=True)
class Layout:
    """A loaded, validated layout file."""

    path: Path
    engine: str
    sql: SqlOneTable
    versioned: frozenset[str] = field(default_factory=frozenset)

    def describe(self) -> str:
        """One line for messages: the file and what it lays out."""
        s = self.sql
        cols = ", ".join(s.columns())
        return f"layout {self.path.name}: {self.engine} one-table {s.table}({cols})"


def _fail(path: Path, what: str) -> UsageError:
    return UsageError(f"layout {path}: {what}")


def _string(path: Path, section: dict[str, Any], name: str, where: str) -> str:
    value = section.get(name)
    if not isinstance(value, str) or not value:
        raise _fail(path, f"{where}{name} must be a non-empty string, not {value!r}")
    return value


def _sql_identifier(path: Path, section: dict[str, Any], name: str) -> str:
    """A SQL name the layout gives: plain identifiers only (no quoting games)."""
    value = _string(path, section, name, "sqlite.")
    if not _IDENTIFIER.fullmatch(value):
        raise _fail(
            path,
            f"sqlite.{name} = {value!r} is not a plain SQL identifier "
            "(letters, digits and '_', not starting with a digit)",
        )
    return value


def _sql_section(path: Path, raw: dict[str, Any]) -> SqlOneTable:
    section = raw.get("sqlite")
    if not isinstance(section, dict):
        raise _fail(path, "a [sqlite] section is needed for engine 'sqlite'")
    unknown = sorted(set(section) - _SQL_FIELDS)
    if unknown:
        raise _fail(
            path, f"unknown field sqlite.{unknown[0]} (known: {', '.join(sorted(_SQL_FIELDS))})"
        )
    mode = section.get("mode", "one-table")
    if mode == "table-per-table":
        raise _fail(
            path,
            "sqlite.mode 'table-per-table' with other names is not implemented yet "
            "(statemigrate's default SQLite layout is one table per table: give no layout)",
        )
    if mode != "one-table":
        raise _fail(path, f"sqlite.mode must be 'one-table' or 'table-per-table', not {mode!r}")
    version = section.get("version")
    without_rowid = section.get("without_rowid", True)
    if not isinstance(without_rowid, bool):
        raise _fail(path, f"sqlite.without_rowid must be true or false, not {without_rowid!r}")
    spec = SqlOneTable(
        table=_sql_identifier(path, section, "table"),
        name_column=_sql_identifier(path, section, "name_column"),
        key=_sql_identifier(path, section, "key"),
        value=_sql_identifier(path, section, "value"),
        version=_sql_identifier(path, section, "version") if version is not None else None,
        without_rowid=without_rowid,
    )
    folded = [c.lower() for c in spec.columns()]
    if len(set(folded)) != len(folded):
        raise _fail(path, f"the columns {', '.join(spec.columns())} are not all different")
    if spec.table.lower() in (
        "__statemigrate__",
        "alembic_version",
    ) or spec.table.lower().startswith("sqlite_"):
        raise _fail(path, f"sqlite.table {spec.table!r} is a name SQLite or statemigrate keeps")
    return spec


def load_layout(path: str | os.PathLike[str], engine: str) -> Layout:
    """Load and validate the layout file at ``path`` for ``engine``.

    Raises:
        UsageError: the file cannot be read, is not TOML, or a field is unknown, missing
            or of the wrong type; or it describes another engine or a layout not
            implemented yet (exit 2, one line naming the field).
    """
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise _fail(p, f"cannot be read ({exc.strerror or exc})") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise _fail(p, f"is not a TOML file ({exc})") from exc
    unknown = sorted(set(raw) - _TOP)
    if unknown:
        raise _fail(p, f"unknown field {unknown[0]!r} (known: {', '.join(sorted(_TOP))})")
    described = _string(p, raw, "engine", "")
    if described != engine:
        raise _fail(p, f"describes engine {described!r}, but the store is read as {engine!r}")
    if "kv" in raw:
        raise _fail(
            p,
            "[kv] layouts (RocksDB, LMDB, fjall key prefixes) are not implemented yet",
        )
    if engine not in _SQL_ENGINES:
        raise _fail(p, f"layout files are implemented for {', '.join(_SQL_ENGINES)} only so far")
    versioned = raw.get("versioned", [])
    if not isinstance(versioned, list) or not all(isinstance(n, str) for n in versioned):
        raise _fail(p, f"versioned must be a list of table names, not {versioned!r}")
    spec = _sql_section(p, raw)
    if versioned and spec.version is None:
        raise _fail(p, "versioned tables need a version column (sqlite.version)")
    return Layout(p, engine, spec, frozenset(versioned))
