"""A schema's one head read from its revision files' literals, without Alembic.

An installer runs ``statemigrate upgrade`` at every update, and most runs find the store
already at the schema's head. Loading the schema through Alembic imports Alembic and
SQLAlchemy (about 0.4 s here) and every revision file, for nothing to run. So when the
schema directory is a plain one, its head is read from each revision file's
``revision = "…"`` and ``down_revision = …`` literals (parsed, never imported); a store
stamped at exactly that head, whose recorded checksums are exactly those of the files'
bytes now, is up to date.

The literals are trusted only where they are what Alembic would load. Each of
``revision``, ``down_revision``, ``branch_labels`` and ``depends_on`` is set exactly
once, at the top level, by ``NAME = literal`` (or ``NAME: type = literal``, as
Alembic's own template writes it), and bound nowhere else in the file: no other
assignment, block, loop target, ``with``/``except``/``import … as``, walrus, ``del``,
``global``, ``def`` or parameter of that name; and nothing in the file reaches the
module's namespace by other means (``globals``, ``vars``, ``locals``, ``setattr``,
``exec``, ``eval``, ``sys.modules``, frames, dunder attributes, star imports). The
graph has no loop or cycle and one head, and the store recorded every one of its files
as applied with the checksum of its bytes now.

Anything else goes to Alembic, which answers as before: an ``alembic.ini`` naming other
version locations, a script location elsewhere or sourceless files; a revision file
that does not parse, is not a regular file, whose ids are not plain string literals, or
that has branch labels or dependencies; a revision named twice, a ``down_revision``
that names no file; no head or several; a store whose checksums differ. Declining is
always safe. What this path cannot see: a revision file that parses but fails when
loaded (it raises, or imports a module that is missing), or code outside the file that
reaches into it while it loads; ``statemigrate check`` loads every file.
"""

from __future__ import annotations

import ast
import configparser
import json
import os
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engines.base import META_REVISION
from ..registry import StorePath
from .journal import META_CHECKSUMS, needs_recovery
from .reports import UpgradeReport
from .scripts import bytes_checksum
from .store import MISSING_HINT, in_place_engine, peek

# The files Alembic takes as revision scripts in a version location (no sourceless ones);
# Alembic matches with ``re.match``, so ``$`` also matches before a final newline.
_REVISION_FILE = re.compile(r"(?!\.\#|__init__)(.*\.py)$")
_PLAIN_INI_KEYS = {"script_location", "file_template", "prepend_sys_path", "truncate_slug_length"}
_IDS = ("revision", "down_revision", "branch_labels", "depends_on")
_NONE_ONLY = ("branch_labels", "depends_on")
# Ids Alembic takes as they are: no symbol of its own (head, base, relative targets).
_PLAIN_ID = re.compile(r"[A-Za-z0-9_]+")
_RESERVED_IDS = {"head", "heads", "base"}
# Names through which a module reaches its own namespace, or runs code its tree does not
# show; seen anywhere in a file (a name, an attribute, an import), the file is Alembic's.
_DYNAMIC = frozenset(
    {
        "globals",
        "locals",
        "vars",
        "setattr",
        "delattr",
        "getattr",
        "exec",
        "eval",
        "compile",
        "builtins",
        "importlib",
        "inspect",
        "modules",
        "_getframe",
        "currentframe",
        "f_globals",
        "f_locals",
        "f_back",
        "tb_frame",
        "gi_frame",
        "cr_frame",
        "ag_frame",
    }
)
# The dunder names a module may read without reaching its namespace.
_HARMLESS_DUNDERS = {"__name__", "__file__", "__doc__", "__future__"}


@dataclass(frozen=True)
class LiteralSchema:
    """A plain schema's graph read from its literals: its one head, and each revision's
    file checksum (of the bytes the literals were read from)."""

    head: str
    checksums: dict[str, str]


def literal_schema(directory: str | os.PathLike[str]) -> LiteralSchema | None:
    """The head and file checksums of the schema at ``directory``, read from literals, or
    None when Alembic must answer (see the module)."""
    root = Path(directory)
    if not _plain_config(root):
        return None
    parents: dict[str, tuple[str, ...]] = {}
    checksums: dict[str, str] = {}
    for path in _revision_files(root / "versions"):
        if path is None:
            return None
        try:
            data = path.read_bytes()
        except OSError:
            return None
        found = _ids(data, path)
        if found is None or found[0] in parents:
            return None
        parents[found[0]] = found[1]
        checksums[found[0]] = bytes_checksum(data)
    head = _one_head(parents)
    return None if head is None else LiteralSchema(head, checksums)


def literal_head(directory: str | os.PathLike[str]) -> str | None:
    """The one head revision of the schema at ``directory``, read from literals, or None
    when Alembic must answer (see the module)."""
    found = literal_schema(directory)
    return None if found is None else found.head


def already_at_head(
    store: StorePath,
    engine: str | None,
    schema_dir: str | os.PathLike[str],
    options: Mapping[str, Any] | None = None,
) -> UpgradeReport | None:
    """The report of an upgrade to head of a store already there (status ``up_to_date``,
    as Alembic's answer would be), read from the store's stamp and checksums and
    :func:`literal_schema`; None when Alembic must answer or there is something to do
    (an unfinished revision to finish included)."""
    schema = literal_schema(schema_dir)
    if schema is None:
        return None
    eng, path = in_place_engine(store, engine, MISSING_HINT)
    meta, _tables, reader = peek(eng, path, options)
    with reader:
        try:
            raw = meta.get(META_REVISION)
            stamp = sorted(json.loads(raw)) if raw else []
            recorded = json.loads(meta.get(META_CHECKSUMS) or b"{}")
        except (ValueError, TypeError):
            return None  # Alembic's path says what is wrong with them
        if stamp != [schema.head] or recorded != schema.checksums or needs_recovery(meta):
            return None
    return UpgradeReport(
        str(path),
        eng.name,
        str(Path(schema_dir)),
        status="up_to_date",
        from_revisions=[schema.head],
        to_revisions=[schema.head],
    )


