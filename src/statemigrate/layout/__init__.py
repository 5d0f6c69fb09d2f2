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
SQL table, told apart by a name column) and the ``[kv]`` ``prefix`` mode of RocksDB and
LMDB (every table in one column family or named database, stored key = the table's
prefix ‖ key, the version in one of :data:`VERSION_ENCODINGS`); ``namespace-per-table``
with the default version encoding is the default layout. fjall and TurboKV layouts,
``namespace-per-table`` with another version encoding and SQLite's ``table-per-table``
mode with other column names are refused with exit 2, saying so.
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

__all__ = [
    "METADATA_NAMESPACE",
    "VERSION_ENCODINGS",
    "KvPrefix",
    "Layout",
    "SqlOneTable",
    "load_layout",
]

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
_SQL_ENGINES = ("sqlite",)  # the engines a [sqlite] section is implemented for
_KV_ENGINES = ("rocksdb", "lmdb")  # the engines a [kv] section is implemented for
_KV_FAMILY = ("rocksdb", "lmdb", "fjall2", "fjall3", "turbokv")  # what [kv] describes
# How a [kv] layout stores a versioned record's version: where, and its byte order.
VERSION_ENCODINGS = ("prefix-u64be", "prefix-u64le", "suffix-u64be", "suffix-u64le", "none")
_KV_FIELDS = {"mode", "namespace", "prefix", "version", "tables", "metadata"}
METADATA_NAMESPACE = "__statemigrate__"  # where a [kv] layout keeps the metadata by default
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
class KvPrefix:
    """A ``[kv]`` layout: every table in one namespace, stored key = prefix ‖ key.

    The prefix of table ``name`` is ``head ‖ name ‖ separator`` (the template
    ``prefix`` split at ``{name}``, UTF-8). Names hold no ``separator[0]``, so the first
    ``separator`` after ``head`` ends the name: a stored key parses one way only.
    ``mode`` is ``namespace-per-table`` for the default layouts.
    """

    mode: str
    namespace: str
    head: str
    separator: str
    version: str
    tables: frozenset[str] | None = None  # the app's tables, when the layout lists them
    # Where statemigrate's metadata goes: its own namespace (the default layout's), or
    # the layout's namespace, under the prefix of the reserved name ``__statemigrate__``.
    metadata_inline: bool = False

    def metadata_prefix(self) -> bytes:
        """The stored keys of the metadata start with these bytes (``metadata_inline``)."""
        return self.table_prefix(METADATA_NAMESPACE)

    def table_prefix(self, name: str) -> bytes:
        """The stored keys of table ``name`` start with these bytes."""
        return (self.head + name + self.separator).encode("utf-8")

    def name_problem(self, name: str) -> str | None:
        """Why this layout cannot hold a table called ``name``, or None."""
        if self.separator[0] in name:
            return f"holds the layout's separator {self.separator[0]!r}"
        return None


@dataclass(frozen=True)
class Layout:
    """A loaded, validated layout file (``spec``: a :class:`SqlOneTable` or a :class:`KvPrefix`)."""

    path: Path
    engine: str
    spec: SqlOneTable | KvPrefix
    versioned: frozenset[str] = field(default_factory=frozenset)

    @property
    def sql(self) -> SqlOneTable:
        """The ``[sqlite]`` section (a SQL engine's layout)."""
        assert isinstance(self.spec, SqlOneTable), "not a [sqlite] layout"
        return self.spec

    @property
    def kv(self) -> KvPrefix:
        """The ``[kv]`` section (a key-value engine's layout)."""
        assert isinstance(self.spec, KvPrefix), "not a [kv] layout"
        return self.spec

    def describe(self) -> str:
        """One line for messages: the file and what it lays out."""
        if isinstance(self.spec, KvPrefix):
            k = self.spec
            return (
                f"layout {self.path.name}: {self.engine} prefix "
                f"{k.head + '{name}' + k.separator!r} in {k.namespace!r}, versions {k.version}"
            )
        s = self.spec
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


def _names(path: Path, value: Any, where: str) -> list[str]:
    if not isinstance(value, list) or not all(isinstance(n, str) and n for n in value):
        raise _fail(path, f"{where} must be a list of table names, not {value!r}")
    return value


