"""The ``[kv]`` section: how an app lays its state out in a key-value engine's namespaces.

A key-value engine has namespaces (RocksDB's column families, LMDB's named databases,
fjall's keyspaces), and most have a main one (RocksDB's ``default`` column family,
LMDB's unnamed database), named ``""`` here. Modes:

- ``namespaces``: each state table is one namespace, named by ``tables``
  (``{state table = namespace}``); ``{ aliases = "" }`` is a Postfix map's or an
  ``ldb`` store's one table in the main namespace. Versions as ``version`` says.
- ``prefix``: every table in one namespace, stored key = ``prefix`` with ``{name}``
  replaced ‖ key.
- ``namespace-per-table`` with the default version encoding is the default layout
  (every namespace a table, named as it): no layout file is needed.

``subdir`` (LMDB only, every mode): ``false`` is a single-file environment
(``MDB_NOSUBDIR``, Postfix's ``FILE.lmdb``), ``true`` a directory holding ``data.mdb``;
absent: a new store is a directory, an existing one is read and written as it is.

``rocksdict_config`` (RocksDB only, every mode): ``true`` when the app's store holds
rocksdict's ``rocksdict-config.json`` (an app that opens its store with rocksdict: raw
mode, no prefix extractor); absent or ``false``, a store written has none.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .common import METADATA_NAMESPACE, fail, names_list, string, table_map, unknown_fields

__all__ = ["MAIN", "VERSION_ENCODINGS", "KvNamespaces", "KvPrefix", "kv_section"]

# How a [kv] layout stores a versioned record's version: where, and its byte order.
VERSION_ENCODINGS = ("prefix-u64be", "prefix-u64le", "suffix-u64be", "suffix-u64le", "none")
MAIN = ""  # the engine's main namespace (RocksDB's default column family, LMDB's unnamed db)
_FIELDS = {
    "mode",
    "namespace",
    "prefix",
    "version",
    "tables",
    "metadata",
    "subdir",
    "rocksdict_config",
}
# Fields of the store's file shape, not of the mapping: every mode has them.
_SHAPE_FIELDS = {"subdir", "rocksdict_config"}


@dataclass(frozen=True)
class KvPrefix:
    """``prefix`` mode: every table in one namespace, stored key = prefix ‖ key.

    The prefix of table ``name`` is ``head ‖ name ‖ separator`` (the template
    ``prefix`` split at ``{name}``, UTF-8). Names hold no ``separator[0]``, so the first
    ``separator`` after ``head`` ends the name: a stored key parses one way only.
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
    subdir: bool | None = None  # LMDB: a directory (True) or a single file (False)
    rocksdict_config: bool = False  # RocksDB: the store holds rocksdict-config.json

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

    def describe(self) -> str:
        """What the section lays out, for messages."""
        return (
            f"prefix {self.head + '{name}' + self.separator!r} in {self.namespace!r}, "
            f"versions {self.version}"
        )


@dataclass(frozen=True)
class KvNamespaces:
    """``namespaces`` mode: each state table one namespace (``tables``: table -> namespace)."""

    tables: tuple[tuple[str, str], ...]
    version: str
    subdir: bool | None = None  # LMDB: a directory (True) or a single file (False)
    rocksdict_config: bool = False  # RocksDB: the store holds rocksdict-config.json

    @property
    def mode(self) -> str:
        return "namespaces"

    def namespace_of(self, name: str) -> str | None:
        """The namespace of state table ``name``, or None when the layout has no such table."""
        return next((ns for t, ns in self.tables if t == name), None)

    def table_of(self, namespace: str) -> str | None:
        """The state table of ``namespace``, or None when it is none of the layout's."""
        return next((t for t, ns in self.tables if ns == namespace), None)

    def table_prefix(self, name: str) -> bytes:
        """The stored keys of a table start with these bytes: none (it has its namespace)."""
        return b""

    def name_problem(self, name: str) -> str | None:
        """Why this layout cannot hold a table called ``name``, or None."""
        if self.namespace_of(name) is None:
            names = ", ".join(repr(t) for t, _ in self.tables)
            return f"is not one of the layout's tables ({names})"
        return None

    def describe(self) -> str:
        """What the section lays out, for messages."""
        shown = ", ".join(f"{t} in {ns or 'the main namespace'!r}" for t, ns in self.tables)
        return f"namespaces ({shown}), versions {self.version}"


def _version(path: Path, section: dict[str, Any], versioned: list[str]) -> str:
    version = section.get("version", "prefix-u64be")
    if version not in VERSION_ENCODINGS:
        raise fail(
            path, f"kv.version must be one of {', '.join(VERSION_ENCODINGS)}, not {version!r}"
        )
    if versioned and version == "none":
        raise fail(path, "versioned tables need a version encoding (kv.version is 'none')")
    return str(version)


