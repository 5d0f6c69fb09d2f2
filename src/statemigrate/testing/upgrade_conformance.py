"""The upgrade conformance suite: what an engine must do for in-place schema upgrades.

Each case is ``case(engine, tmp_path)`` and raises AssertionError when the engine
does not conform. ``tests/test_upgrade.py`` runs every case against every
registered engine; an engine that does not declare ``Capabilities.in_place`` runs
them as ``xfail(strict=True)`` (see :func:`xfail_reason`), so a new engine joins
as soon as it declares the capability. The example schema (:mod:`.example`) and its
seeding script are the workload; the verbs are :mod:`statemigrate.api`'s.
"""

from __future__ import annotations

import contextlib
import sqlite3
import subprocess
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, TypeVar

from .. import api
from ..engines.base import Engine
from ..errors import StoreBusyError, UsageError
from ..model import TableInfo, TableKind
from ..registry import resolve_source
from ..schema.errors import RevisionFailedError, RevisionUnknownError
from ..schema.journal import TMP_PREFIX
from .example import (
    EVENTS,
    EXAMPLE,
    EXPECTED,
    digest,
    empty_store,
    revision_file,
    schema_with,
    seed_module,
    seeded,
    store_files,
    table_names,
)
from .killharness import run_harness
from .stores import read_store, store_path

Case = Callable[[type[Engine], Path], None]
CASES: dict[str, Case] = {}
E = TypeVar("E", bound=BaseException)


def case(fn: Case) -> Case:
    CASES[fn.__name__] = fn
    return fn


# Cases that need another process's hold on the store to be seen: an engine whose
# ``app_holder`` declares it ``unseen`` (no lock file) fails them, as the busy tests expect.
HOLDER_CASES = ("busy_store_is_refused",)


def xfail_reason(engine: type[Engine], case: str | None = None) -> str | None:
    """Why an engine is expected to fail the suite (or its case ``case``), or None when it must pass."""
    if not engine.capabilities.in_place:
        if engine.name == "jsonl":
            return "a jsonl dump is an archive, not a store an app runs on: no in-place upgrades"
        return f"the {engine.name} engine does not declare Capabilities.in_place yet"
    holder = engine.app_holder
    if case in HOLDER_CASES and holder is not None and holder.unseen:
        return holder.unseen
    return None


def xfail_raises(engine: type[Engine]) -> type[BaseException]:
    """The exception an engine named by :func:`xfail_reason` fails the suite with.

    Without ``Capabilities.in_place`` every upgrade is refused up front as a usage error
    (exit 2), so a strict xfail can say exactly what it expects; a holder that cannot be
    seen fails the case's assertion that the upgrade was refused.
    """
    return UsageError if not engine.capabilities.in_place else AssertionError


def raised(expected: type[E], what: str, call: Callable[..., Any], *args: Any) -> E:
    """The ``expected`` exception ``call(*args)`` raises; AssertionError saying ``what`` if none."""
    try:
        call(*args)
    except expected as exc:
        return exc
    raise AssertionError(what)


def walk_digests(engine: type[Engine], tmp: Path) -> dict[str, str]:
    """Digest of the example store at each revision, walking up one revision at a time."""
    tmp.mkdir(parents=True, exist_ok=True)
    spec = seeded(engine, tmp, name="walk")
    out = {"0001": digest(spec)}
    while True:
        report = api.upgrade(spec, EXAMPLE, to="+1")
        assert report.status == "upgraded", report.status
        out[report.to_revisions[0]] = report.digest_after  # type: ignore[assignment]
        if report.to_revisions == ["0005"]:
            return out


# --- cases -------------------------------------------------------------------------


