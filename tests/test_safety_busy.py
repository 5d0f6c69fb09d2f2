"""Stores held by a running app (a real process with the engine's own driver), per engine.

The app is :mod:`statemigrate.testing.holders`: a separate process that opens the store
the way an application does and sits idle. What the contract says then:

- a source whose engine lets readers run beside an app (SQLite and libSQL in WAL mode,
  LMDB, HelixDB through a private image, a jsonl dump) is read from one consistent
  snapshot: the result equals the store;
- a source whose app holds a lock that readers must respect (RocksDB's LOCK, redb's
  file lock, Turso's whole-file lock) is refused with exit 3 and the app's real pid;
- a destination held open is never replaced: exit 3 with the app's pid, nothing left;
- an upgrade of a store the app holds is refused with exit 3 (README, note (*)).

No time bounds: every command runs under a generous hang guard that fails the test as
a hang (``run_cli``'s timeout), never under a stopwatch.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.cli import describe, one_line_error, run_cli
from statemigrate.testing.holders import app_holding, running
from statemigrate.testing.stores import build_store, digest_of, leftovers, spec, store_file
from statemigrate.testing.upgrade_conformance import EXAMPLE, EXPECTED, seeded

HANG_GUARD = 120  # seconds: a command still running then has hung on the app's lock

# Engines that can upgrade in place (the rest refuse with exit 2 before looking).
IN_PLACE = [n for n in engine_names() if get_engine(n).capabilities.in_place]


def blocks_readers(engine: str) -> bool:
    """The engine's app keeps readers out (declared: ``AppHolder.blocks_readers``)."""
    holder = get_engine(engine).app_holder
    return holder is not None and holder.blocks_readers


def marked(kind: str, names: list[str] | None = None) -> list:
    """One param per engine, strict-xfailed (AssertionError) where the engine declares it
    cannot be seen: no app at all, or an app that leaves no trace (``AppHolder.unseen``)
    for the overwrite and upgrade tests."""
    out = []
    for name in names if names is not None else engine_names():
        holder = get_engine(name).app_holder
        reason = "the engine declares no app that holds its stores" if holder is None else ""
        if holder is not None and kind != "source":
            reason = holder.unseen
        marks = (
            [pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)] if reason else []
        )
        out.append(pytest.param(name, marks=marks, id=name))
    return out


def assert_busy(run, pid: int) -> None:
    """Exit 3, one line in the contract's words, naming the app's real pid."""
    assert run.returncode == 3, describe(run)
    line = one_line_error(run)
    assert "store is in use by another process" in line, line
    assert f"pid {pid}" in line, line


@pytest.mark.parametrize("engine", marked("source"))
def test_source_held_by_another_process(engine: str, tmp_path: Path) -> None:
    store = store_file(engine, tmp_path, "app state")
    digest = build_store(engine, store, 3_000)
    out = store_file("sqlite", tmp_path, "out")
    with app_holding(engine, store) as pid:
        run = run_cli(
            ["convert", "--quiet", spec(engine, store), spec("sqlite", out)], timeout=HANG_GUARD
        )
        summed = run_cli(["checksum", spec(engine, store)], timeout=HANG_GUARD)
    if blocks_readers(engine):
        assert_busy(run, pid)
        assert_busy(summed, pid)
        assert not out.exists() and leftovers(out) == []
    else:
        # Read beside the app from one snapshot: exactly the store's content.
        assert run.returncode == 0, describe(run)
        assert digest_of("sqlite", out) == digest
        assert summed.returncode == 0, describe(summed)
        assert digest in summed.stdout, summed.stdout


def test_sqlite_rollback_journal_held_in_a_write_gets_exit_3_with_pid(tmp_path: Path) -> None:
    store = store_file("sqlite", tmp_path, "app")
    build_store("sqlite", store, 1_000)
    app = (
        "import apsw, sys\n"
        "c = apsw.Connection(sys.argv[1])\n"
        "c.execute('PRAGMA journal_mode=DELETE')\n"
        "c.execute('BEGIN EXCLUSIVE')\n"
        "c.execute('CREATE TABLE app_scratch (x)')\n"
        "print('ready', flush=True)\n"
        "sys.stdin.read()\n"
    )
    out = tmp_path / "o.rocksdb"
    with running(app, [store]) as pid:
        run = run_cli(
            ["convert", "--quiet", spec("sqlite", store), spec("rocksdb", out)],
            timeout=HANG_GUARD,
        )
    assert_busy(run, pid)
    assert not out.exists() and leftovers(out) == []