def _namespaces(
    path: Path, section: dict[str, Any], versioned: list[str], metadata: str
) -> KvNamespaces:
    extra = sorted(set(section) - {"mode", "version", "tables"} - _SHAPE_FIELDS)
    if extra:
        raise fail(path, f"kv.{extra[0]} is not a field of kv.mode 'namespaces'")
    if metadata == "inline":
        raise fail(path, "metadata 'inline' needs kv.mode 'prefix' (a namespace to share)")
    if "tables" not in section:
        raise fail(path, "kv.tables is needed for kv.mode 'namespaces' ({ table = namespace })")
    tables = table_map(path, section["tables"], "kv.tables")
    for t, ns in tables.items():
        if METADATA_NAMESPACE in (t, ns):
            raise fail(path, f"kv.tables: {METADATA_NAMESPACE!r} is statemigrate's metadata")
    missing = sorted(set(versioned) - set(tables))
    if missing:
        raise fail(path, f"versioned table {missing[0]!r} is not in kv.tables")
    ordered = sorted(tables.items(), key=lambda tn: tn[0].encode("utf-8"))
    return KvNamespaces(
        tuple(ordered),
        _version(path, section, versioned),
        _subdir(path, section),
        _rocksdict_config(path, section),
    )


def _rocksdict_config(path: Path, section: dict[str, Any]) -> bool:
    value = section.get("rocksdict_config", False)
    if not isinstance(value, bool):
        raise fail(path, f"kv.rocksdict_config must be true or false, not {value!r}")
    return value


def _subdir(path: Path, section: dict[str, Any]) -> bool | None:
    value = section.get("subdir")
    if value is not None and not isinstance(value, bool):
        raise fail(path, f"kv.subdir must be true or false, not {value!r}")
    return value


def kv_section(
    path: Path, section: dict[str, Any], versioned: list[str], metadata: str
) -> KvPrefix | KvNamespaces:
    """The ``[kv]`` section, validated.

    Raises:
        UsageError: a field unknown, missing or of the wrong type, or a mode not
            implemented (exit 2).
    """
    unknown_fields(path, section, _FIELDS, "kv")
    mode = section.get("mode", "prefix")
    if mode == "namespaces":
        return _namespaces(path, section, versioned, metadata)
    version = _version(path, section, versioned)
    if mode == "namespace-per-table":
        extra = sorted(set(section) - {"mode", "version"} - _SHAPE_FIELDS)
        if extra:
            raise fail(path, f"kv.{extra[0]} is a prefix-mode field (kv.mode is {mode!r})")
        if version != "prefix-u64be":
            raise fail(
                path,
                f"kv.version {version!r} with one namespace per table is not implemented yet "
                "(the default layout stores 'prefix-u64be')",
            )
        if metadata != "store":
            raise fail(path, f"metadata {metadata!r} needs kv.mode 'prefix' or 'namespaces'")
        return KvPrefix(
            mode,
            "",
            "",
            "/",
            version,
            subdir=_subdir(path, section),
            rocksdict_config=_rocksdict_config(path, section),
        )
    if mode != "prefix":
        raise fail(
            path, f"kv.mode must be 'prefix', 'namespaces' or 'namespace-per-table', not {mode!r}"
        )
    namespace = section.get("namespace", MAIN)
    if not isinstance(namespace, str):
        raise fail(path, f"kv.namespace must be a string, not {namespace!r}")
    if namespace == METADATA_NAMESPACE:
        raise fail(path, f"kv.namespace {METADATA_NAMESPACE!r} is statemigrate's metadata")
    template = string(path, section, "prefix", "kv.")
    head, marker, separator = template.partition("{name}")
    if not marker or "{name}" in separator:
        raise fail(path, f"kv.prefix {template!r} must hold {{name}} once")
    if not separator:
        raise fail(
            path, f"kv.prefix {template!r} needs a separator after {{name}} (such as '/' or ':')"
        )
    if any(c in head + separator for c in "{}"):
        raise fail(path, f"kv.prefix {template!r} holds a brace other than {{name}}'s")
    tables = names_list(path, section["tables"], "kv.tables") if "tables" in section else None
    inline = metadata == "inline"
    if "metadata" in section:  # the older spelling: kv.metadata = the layout's namespace
        given = section["metadata"]
        if given not in (METADATA_NAMESPACE, namespace, "default" if namespace == MAIN else None):
            raise fail(
                path,
                f"kv.metadata must be {METADATA_NAMESPACE!r} (a namespace of its own) or the "
                f"layout's namespace {namespace!r}, not {given!r}",
            )
        inline = inline or given != METADATA_NAMESPACE
    spec = KvPrefix(
        mode,
        namespace,
        head,
        separator,
        version,
        frozenset(tables) if tables is not None else None,
        metadata_inline=inline,
        subdir=_subdir(path, section),
        rocksdict_config=_rocksdict_config(path, section),
    )
    if spec.metadata_inline and spec.name_problem(METADATA_NAMESPACE):
        raise fail(
            path,
            f"kv.metadata in the namespace needs a separator that {METADATA_NAMESPACE!r} does not hold",
        )
    missing = sorted(set(versioned) - set(tables)) if tables is not None else []
    if missing:
        raise fail(path, f"versioned table {missing[0]!r} is not in kv.tables")
    for name in versioned + (tables or []):
        problem = spec.name_problem(name)
        if problem:
            raise fail(path, f"table name {name!r} {problem}: its keys would not parse back")
    return spec
