"""The revision that runs is the file whose checksum is recorded: its bytes, never a
cached compilation of older ones (issue 27: a stale ``.pyc``)."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import os
import py_compile
import sqlite3
from pathlib import Path

from statemigrate.api import upgrade
from statemigrate.registry import get_engine
from statemigrate.testing.upgrade_conformance import (
    EXAMPLE,
    revision_file,
    schema_with,
    seeded,
)


def sqlite_tables(path: Path) -> set[str]:
    with sqlite3.connect(path) as db:
        return {r[0] for r in db.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}


def recorded_checksums(path: Path) -> dict[str, str]:
    with sqlite3.connect(path) as db:
        (raw,) = db.execute(
            "SELECT value FROM __statemigrate__ WHERE key = 'revision_checksums'"
        ).fetchone()
    return json.loads(raw)


def test_a_stale_pyc_beside_a_changed_revision_is_not_run(tmp_path: Path) -> None:
    """v1 compiled into ``__pycache__``, then replaced by v2 of the same size with v1's
    mtime: the pyc looks fresh to Python's import, which would run v1. The upgrade
    runs v2 and records v2's checksum."""
    spec = seeded(get_engine("sqlite"), tmp_path, events=5)
    store = Path(spec.split(":", 1)[1])
    upgrade(spec, EXAMPLE, digests=False)
    v1 = revision_file("0006", "0005", "op.create_table('made_by_v1')")
    v2 = v1.replace("made_by_v1", "made_by_v2")
    assert len(v1.encode()) == len(v2.encode())
    schema = schema_with(tmp_path, {"0006_made.py": v1})
    rev = schema / "versions" / "0006_made.py"
    # The pyc a first load writes (made here, as PYTHONDONTWRITEBYTECODE may be set).
    pyc = importlib.util.cache_from_source(str(rev))
    py_compile.compile(str(rev), cfile=pyc, doraise=True)
    was = rev.stat()
    rev.write_text(v2)
    os.utime(rev, ns=(was.st_atime_ns, was.st_mtime_ns))
    # The premise, from Alembic's own loader: the stale pyc is what it runs.
    from alembic.util.pyfiles import load_module_py

    assert "made_by_v1" in load_module_py("stale_check", rev).upgrade.__code__.co_consts
    report = upgrade(spec, schema, digests=False)
    assert report.status == "upgraded" and report.to_revisions == ["0006"]
    tables = sqlite_tables(store)
    assert "made_by_v2" in tables and "made_by_v1" not in tables, sorted(tables)
    assert recorded_checksums(store)["0006"] == hashlib.sha256(v2.encode()).hexdigest()