def _kv_section(path: Path, raw: dict[str, Any], versioned: list[str]) -> KvPrefix:
    section = raw.get("kv")
    if not isinstance(section, dict):
        raise _fail(path, f"a [kv] section is needed for engine {raw['engine']!r}")
    unknown = sorted(set(section) - _KV_FIELDS)
    if unknown:
        raise _fail(path, f"unknown field kv.{unknown[0]} (known: {', '.join(sorted(_KV_FIELDS))})")
    mode = section.get("mode", "prefix")
    version = section.get("version", "prefix-u64be")
    if version not in VERSION_ENCODINGS:
        raise _fail(
            path, f"kv.version must be one of {', '.join(VERSION_ENCODINGS)}, not {version!r}"
        )
    if versioned and version == "none":
        raise _fail(path, "versioned tables need a version encoding (kv.version is 'none')")
    if mode == "namespace-per-table":
        extra = sorted(set(section) - {"mode", "version"})
        if extra:
            raise _fail(path, f"kv.{extra[0]} is a prefix-mode field (kv.mode is {mode!r})")
        if version != "prefix-u64be":
            raise _fail(
                path,
                f"kv.version {version!r} with one namespace per table is not implemented yet "
                "(the default layout stores 'prefix-u64be')",
            )
        return KvPrefix(mode, "", "", "/", version)
    if mode != "prefix":
        raise _fail(path, f"kv.mode must be 'prefix' or 'namespace-per-table', not {mode!r}")
    if "namespace" in section or raw["engine"] != "rocksdb":
        # LMDB: a named database (the unnamed one also lists the named databases)
        namespace = _string(path, section, "namespace", "kv.")
    else:
        namespace = "default"  # RocksDB's default column family
    if namespace == "__statemigrate__":
        raise _fail(path, "kv.namespace '__statemigrate__' is statemigrate's metadata")
    template = _string(path, section, "prefix", "kv.")
    head, marker, separator = template.partition("{name}")
    if not marker or "{name}" in separator:
        raise _fail(path, f"kv.prefix {template!r} must hold {{name}} once")
    if not separator:
        raise _fail(
            path, f"kv.prefix {template!r} needs a separator after {{name}} (such as '/' or ':')"
        )
    if any(c in head + separator for c in "{}"):
        raise _fail(path, f"kv.prefix {template!r} holds a brace other than {{name}}'s")
    tables = _names(path, section["tables"], "kv.tables") if "tables" in section else None
    metadata = section.get("metadata", METADATA_NAMESPACE)
    if metadata not in (METADATA_NAMESPACE, namespace):
        raise _fail(
            path,
            f"kv.metadata must be {METADATA_NAMESPACE!r} (a namespace of its own) or the "
            f"layout's namespace {namespace!r}, not {metadata!r}",
        )
    spec = KvPrefix(
        mode,
        namespace,
        head,
        separator,
        version,
        frozenset(tables) if tables is not None else None,
        metadata_inline=metadata == namespace,
    )
    if spec.metadata_inline and spec.name_problem(METADATA_NAMESPACE):
        raise _fail(
            path,
            f"kv.metadata in the namespace needs a separator that {METADATA_NAMESPACE!r} does not hold",
        )
    missing = sorted(set(versioned) - set(tables)) if tables is not None else []
    if missing:
        raise _fail(path, f"versioned table {missing[0]!r} is not in kv.tables")
    for name in versioned + (tables or []):
        problem = spec.name_problem(name)
        if problem:
            raise _fail(path, f"table name {name!r} {problem}: its keys would not parse back")
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
    versioned = _names(p, raw.get("versioned", []), "versioned")
    if engine in _KV_FAMILY:
        if "sqlite" in raw:
            raise _fail(p, f"a [sqlite] section describes a SQL engine, not {engine!r} (use [kv])")
        if engine not in _KV_ENGINES:
            raise _fail(p, f"[kv] layouts are implemented for {', '.join(_KV_ENGINES)} only so far")
        kv = _kv_section(p, raw, versioned)
        if kv.metadata_inline and engine != "rocksdb":
            raise _fail(p, "kv.metadata in the namespace is implemented for rocksdb only so far")
        return Layout(p, engine, kv, frozenset(versioned))
    if "kv" in raw:
        raise _fail(p, f"a [kv] section describes a key-value engine, not {engine!r}")
    if engine not in _SQL_ENGINES:
        raise _fail(
            p,
            f"layout files are implemented for {', '.join(_SQL_ENGINES + _KV_ENGINES)} only so far",
        )
    spec = _sql_section(p, raw)
    if versioned and spec.version is None:
        raise _fail(p, "versioned tables need a version column (sqlite.version)")
    return Layout(p, engine, spec, frozenset(versioned))