@case
def walk_base_head_base(engine: type[Engine], tmp: Path) -> None:
    """base -> 0001 -> ... -> head -> ... -> base, one revision at a time; digests match each way."""
    spec = empty_store(engine, tmp)
    at_base = digest(spec)
    assert api.current(spec).current == []
    up = api.upgrade(spec, EXAMPLE, to="0001")
    assert up.to_revisions == ["0001"] and api.current(spec).current == ["0001"]
    # Fill it as the app would at 0001, then walk.
    eng, path = resolve_source(spec)
    seed = seed_module()
    writer = eng.open_writer(path)
    try:
        writer.write_batch(TableInfo("events"), list(seed.events(EVENTS)))
        writer.write_batch(TableInfo("prefs"), [(b"editor", b"vim"), (b"theme", b"dark")])
        writer.write_batch(
            TableInfo("settings", TableKind.VERSIONED), [(b"a", b"1", 2**64 - 1), (b"b", b"", 0)]
        )
        writer.finish()
    finally:
        writer.close()
    seen = {"0001": digest(spec)}
    for rev in ("0002", "0003", "0004", "0005"):
        report = api.upgrade(spec, EXAMPLE, to="+1")
        assert report.to_revisions == [rev], report.to_revisions
        assert report.digest_after == digest(spec)
        assert not any(n.startswith(TMP_PREFIX) for n in table_names(spec))
        seen[rev] = digest(spec)
    assert len(set(seen.values())) == 5, "every revision changes the state"
    for rev in ("0004", "0003", "0002", "0001"):
        report = api.downgrade(spec, EXAMPLE, to="-1")
        assert report.to_revisions == [rev]
        assert digest(spec) == seen[rev], f"downgrade to {rev} does not restore its state"
    api.downgrade(spec, EXAMPLE, to="base")
    assert api.current(spec).current == []
    assert digest(spec) == at_base


@case
def fixed_digests_at_every_revision(engine: type[Engine], tmp: Path) -> None:
    """At every revision the example store has the contract's fixed digest (:data:`EXPECTED`)."""
    assert walk_digests(engine, tmp / "e") == EXPECTED


@case
def upgrade_at_head_does_nothing(engine: type[Engine], tmp: Path) -> None:
    """At head: status up_to_date, no revision run, the state unchanged."""
    spec = seeded(engine, tmp)
    api.upgrade(spec, EXAMPLE)
    before = digest(spec)
    files = store_files(engine, spec)
    report = api.upgrade(spec, EXAMPLE)
    assert report.status == "up_to_date" and report.revisions == []
    assert store_files(engine, spec) == files, "an upgrade at head changed the store's files"
    assert before == digest(spec)
    # The stamp answers: no digest is computed (the store is not read).
    assert report.digest_before is None and report.digest_after is None


@case
def unknown_revision_changes_nothing(engine: type[Engine], tmp: Path) -> None:
    """A store stamped by a newer app (a revision this schema lacks): exit 1, nothing changed."""
    spec = seeded(engine, tmp)
    newer = schema_with(
        tmp,
        {
            "0006_newer.py": revision_file(
                "0006", "0005", "op.create_table('newer')", "op.drop_table('newer')"
            )
        },
    )
    api.upgrade(spec, newer)
    before = digest(spec)
    files = store_files(engine, spec)
    exc = raised(
        RevisionUnknownError, "an unknown revision was not refused", api.upgrade, spec, EXAMPLE
    )
    assert exc.exit_code == 1 and "0006" in exc.message and "newer" in exc.message
    assert store_files(engine, spec) == files, "a refused upgrade changed the store's files"
    assert digest(spec) == before and api.current(spec).current == ["0006"]


@case
def failed_revision_leaves_the_old_state(engine: type[Engine], tmp: Path) -> None:
    """A revision that fails half-way: the old revision, the old data, no leftovers; a fixed rerun works."""
    body = """
        op.rewrite("events", lambda r: (r[0], b"x"))
        op.create_table("half")
        op.put("prefs", b"zz", b"1", version=1)
        raise RuntimeError("boom")
    """
    broken = schema_with(
        tmp, {"0006_broken.py": revision_file("0006", "0005", body)}, name="broken"
    )
    spec = seeded(engine, tmp)
    api.upgrade(spec, EXAMPLE)
    before = digest(spec)
    exc = raised(
        RevisionFailedError, "the failing revision did not fail", api.upgrade, spec, broken
    )
    assert "0006" in exc.message and "boom" in exc.message
    assert api.current(spec).current == ["0005"]
    assert digest(spec) == before
    assert not any(n.startswith(TMP_PREFIX) for n in table_names(spec))
    (broken / "versions" / "0006_broken.py").write_text(
        revision_file("0006", "0005", 'op.create_table("half")', 'op.drop_table("half")')
    )
    assert api.upgrade(spec, broken).to_revisions == ["0006"]


@case
def dry_run_changes_nothing(engine: type[Engine], tmp: Path) -> None:
    """--dry-run lists the revisions and their operations and changes nothing."""
    spec = seeded(engine, tmp)
    before = digest(spec)
    files = store_files(engine, spec)
    report = api.upgrade(spec, EXAMPLE, dry_run=True)
    assert store_files(engine, spec) == files, "a dry run changed the store's files"
    assert report.status == "dry_run"
    assert [r["revision"] for r in report.revisions] == ["0002", "0003", "0004", "0005"]
    assert any("rekey" in op for op in report.revisions[0]["operations"])
    assert digest(spec) == before and api.current(spec).current == ["0001"]


