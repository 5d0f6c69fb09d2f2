"""The example schema and its store: the workload of the upgrade suite and kill harness.

The schema ships inside this package (``example_schema/``, an Alembic script directory
with ``seed.py``), so it is found from an installed wheel as from a checkout (where
``schemas/example`` links to it). :data:`EXPECTED` holds the store digest every engine
must reach at each revision.
"""

from __future__ import annotations

import importlib.util
import shutil
import textwrap
from pathlib import Path
from typing import Any

from ..engines.base import Engine
from ..errors import UsageError
from ..registry import resolve_source
from ..stores.walk import store_digest_of
from .stores import store_path, tree_sha256

EXAMPLE = Path(__file__).resolve().parent / "example_schema"
EVENTS = 300
# Store digests of the example store seeded with EVENTS events, at each revision.
# Fixed by the digest contract: every engine, every release, must reach these. They were
# computed outside statemigrate's digest code: the seeded SQLite store read with apsw
# at each revision, records hashed with plain ``xxhash`` as DESIGN.md spells it out
# (tests/engines/test_sqlite.py recomputes them the same way).
EXPECTED: dict[str, str] = {
    "0001": "5f4abf0c609eeec448b4a14fe315273c",
    "0002": "0a6cd69ff9445e71dbec90dffae7b5f5",
    "0003": "2fac59a5e7e22f5c487034dca225eeeb",
    "0004": "79eb591b713dc2ab74a01f194e26d491",
    "0005": "acd84523d63f0c80e7105ac3c79bb85d",
}


def seed_module() -> Any:
    """The example's ``seed.py``, loaded from the package (``seed``, ``events``)."""
    spec = importlib.util.spec_from_file_location("statemigrate_example_seed", EXAMPLE / "seed.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def seeded(engine: type[Engine], tmp: Path, events: int = EVENTS, name: str = "store") -> str:
    """A store of the example schema at revision 0001 holding ``events`` events; its spec."""
    path = store_path(engine, tmp, name)
    seed_module().seed(f"{engine.name}:{path}", events)
    return f"{engine.name}:{path}"


def empty_store(engine: type[Engine], tmp: Path, name: str = "empty") -> str:
    """A new store with no table and no revision."""
    path = store_path(engine, tmp, name)
    writer = engine.create_writer(path)
    writer.finish()
    writer.close()
    return f"{engine.name}:{path}"


def store_files(engine: type[Engine], spec: str) -> dict[str, str]:
    """sha256 of every file of the store (its file or directory and every sidecar)."""
    out: dict[str, str] = {}
    for p in engine.store_paths(Path(spec.split(":", 1)[1])):
        out.update(tree_sha256(p))
    assert out, f"{spec}: no file to compare"
    return out


def digest(spec: str) -> str:
    """The store digest, read through the engine's reader (which changes nothing).

    Foreign tables are left out where the engine can, as the schema verbs read a store.
    """
    eng, path = resolve_source(spec)
    try:
        reader = eng.open_reader(path, {"skip_foreign_tables": True})
    except UsageError:  # an engine without the option
        reader = eng.open_reader(path)
    with reader:
        return store_digest_of(reader.tables(), reader.read_batches, str(reader.path))


def table_names(spec: str) -> list[str]:
    """Every table of the store, private ones included."""
    eng, path = resolve_source(spec)
    writer = eng.open_writer(path)
    try:
        return sorted(t.name for t in writer.list_tables())
    finally:
        writer.close()


def revision_file(
    rev: str, down: Any, up_body: str, down_body: str = "pass", imports: str = ""
) -> str:
    """The text of a revision file (bodies are indented here)."""

    def body(text: str) -> str:
        return textwrap.indent(textwrap.dedent(text).strip() or "pass", "    ")

    return (
        f'"""Revision {rev}."""\nfrom statemigrate import op\n{imports}\n\n'
        f"revision = {rev!r}\ndown_revision = {down!r}\nbranch_labels = None\ndepends_on = None\n\n\n"
        f"def upgrade():\n{body(up_body)}\n\n\ndef downgrade():\n{body(down_body)}\n"
    )


def schema_with(
    tmp: Path, extra: dict[str, str], base: Path | None = EXAMPLE, name: str = "schema"
) -> Path:
    """A copy of ``base`` (or an empty schema) with extra revision files ``{filename: text}``."""
    target = tmp / name
    if base is not None:
        shutil.copytree(base, target, ignore=shutil.ignore_patterns("__pycache__"))
    else:
        (target / "versions").mkdir(parents=True)
        shutil.copy(EXAMPLE / "script.py.mako", target / "script.py.mako")
    for filename, text in extra.items():
        (target / "versions" / filename).write_text(text)
    return target