def test_sqlite_wal_is_read_from_one_snapshot_while_the_app_writes(tmp_path: Path) -> None:
    """The app commits pairs (one record in each of two tables per transaction) while we
    convert: the result has equal counts in both tables, whatever moment it saw."""
    store = store_file("sqlite", tmp_path, "app")
    build_store("sqlite", store, 1_000)
    # The app says "ready" after its first commit, so the snapshot holds at least one pair;
    # it then writes until it is killed.
    app = (
        "import apsw, sys\n"
        "c = apsw.Connection(sys.argv[1])\n"
        "c.execute('PRAGMA journal_mode=WAL')\n"
        "for t in ('a', 'b'):\n"
        "    c.execute(f'CREATE TABLE IF NOT EXISTS {t} (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL)"
        " WITHOUT ROWID')\n"
        "i = 0\n"
        "while True:\n"
        "    with c:\n"
        "        for j in range(50):\n"
        "            k = (i * 50 + j).to_bytes(8, 'big')\n"
        "            c.execute('INSERT INTO a VALUES (?, ?)', (k, b'x' * 100))\n"
        "            c.execute('INSERT INTO b VALUES (?, ?)', (k, b'y' * 100))\n"
        "    if i == 0:\n"
        "        print('ready', flush=True)\n"
        "    i += 1\n"
    )
    out = store_file("jsonl", tmp_path, "out")
    with running(app, [store]):
        run = run_cli(
            ["convert", "--quiet", "--json", spec("sqlite", store), spec("jsonl", out)],
            timeout=HANG_GUARD,
        )
        inspect = run_cli(["inspect", spec("sqlite", store)], timeout=HANG_GUARD)
    assert run.returncode == 0, describe(run)
    tables = {t["name"]: t["records"] for t in json.loads(run.stdout)["tables"]}
    assert tables["a"] == tables["b"], tables
    assert tables["a"] >= 50 and tables["a"] % 50 == 0, tables
    assert inspect.returncode == 0, describe(inspect)
    assert "wal" in inspect.stdout.lower(), inspect.stdout


@pytest.mark.parametrize("engine", marked("overwrite"))
def test_overwrite_of_a_destination_held_open_is_refused(engine: str, tmp_path: Path) -> None:
    src = store_file("sqlite", tmp_path, "src")
    build_store("sqlite", src, 2_000, seed=2)
    final = store_file(engine, tmp_path, "app")
    old = build_store(engine, final, 500, seed=8)
    with app_holding(engine, final) as pid:
        run = run_cli(
            ["convert", "--quiet", "--overwrite", spec("sqlite", src), spec(engine, final)],
            timeout=HANG_GUARD,
        )
    assert_busy(run, pid)
    # Known before writing: nothing was created beside the destination.
    assert leftovers(final) == [], leftovers(final)
    assert digest_of(engine, final) == old


@pytest.mark.parametrize("engine", marked("upgrade", IN_PLACE))
def test_upgrade_of_a_store_the_app_holds_is_refused(engine: str, tmp_path: Path) -> None:
    store = seeded(get_engine(engine), tmp_path)
    path = Path(store.split(":", 1)[1])
    # The app sits inside a write transaction (tests/test_upgrade_safety.py: an idle one).
    with app_holding(engine, path, writing=True) as pid:
        run = run_cli(["upgrade", store, "--schema", str(EXAMPLE), "--json"], timeout=HANG_GUARD)
    assert_busy(run, pid)
    assert json.loads(run.stdout)["status"] == "busy", run.stdout
    # Nothing changed: still at 0001 with the 0001 data.
    assert digest_of(engine, path) == EXPECTED["0001"]
    now = run_cli(["current", store, "--json"], timeout=HANG_GUARD)
    assert now.returncode == 0, describe(now)
    assert json.loads(now.stdout)["current"] == ["0001"], now.stdout