def _revision_files(versions: Path) -> Iterator[Path | None]:
    """The revision files Alembic would load from ``versions``, in name order; None
    for one it would take that is not a regular file (a dangling link, a FIFO …),
    or when the folder cannot be listed."""
    try:
        with os.scandir(versions) as it:
            entries = sorted(it, key=lambda e: e.name)
    except OSError:
        yield None
        return
    for entry in entries:
        match = _REVISION_FILE.match(entry.name)
        try:
            if entry.is_dir():  # Alembic's walk lists directories apart and skips them
                continue
            regular = entry.is_file()
        except OSError:
            regular = False
        if match is None:
            continue
        if match.group(1) != entry.name or not regular:
            yield None
            return
        yield versions / entry.name


def _one_head(parents: dict[str, tuple[str, ...]]) -> str | None:
    """The one head of the graph ``{revision: down revisions}``; None when a parent has
    no file, a revision is its own parent, the graph has a cycle, or not exactly one
    head."""
    named = {p for ps in parents.values() for p in ps}
    if not parents or not named <= set(parents):
        return None
    if any(rev in downs for rev, downs in parents.items()):
        return None
    # Kahn's order from the bases up: a revision left unplaced is on a cycle.
    waiting = {rev: len(downs) for rev, downs in parents.items()}
    children: dict[str, list[str]] = {}
    for rev, downs in parents.items():
        for down in downs:
            children.setdefault(down, []).append(rev)
    ready = [rev for rev, n in waiting.items() if n == 0]
    placed = 0
    while ready:
        rev = ready.pop()
        placed += 1
        for child in children.get(rev, ()):
            waiting[child] -= 1
            if waiting[child] == 0:
                ready.append(child)
    if placed != len(parents):
        return None
    heads = [r for r in parents if r not in named]
    return heads[0] if len(heads) == 1 else None


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


def _ids(data: bytes, path: Path) -> tuple[str, tuple[str, ...]] | None:
    """``(revision, down revisions)`` of a revision file's bytes, from its literals; or
    None when the module Alembic loads could hold anything else (see the module)."""
    try:
        tree = ast.parse(data, filename=str(path))
    except (SyntaxError, ValueError, MemoryError, RecursionError):
        return None
    values: dict[str, object] = {}
    accepted: set[int] = set()  # the Name nodes of the one assignment of each id
    for node in tree.body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1:
            target, value = node.targets[0], node.value
        elif isinstance(node, ast.AnnAssign) and node.simple and node.value is not None:
            target, value = node.target, node.value
        else:
            continue
        if not isinstance(target, ast.Name) or target.id not in _IDS:
            continue
        if target.id in values:
            return None  # set twice
        try:
            values[target.id] = ast.literal_eval(value)
        except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
            return None  # set, but not to a literal
        accepted.add(id(target))
    if set(values) != set(_IDS) or not _only_literals_bind_ids(tree, accepted):
        return None
    revision, down = values["revision"], values["down_revision"]
    if not _plain_id(revision) or any(values[k] is not None for k in _NONE_ONLY):
        return None
    if down is None:
        return str(revision), ()
    downs = (down,) if isinstance(down, str) else down
    if not isinstance(downs, (tuple, list)) or not downs or len(set(downs)) != len(downs):
        return None
    if not all(_plain_id(d) for d in downs):
        return None
    return str(revision), tuple(str(d) for d in downs)


def _plain_id(value: object) -> bool:
    return (
        isinstance(value, str) and bool(_PLAIN_ID.fullmatch(value)) and value not in _RESERVED_IDS
    )


def _only_literals_bind_ids(tree: ast.Module, accepted: set[int]) -> bool:
    """Whether nothing in ``tree`` but the ``accepted`` Name nodes binds one of the ids,
    and nothing reaches the module's namespace by a way the tree does not show."""
    ids = set(_IDS)
    for node in ast.walk(tree):
        bound: list[str] = []
        seen: list[str] = []
        if isinstance(node, ast.Name):
            seen.append(node.id)
            if not isinstance(node.ctx, ast.Load) and id(node) not in accepted:
                bound.append(node.id)
        elif isinstance(node, ast.Attribute):
            seen.append(node.attr)
            if node.attr.startswith("__"):
                return False  # __dict__, __globals__, __class__ …: the namespace by the back door
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):
            bound.append(node.name)
        elif isinstance(node, ast.arg):
            bound.append(node.arg)
        elif isinstance(node, (ast.Global, ast.Nonlocal)):
            bound += node.names
        elif isinstance(node, (ast.ExceptHandler, ast.MatchAs, ast.MatchStar)) and node.name:
            bound.append(node.name)
        elif isinstance(node, ast.MatchMapping) and node.rest:
            bound.append(node.rest)
        elif isinstance(node, ast.ImportFrom):
            seen += (node.module or "").split(".")
        elif isinstance(node, ast.alias):
            if node.name == "*":
                return False  # a star import binds names the tree does not show
            seen += node.name.split(".")
            bound.append(node.asname or node.name.split(".")[0])
        if ids.intersection(bound) or _DYNAMIC.intersection(seen + bound):
            return False
        if any(n.startswith("__") and n not in _HARMLESS_DUNDERS for n in seen):
            return False  # __builtins__, __import__, __dict__ …
    return True