@case
def stamp_check_and_changed_files(engine: type[Engine], tmp: Path) -> None:
    """stamp sets the revision without running; check sees head, and a file changed after it was applied."""
    spec = empty_store(engine, tmp)
    before = digest(spec)
    schema = schema_with(tmp, {})
    report = api.stamp(spec, schema, "head")
    assert report.to_revisions == ["0005"] and digest(spec) == before
    assert api.current(spec, schema=schema).ok
    (schema / "versions" / "0003_split_event_payloads.py").open("a").write(
        "\n# edited after it was applied\n"
    )
    found = api.current(spec, schema=schema)
    assert not found.ok and [f["revision"] for f in found.changed_files] == ["0003"]
    api.stamp(spec, schema, "0002")
    assert api.current(spec).current == ["0002"]
    assert not api.current(spec, schema=schema).at_head
    api.stamp(spec, schema, "base")
    assert api.current(spec).current == []


@case
def busy_store_is_refused(engine: type[Engine], tmp: Path) -> None:
    """A store held by another writer: StoreBusyError (exit 3), nothing changed.

    The holder is statemigrate's own writer (any engine has one); stores held by a real
    app with the engine's own driver are tests/test_safety_busy.py's (testing.holders).
    """
    spec = seeded(engine, tmp)
    before = digest(spec)
    with held_by_app(spec):
        busy = raised(
            StoreBusyError,
            "the upgrade ran on a store held by another process",
            api.upgrade,
            spec,
            EXAMPLE,
        )
        assert busy.exit_code == 3
    assert digest(spec) == before and api.current(spec).current == ["0001"]


@case
def backup_holds_the_old_store(engine: type[Engine], tmp: Path) -> None:
    """--backup writes an engine-native copy of the store as it was before the upgrade."""
    spec = seeded(engine, tmp)
    before = digest(spec)
    target = store_path(engine, tmp, "backup")
    report = api.upgrade(spec, EXAMPLE, backup=target)
    assert report.backup == str(target) and report.digest_before == before
    assert digest(f"{engine.name}:{target}") == before
    assert api.current(f"{engine.name}:{target}").current == ["0001"]


@case
def operations(engine: type[Engine], tmp: Path) -> None:
    """Every op: rename (a swap too), copy, put/delete, set_versioned/plain, rekey, odd names, records."""
    odd = 'x"; DROP TABLE y; --'
    low = b"" if engine.capabilities.min_key_len == 0 else b"\x00"
    up = f"""
        op.create_table("a")
        op.create_table("b", versioned=True)
        op.create_table({odd!r})
        for i in range(50):
            op.put("a", b"k%03d" % i, b"a%d" % i)
            op.put("b", b"k%03d" % i, b"b%d" % i, version=i)
        op.put({odd!r}, {low!r}, b"lowest key")
        op.delete("a", b"k007")
        op.delete("a", b"absent")
        assert [r[0] for r in op.records("a")][:8] == [b"k000", b"k001", b"k002", b"k003", b"k004", b"k005", b"k006", b"k008"]
    """
    up2 = """
        op.rename_table("a", "tmp")
        op.set_plain("b")
        op.rename_table("b", "a")
        op.rename_table("tmp", "b")
        op.set_versioned("b", 7)
        op.copy_table("a", "c")
        op.rekey("c", lambda r: r[0][::-1])
        op.rewrite("c", lambda r: None if r[0].startswith(b"0") else (r[0], r[1] + b"!"))
        op.put("a", b"k000", b"replaced")
        assert op.has_table("c") and sorted(op.tables())[:3] == ["a", "b", "c"]
    """
    schema = schema_with(
        tmp,
        {
            "r1.py": revision_file("r1", None, up, "pass"),
            "r2.py": revision_file("r2", "r1", up2, "pass"),
        },
        base=None,
    )
    spec = empty_store(engine, tmp)
    api.upgrade(spec, schema)
    eng, path = resolve_source(spec)
    got = read_store(eng, path)["tables"]
    a = [(b"k%03d" % i, b"b%d" % i) for i in range(50)]
    a[0] = (b"k000", b"replaced")
    b = [(b"k%03d" % i, b"a%d" % i, 7) for i in range(50) if i != 7]
    c = sorted(
        (k[::-1], v + b"!")
        for k, v in [(b"k%03d" % i, b"b%d" % i) for i in range(50)]
        if not k[::-1].startswith(b"0")
    )
    assert got["a"] == ("plain", a)
    assert got["b"] == ("versioned", b)
    assert got["c"] == ("plain", c)
    assert got[odd] == ("plain", [(low, b"lowest key")])
    assert set(got) == {"a", "b", "c", odd}


