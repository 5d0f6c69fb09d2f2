"""A schema's one head read from its revision files' literals, without Alembic.

An installer runs ``statemigrate upgrade`` at every update, and most runs find the store
already at the schema's head. Loading the schema through Alembic imports Alembic and
SQLAlchemy (about 0.4 s here) and every revision file, for nothing to run. So when the
schema directory is a plain one, its head is read from each revision file's
module-level ``revision = "…"`` and ``down_revision = …`` literals (parsed, never
imported); a store stamped at exactly that head is up to date.

Anything else goes to Alembic, which answers as before: an ``alembic.ini`` naming other
version locations, a script location elsewhere or sourceless files; a revision file
that does not parse, whose ids are not plain string literals, or that has branch labels
or dependencies; a revision named twice, a ``down_revision`` that names no file; no head
or several. A revision file that parses but would fail when loaded is not noticed on
this path (nothing of it runs); ``statemigrate check`` loads every file.
"""

from __future__ import annotations

import ast
import configparser
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..engines.base import META_REVISION
from ..registry import StorePath
from .journal import needs_recovery
from .reports import UpgradeReport
from .store import MISSING_HINT, in_place_engine, peek

# The files Alembic takes as revision scripts in a version location (no sourceless ones).
_REVISION_FILE = re.compile(r"(?!\.\#|__init__)(.*\.py)$")
_PLAIN_INI_KEYS = {"script_location", "file_template", "prepend_sys_path", "truncate_slug_length"}
_NONE_ONLY = ("branch_labels", "depends_on")


def literal_head(directory: str | os.PathLike[str]) -> str | None:
    """The one head revision of the schema at ``directory``, read from literals, or None
    when Alembic must answer (see the module)."""
    root = Path(directory)
    if not _plain_config(root):
        return None
    versions = root / "versions"
    try:
        names = sorted(os.listdir(versions))
    except OSError:
        return None
    parents: dict[str, tuple[str, ...]] = {}
    for name in names:
        if not _REVISION_FILE.fullmatch(name) or not (versions / name).is_file():
            continue
        found = _ids(versions / name)
        if found is None or found[0] in parents:
            return None
        parents[found[0]] = found[1]
    named = {p for ps in parents.values() for p in ps}
    if not parents or not named <= set(parents):
        return None
    heads = [r for r in parents if r not in named]
    return heads[0] if len(heads) == 1 else None


def already_at_head(
    store: StorePath,
    engine: str | None,
    schema_dir: str | os.PathLike[str],
    options: Mapping[str, Any] | None = None,
) -> UpgradeReport | None:
    """The report of an upgrade to head of a store already there (status ``up_to_date``,
    as Alembic's answer would be), read from the store's stamp and :func:`literal_head`;
    None when Alembic must answer or there is something to do (an unfinished revision
    to finish included)."""
    head = literal_head(schema_dir)
    if head is None:
        return None
    eng, path = in_place_engine(store, engine, MISSING_HINT)
    meta, _tables, reader = peek(eng, path, options)
    with reader:
        raw = meta.get(META_REVISION)
        stamp = sorted(json.loads(raw)) if raw else []
        if stamp != [head] or needs_recovery(meta):
            return None
    return UpgradeReport(
        str(path),
        eng.name,
        str(Path(schema_dir)),
        status="up_to_date",
        from_revisions=[head],
        to_revisions=[head],
    )


def _plain_config(root: Path) -> bool:
    """Whether ``alembic.ini`` (if any) keeps Alembic to ``root/versions``, ``.py`` files."""
    ini = root / "alembic.ini"
    if not ini.exists():
        return True
    parser = configparser.RawConfigParser()
    try:
        parser.read(ini, encoding="utf-8")
    except (configparser.Error, OSError, UnicodeDecodeError):
        return False
    if not parser.has_section("alembic"):
        return False
    options = dict(parser.items("alembic"))
    if set(options) - _PLAIN_INI_KEYS:
        return False  # version_locations, sourceless, recursive ones …
    location = options.get("script_location", "%(here)s").strip()
    return location in ("%(here)s", "%(here)s/") or Path(location).resolve() == root.resolve()


def _ids(path: Path) -> tuple[str, tuple[str, ...]] | None:
    """``(revision, down revisions)`` of a revision file, from its literals; or None."""
    try:
        tree = ast.parse(path.read_bytes(), filename=str(path))
    except (SyntaxError, ValueError, OSError):
        return None
    values: dict[str, object] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if isinstance(target, ast.Name):
            try:
                values[target.id] = ast.literal_eval(value)
            except ValueError:
                values[target.id] = ValueError  # set, but not to a literal
    revision, down = values.get("revision"), values.get("down_revision")
    if not isinstance(revision, str) or any(values.get(k) is not None for k in _NONE_ONLY):
        return None
    if down is None:
        return revision, ()
    if isinstance(down, str):
        return revision, (down,)
    if isinstance(down, (tuple, list)) and all(isinstance(d, str) for d in down):
        return revision, tuple(down)
    return None
