"""Layout files: how one app lays its state out in one engine (``--source-layout`` …).

A layout maps the state model's tables onto the physical namespaces an engine has
(SQL tables and their columns; column families, named databases, keyspaces and the
keys inside them). A layout file is TOML (README, "Your app's own layout")::

    engine = "sqlite"
    versioned = ["settings"]
    metadata = "store"

    [sql]
    mode = "one-table"
    table = "kv"
    name_column = "tbl"
    key = "k"
    value = "v"
    version = "ver"

The file names the engine it describes; which section it needs is the engine's
family (:attr:`Engine.layout_family`: ``sql`` or ``kv``), never a list of engines here.
The sections and their modes are :mod:`.sql` and :mod:`.kv`; the mapping itself is
written once per family, in the engines' base (``engines/_sql_layout.py``,
``engines/_kv_layout.py``), over each engine's raw namespaces.

``metadata`` says where statemigrate's metadata (table kinds, a convert's checkpoint,
the schema revision) lives: ``store`` (statemigrate's own table or namespace in the
store, the default), ``inline`` (key-value layouts: under the reserved table name
``__statemigrate__`` in the layout's namespace) or ``none`` (nothing in the store: the
app's shape exactly; a convert's checkpoint lives in a side file beside
``DST.partial``, removed when the store is placed, and the store records no schema
revision).

It is validated when loaded: an unknown or ill-typed field is one line naming the file
and the field (:class:`UsageError`, exit 2), before anything is read or written.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .common import METADATA_LOCATIONS, METADATA_NAMESPACE, fail, names_list, string
from .kv import VERSION_ENCODINGS, KvNamespaces, KvPrefix, kv_section
from .sql import SqlOneTable, sql_section

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib

__all__ = [
    "METADATA_LOCATIONS",
    "METADATA_NAMESPACE",
    "VERSION_ENCODINGS",
    "KvNamespaces",
    "KvPrefix",
    "Layout",
    "SqlOneTable",
    "load_layout",
]

_TOP = {"engine", "versioned", "metadata", "sql", "sqlite", "kv"}
# The section each layout family reads (``sqlite`` is the older name of ``sql``).
_SECTIONS = {"sql": ("sql", "sqlite"), "kv": ("kv",)}


@dataclass(frozen=True)
class Layout:
    """A loaded, validated layout file.

    Attributes:
        path: the file.
        engine: the engine it describes.
        spec: the family's section (:mod:`.sql` or :mod:`.kv`).
        versioned: the tables the layout lists as versioned.
        metadata: where statemigrate's metadata lives (:data:`METADATA_LOCATIONS`).
    """

    path: Path
    engine: str
    spec: Any
    versioned: frozenset[str] = field(default_factory=frozenset)
    metadata: str = "store"

    @property
    def sql(self) -> Any:
        """The ``[sql]`` section (a SQL engine's layout)."""
        assert not isinstance(self.spec, (KvPrefix, KvNamespaces)), "not a [sql] layout"
        return self.spec

    @property
    def kv(self) -> Any:
        """The ``[kv]`` section (a key-value engine's layout)."""
        assert isinstance(self.spec, (KvPrefix, KvNamespaces)), "not a [kv] layout"
        return self.spec

    @property
    def metadata_in_store(self) -> bool:
        """Whether the store holds statemigrate's metadata (not ``metadata = "none"``)."""
        return self.metadata != "none"

    def describe(self) -> str:
        """One line for messages: the file and what it lays out."""
        return f"layout {self.path.name}: {self.engine} {self.spec.describe()}"


def load_layout(path: str | os.PathLike[str], engine: str, family: str | None) -> Layout:
    """Load and validate the layout file at ``path`` for ``engine`` of layout ``family``.

    Args:
        path: the layout file.
        engine: the engine the store is read as.
        family: the engine's layout family (``sql``, ``kv``), or None for an engine
            without layouts.

    Raises:
        UsageError: the file cannot be read, is not TOML, or a field is unknown, missing
            or of the wrong type; or it describes another engine or a layout that
            engine's family does not have (exit 2, one line naming the field).
    """
    p = Path(path)
    try:
        raw = tomllib.loads(p.read_text(encoding="utf-8"))
    except OSError as exc:
        raise fail(p, f"cannot be read ({exc.strerror or exc})") from exc
    except (tomllib.TOMLDecodeError, UnicodeDecodeError) as exc:
        raise fail(p, f"is not a TOML file ({exc})") from exc
    unknown = sorted(set(raw) - _TOP)
    if unknown:
        raise fail(
            p, f"unknown field {unknown[0]!r} (known: {', '.join(sorted(_TOP - {'sqlite'}))})"
        )
    described = string(p, raw, "engine", "")
    if described != engine:
        raise fail(p, f"describes engine {described!r}, but the store is read as {engine!r}")
    if family is None:
        raise fail(p, f"the {engine} engine has no layout files yet (its default layout only)")
    versioned = names_list(p, raw.get("versioned", []), "versioned")
    metadata = raw.get("metadata", "store")
    if metadata not in METADATA_LOCATIONS:
        raise fail(p, f"metadata must be one of {', '.join(METADATA_LOCATIONS)}, not {metadata!r}")
    given = [s for s in ("sql", "sqlite", "kv") if s in raw]
    wanted = _SECTIONS[family]
    other = [s for s in given if s not in wanted]
    if other:
        kind = "a key-value engine" if other[0] == "kv" else "a SQL engine"
        raise fail(
            p, f"a [{other[0]}] section describes {kind}, not {engine!r} (use [{wanted[0]}])"
        )
    if len(given) > 1:
        raise fail(p, f"give one [{wanted[0]}] section, not [{given[0]}] and [{given[1]}]")
    section = raw.get(given[0]) if given else None
    if not isinstance(section, dict):
        raise fail(p, f"a [{wanted[0]}] section is needed for engine {engine!r}")
    if family == "kv":
        spec: Any = kv_section(p, section, versioned, metadata)
    else:
        spec = sql_section(p, section, versioned, metadata, given[0])
    return Layout(p, engine, spec, frozenset(versioned), metadata)