@case
def bad_revisions_are_named(engine: type[Engine], tmp: Path) -> None:
    """Duplicate keys from rekey, out-of-order keys from rewrite: errors naming the revision."""
    for rev, body, words in (
        ("dup", 'op.rekey("events", lambda r: b"same")', "two records"),
        ("order", 'op.rewrite("events", lambda r: (r[0][::-1], r[1]))', "out of order"),
        ("table", 'op.drop_table("nope")', "no table 'nope'"),
    ):
        schema = schema_with(tmp, {f"{rev}.py": revision_file(rev, "0001", body)}, name=f"s-{rev}")
        for extra in (schema / "versions").glob("000[2-5]*"):
            extra.unlink()
        spec = seeded(engine, tmp, events=40, name=f"st-{rev}")
        before = digest(spec)
        exc = raised(
            RevisionFailedError, f"revision {rev} should have failed", api.upgrade, spec, schema
        )
        assert rev in exc.message and words in exc.message, exc.message
        assert digest(spec) == before and api.current(spec).current == ["0001"]


@case
def execute_only_on_sql_engines(engine: type[Engine], tmp: Path) -> None:
    """op.execute runs SQL on SQL engines; elsewhere it fails naming the revision, nothing changed."""
    body = """op.execute("UPDATE prefs SET value = CAST(upper(value) AS BLOB)")"""
    schema = schema_with(tmp, {"sql1.py": revision_file("sql1", "0001", body)})
    for extra in (schema / "versions").glob("000[2-5]*"):
        extra.unlink()
    spec = seeded(engine, tmp, events=10)
    before = digest(spec)
    if engine.capabilities.sql:
        api.upgrade(spec, schema)
        eng, path = resolve_source(spec)
        assert read_store(eng, path)["tables"]["prefs"][1][0] == (b"editor", b"VIM")
        return
    exc = raised(
        RevisionFailedError, "op.execute ran on an engine without SQL", api.upgrade, spec, schema
    )
    assert "sql1" in exc.message and "SQL" in exc.message
    assert digest(spec) == before


@case
def convert_carries_the_stamp(engine: type[Engine], tmp: Path) -> None:
    """convert to SQLite keeps the revision: the converted store is at head, in alembic_version too."""
    spec = seeded(engine, tmp, events=20)
    api.upgrade(spec, EXAMPLE)
    dst = tmp / "converted.sqlite"
    api.convert(spec, f"sqlite:{dst}")
    assert api.current(f"sqlite:{dst}", schema=EXAMPLE).ok
    # Read with the standard library's sqlite3: what Alembic itself would find there.
    with contextlib.closing(sqlite3.connect(f"{dst.as_uri()}?mode=ro", uri=True)) as conn:
        rows = conn.execute("SELECT version_num FROM alembic_version").fetchall()
    assert [r[0] for r in rows] == ["0005"]


@case
def crash_points_recover(engine: type[Engine], tmp: Path) -> None:
    """A few kill -9 points in a small upgrade (the full harness is tests/test_upgrade_kill.py)."""
    result = run_harness(engine.name, tmp, events=2_000, points=8)
    assert result.failures == [], result.failures


# --- a store held by a running app -------------------------------------------------

HOLDER = """
import sys, time, contextlib
from statemigrate.registry import resolve_source
eng, path = resolve_source(sys.argv[1])
w = eng.open_writer(path)
cm = w.transaction() if eng.capabilities.transactional_ddl else contextlib.nullcontext()
cm.__enter__()
print("ready", flush=True)
time.sleep(60)
"""


@contextlib.contextmanager
def held_by_app(spec: str) -> Iterator[int]:
    """Another process holds the store open for writing (inside a write transaction where it has them)."""
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLDER, spec],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        line = proc.stdout.readline() if proc.stdout else ""
        if line.strip() != "ready":
            raise AssertionError(
                f"the holder did not start: {proc.stderr.read() if proc.stderr else ''}"
            )
        yield proc.pid
    finally:
        proc.kill()
        proc.wait()


__all__ = [
    "CASES",
    "EVENTS",
    "EXAMPLE",
    "EXPECTED",
    "digest",
    "empty_store",
    "held_by_app",
    "revision_file",
    "schema_with",
    "seeded",
    "table_names",
    "xfail_raises",
    "xfail_reason",
]
