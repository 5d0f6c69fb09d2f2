"""The upgrade path keeps its promises (hostile cases B5, B8, B9, Q3, Q5, Q6, Q10).

- B5: an upgrade drops only the private tables it recorded; a user's table named
  ``__sm_tmp__1`` survives ``current``, ``check``, an upgrade that rewrites it and one
  that fails.
- Read-only commands never write: ``current``, ``check`` and ``history`` report an
  interrupted upgrade and leave the store's files byte for byte; ``convert`` refuses
  it; only ``upgrade`` finishes it.
- B8: a full disk during an in-place upgrade is exit 5 with one JSON object, and the
  next run (space freed) reaches head.
- B9: an app that has the store open, even idle, is exit 3 naming its pid.
- Q3: SQLite's journal mode is what it was, after success and after failure.
- Q5: a missing store is exit 4, ``"status": "missing"``, nothing created; ``--create``
  makes it (a first install) and brings it to head.
- Q6: SQLite busy errors name the pid.

Stores are real files of each engine with in-place upgrades (``Capabilities.in_place``);
kills use the upgrade's own crash points (``STATEMIGRATE_UPGRADE_CRASH_AT``). Every
subprocess has a generous timeout: a hang fails the test, nothing is timed.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from statemigrate.api import current, upgrade
from statemigrate.cli import main
from statemigrate.errors import StoreBusyError
from statemigrate.model import TableInfo
from statemigrate.registry import engine_names, get_engine, resolve_source
from statemigrate.schema.errors import RevisionFailedError
from statemigrate.schema.journal import CRASH_AT_ENV, CRASH_LOG_ENV
from statemigrate.testing.cli import one_line_error, run_cli
from statemigrate.testing.corruption import copy_store
from statemigrate.testing.filesystems import small_filesystem
from statemigrate.testing.holders import app_holding
from statemigrate.testing.stores import files_sha256, store_exists
from statemigrate.testing.upgrade_conformance import (
    EXAMPLE,
    digest,
    empty_store,
    held_by_app,
    revision_file,
    schema_with,
    seeded,
    table_names,
)

IN_PLACE = [n for n in engine_names() if get_engine(n).capabilities.in_place]
# Engines that switch table by table through the journal: only there can a kill leave
# an upgrade interrupted (the others run a revision in one transaction).
SWITCHED = [n for n in IN_PLACE if not get_engine(n).capabilities.transactional_ddl]
HANG_GUARD = 120  # seconds; a subprocess still running then is a hang, not a slow run


def cli(*args: object):
    """Run the CLI in this process (stdout and stderr apart)."""
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def path_of(spec: str) -> Path:
    return Path(spec.split(":", 1)[1])


def records(spec: str, table: str) -> list[tuple]:
    """Every record of a table, read through the engine's writer (private names included)."""
    eng, path = resolve_source(spec)
    writer = eng.open_writer(path)
    try:
        info = next(t for t in writer.list_tables() if t.name == table)
        return [r for batch in writer.read_batches(info) for r in batch]
    finally:
        writer.close()


def one_json(text: str) -> dict:
    """The one JSON object a --json run prints (json.loads refuses anything more)."""
    return json.loads(text)


# --- B5: a user's table that merely looks private -----------------------------------

USER_TABLE = "__sm_tmp__1"


def store_with_user_table(engine: str, tmp: Path) -> str:
    """A store (no revision) holding the user's tables ``__sm_tmp__1`` and ``events``."""
    eng = get_engine(engine)
    spec = seeded(eng, tmp, events=20)
    writer = eng.open_writer(path_of(spec))
    try:
        for name in (USER_TABLE, "__sm_tmp__2"):
            writer.create_table(TableInfo(name))
            writer.write_batch(TableInfo(name), [(b"k%d" % i, b"mine") for i in range(10)])
        writer.finish()
    finally:
        writer.close()
    return spec


def user_schema(tmp: Path, fail: bool) -> Path:
    """A revision after the example's head that rewrites the user's table (and maybe fails)."""
    body = f"""
        op.rewrite({USER_TABLE!r}, lambda r: (r[0], r[1] + b"!"))
        op.create_table("extra")
        op.put("extra", b"a", b"b")
        {"raise RuntimeError('boom')" if fail else ""}
    """
    extra = {"0006_user.py": revision_file("0006", "0005", body, 'op.drop_table("extra")')}
    return schema_with(tmp, extra, name="failing" if fail else "user")


@pytest.mark.parametrize("engine", IN_PLACE)
def test_user_table_named_like_a_private_one_is_never_dropped(engine: str, tmp_path) -> None:
    spec = store_with_user_table(engine, tmp_path)
    before = files_sha256(engine, path_of(spec))
    r = cli("current", spec)
    assert r.exit_code == 0 and "interrupted" not in r.stdout
    assert f"note: {USER_TABLE}, __sm_tmp__2: named like" in r.stdout
    r = cli("check", spec, "--schema", EXAMPLE, "--json")
    assert r.exit_code == 1 and one_json(r.stdout)["unrecorded_private"] == [
        USER_TABLE,
        "__sm_tmp__2",
    ]
    assert files_sha256(engine, path_of(spec)) == before, "a read-only command wrote"

    # A revision that rewrites the user's table, then fails: the table is as it was.
    with pytest.raises(RevisionFailedError):
        upgrade(spec, user_schema(tmp_path, fail=True))
    assert records(spec, USER_TABLE) == [(b"k%d" % i, b"mine") for i in range(10)]
    assert current(spec).current == ["0005"]

    # The same revision, fixed: rewritten in place, under its own name.
    report = upgrade(spec, user_schema(tmp_path, fail=False))
    assert report.to_revisions == ["0006"]
    assert records(spec, USER_TABLE) == [(b"k%d" % i, b"mine!") for i in range(10)]
    assert records(spec, "__sm_tmp__2") == [(b"k%d" % i, b"mine") for i in range(10)]
    names = table_names(spec)
    assert {USER_TABLE, "__sm_tmp__2", "extra", "events"} <= set(names)
    assert [n for n in names if n.startswith("__sm_tmp__")] == [USER_TABLE, "__sm_tmp__2"]
    found = current(spec)
    assert found.interrupted is None and found.unrecorded_private == [USER_TABLE, "__sm_tmp__2"]


# --- read-only commands on an interrupted upgrade -------------------------------------

# (anchor, label): kill at the first crash point named ``label`` at or after the one
# named ``anchor``. Before the commit point (private tables recorded, nothing switched);
# after a switch step (``events`` dropped, its new content still private); after the
# commit of a revision that only drops (no private table at all).
KILLS = {
    "uncommitted": ("0003 before commit", "0003 before commit"),
    "half_switched": ("0003 committed", "step 1 move"),
    "committed_drop_only": ("0005 committed", "0005 committed"),
}


def crash_labels(engine: str, pristine: Path, tmp: Path) -> tuple[list[str], str]:
    """The crash points of an uninterrupted upgrade to head, and the head's digest."""
    work = tmp / f"labels{pristine.suffix}"
    copy_store(pristine, work)
    log = tmp / "crash-points.log"
    run = run_cli(
        ["upgrade", f"{engine}:{work}", "--schema", EXAMPLE, "--no-digest"],
        env={CRASH_LOG_ENV: str(log)},
        timeout=HANG_GUARD,
    )
    assert run.returncode == 0, run.stderr
    labels = [line.split(" ", 1)[1] for line in log.read_text().splitlines()]
    return labels, digest(f"{engine}:{work}")


def kill_point(labels: list[str], anchor: str, label: str) -> int:
    start = labels.index(anchor)
    return start + labels[start:].index(label) + 1  # crash points count from 1


def killed_store(engine: str, tmp: Path, kill: str) -> tuple[str, str, bool]:
    """A store whose upgrade to head was killed at ``kill``; its spec, the head digest,
    and whether the revision had committed (its stamp is the new revision)."""
    pristine = path_of(seeded(get_engine(engine), tmp, events=60, name="pristine"))
    labels, head = crash_labels(engine, pristine, tmp)
    anchor, label = KILLS[kill]
    point = kill_point(labels, anchor, label)
    work = tmp / f"work{pristine.suffix}"
    copy_store(pristine, work)
    spec = f"{engine}:{work}"
    run = run_cli(
        ["upgrade", spec, "--schema", EXAMPLE, "--no-digest"],
        env={CRASH_AT_ENV: str(point)},
        timeout=HANG_GUARD,
    )
    assert run.returncode == -9, f"not killed at {labels[point - 1]}: {run.stderr}"
    return spec, head, "committed" in anchor


def _kill_params() -> list:
    out = []
    for engine in SWITCHED:
        for kill in KILLS:
            out.append(pytest.param(engine, kill, id=f"{engine}-{kill}"))
    return out


@pytest.mark.parametrize(("engine", "kill"), _kill_params())
def test_interrupted_upgrade_is_reported_never_finished_by_a_query(
    engine: str, kill: str, tmp_path
) -> None:
    spec, head, committed = killed_store(engine, tmp_path, kill)
    path = path_of(spec)
    before = files_sha256(engine, path)

    r = cli("current", spec)
    assert r.exit_code == 0 and "(interrupted)" in r.stdout, r.stdout
    assert "run `statemigrate upgrade` (or `downgrade`) to finish it" in r.stdout
    found = one_json(cli("current", spec, "--json").stdout)["interrupted"]
    assert found["committed"] is committed and found["to"] == [KILLS[kill][0][:4]]
    r = cli("check", spec, "--schema", EXAMPLE)
    assert r.exit_code == 1 and "was interrupted" in r.stdout
    r = cli("check", spec, "--schema", EXAMPLE, "--json")
    assert r.exit_code == 1 and one_json(r.stdout)["ok"] is False
    assert cli("history", "--schema", EXAMPLE).exit_code == 0

    # convert refuses what would be a copy of a half-switched store, before writing.
    out = tmp_path / "copy.sqlite"
    r = cli("convert", "-q", spec, f"sqlite:{out}")
    assert r.exit_code == 4 and "interrupted" in r.stderr, r.stderr
    assert not store_exists("sqlite", out) and not out.with_name(out.name + ".partial").exists()
    # checksum and verify refuse to digest it; inspect describes it and says so (Q10).
    for args in (["checksum", spec], ["verify", spec, spec]):
        r = cli(*args)
        assert r.exit_code == 4 and "interrupted" in r.stderr, (args, r.stderr)
    r = cli("inspect", spec, "--json")
    assert r.exit_code == 0, r.stderr
    assert one_json(r.stdout)["upgrade_interrupted"]["committed"] is committed
    assert files_sha256(engine, path) == before, "a read-only command changed the store"

    # Only upgrade finishes it, and reaches the head an uninterrupted run reaches.
    r = cli("upgrade", spec, "--schema", EXAMPLE)
    assert r.exit_code == 0 and r.stdout.startswith("recovered: "), r.stdout
    assert digest(spec) == head
    assert current(spec).interrupted is None
    assert not [n for n in table_names(spec) if n.startswith("__sm_tmp__")]


@pytest.mark.parametrize("engine", [n for n in IN_PLACE if n not in SWITCHED])
def test_kill_inside_a_transactional_revision_leaves_nothing_interrupted(
    engine: str, tmp_path
) -> None:
    spec, head, _ = killed_store(engine, tmp_path, "half_switched")
    before = files_sha256(engine, path_of(spec))
    r = cli("current", spec, "--json")
    assert r.exit_code == 0
    report = one_json(r.stdout)
    assert report["interrupted"] is None and report["current"] == ["0002"]
    assert files_sha256(engine, path_of(spec)) == before, "current changed the store"
    assert cli("upgrade", spec, "--schema", EXAMPLE).exit_code == 0
    assert digest(spec) == head


# --- B8: a full disk ---------------------------------------------------------------


def _full_disk_params() -> list:
    """Each in-place engine; strict xfail where it declares the one-line check a limit."""
    out = []
    for name in IN_PLACE:
        reason = get_engine(name).known_limits.get("full_disk_one_line")
        marks = (
            [pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)] if reason else []
        )
        out.append(pytest.param(name, id=name, marks=marks))
    return out


def fill(fs: Path, leave_kib: int) -> Path:
    """Fill the file system but ``leave_kib`` KiB."""
    free = shutil.disk_usage(fs).free // 1024
    filler = fs / "filler"
    filler.write_bytes(bytes(max(free - leave_kib, 0) * 1024))
    return filler


@pytest.mark.heavy
@pytest.mark.parametrize("engine", _full_disk_params())
def test_full_disk_during_upgrade_is_exit_5_with_one_json_object(engine: str, tmp_path) -> None:
    eng = get_engine(engine)
    pristine = path_of(seeded(eng, tmp_path, events=2000, name="pristine"))
    reference = tmp_path / f"reference{pristine.suffix}"
    copy_store(pristine, reference)
    head = upgrade(f"{engine}:{reference}", EXAMPLE).digest_after
    # Room for every engine's whole upgrade once the filler is gone (TurboKV's writer
    # preallocates 32 MiB WAL segments, HelixDB checks for ~6 MB per batch).
    with small_filesystem("96m") as fs:
        store = copy_store(pristine, fs / f"state{pristine.suffix}")
        spec = f"{engine}:{store}"
        header = store.read_bytes()[18:20] if engine == "sqlite" else None
        filler = fill(fs, 50)
        full = run_cli(["upgrade", spec, "--schema", EXAMPLE, "--json"], timeout=HANG_GUARD)
        assert full.returncode == 5, full.stderr
        report = one_json(full.stdout)
        assert report["status"] == "failed" and report["exit_code"] == 5, report
        if header is not None:
            assert store.read_bytes()[18:20] == header, "the journal mode changed"
        filler.unlink()
        run = run_cli(["upgrade", spec, "--schema", EXAMPLE, "--json"], timeout=HANG_GUARD)
        assert run.returncode == 0, run.stderr
        assert one_json(run.stdout)["to"] == ["0005"]
        assert digest(spec) == head
    # Last, once the data is known safe: the failure was one line, the JSON's error.
    assert report["error"] == one_line_error(full).removeprefix("statemigrate: error: ")


@pytest.mark.parametrize("engine", ["sqlite", "rocksdb"])  # one revision's transaction, or not
def test_full_disk_while_a_rekey_spills_its_sort_is_exit_5_and_changes_nothing(
    engine: str, tmp_path
) -> None:
    """The sort's runs (tiny here, so that they spill) cannot be written: exit 5 naming the
    sort, the store as it was, no sort directory left; with room again the rekey runs."""
    eng = get_engine(engine)
    pristine = path_of(seeded(eng, tmp_path, events=4000, name="pristine"))
    tiny = {**os.environ, "STATEMIGRATE_SORT_RUN_BYTES": "1000"}
    args = ["--schema", EXAMPLE, "--to", "0002", "--json"]
    with small_filesystem("16m") as fs:
        store = copy_store(pristine, fs / f"state{pristine.suffix}")
        spec = f"{engine}:{store}"
        before = digest(spec)
        filler = fill(fs, 300)  # the event log's 1.3 MB of runs cannot fit
        full = run_cli(["upgrade", spec, *args], env=tiny, timeout=HANG_GUARD)
        assert full.returncode == 5, full.stderr
        report = one_json(full.stdout)
        assert "spilling a sort run" in report["error"], report
        assert "os error" not in report["error"], report  # the errno once, as Python shows it
        assert "free some space" in report["hint"], report  # not "fix the revision file"
        assert sorted(p.name for p in fs.iterdir() if ".sm-sort-" in p.name) == []
        filler.unlink()
        assert digest(spec) == before and current(spec).current == ["0001"]
        run = run_cli(["upgrade", spec, *args], env=tiny, timeout=HANG_GUARD)
        assert run.returncode == 0, run.stderr
        assert one_json(run.stdout)["to"] == ["0002"]


# --- B9: an app that has the store open ----------------------------------------------


def _app_params() -> list:
    """Each in-place engine; strict xfail where its app cannot be seen (declared)."""
    out = []
    for name in IN_PLACE:
        holder = get_engine(name).app_holder
        reason = "no app declared" if holder is None else holder.unseen
        marks = (
            [pytest.mark.xfail(strict=True, raises=AssertionError, reason=reason)] if reason else []
        )
        out.append(pytest.param(name, id=name, marks=marks))
    return out


def data_sha256(engine: str, path: Path) -> dict[str, str]:
    """sha256 of the store's files but the coordination ones: SQLite's ``-shm`` and LMDB's
    ``lock.mdb``, whose reader table every reader beside a running app writes (LMDB's
    protocol; statemigrate reads the stamp that way before it decides anything)."""
    return {k: v for k, v in files_sha256(engine, path).items() if not k.endswith("lock.mdb")}


@pytest.mark.parametrize("engine", _app_params())
def test_upgrade_refuses_a_store_an_idle_app_has_open(engine: str, tmp_path) -> None:
    spec = seeded(get_engine(engine), tmp_path, events=50)
    path = path_of(spec)
    state_before = _state(spec)
    with app_holding(engine, path) as pid:
        run = run_cli(["upgrade", spec, "--schema", EXAMPLE, "--json"], timeout=HANG_GUARD)
    assert run.returncode == 3, f"exit {run.returncode}: {run.stderr}"
    assert f"store is in use by another process (pid {pid})" in one_line_error(run)
    assert one_json(run.stdout)["status"] == "busy"
    # Compared by content once the app is gone: an app that holds a RocksDB store may
    # flush or rewrite its own OPTIONS/LOG files while it runs, which is not our change.
    assert _state(spec) == state_before, "the store changed under the app"


def _state(spec: str) -> tuple[str, object]:
    """The store's digest (every table) and its stamped revision, read by statemigrate."""
    digest = run_cli(["checksum", spec, "--json"], timeout=HANG_GUARD)
    assert digest.returncode == 0, digest.stderr
    current = run_cli(["current", spec, "--json"], timeout=HANG_GUARD)
    assert current.returncode == 0, current.stderr
    return json.loads(digest.stdout)["digest"], one_json(current.stdout)["current"]


def test_sqlite_idle_in_rollback_mode_cannot_be_seen(tmp_path) -> None:
    """The documented limit: a SQLite connection merely open in rollback mode holds no lock."""
    spec = seeded(get_engine("sqlite"), tmp_path, events=20)
    code = "import apsw, sys, time; c = apsw.Connection(sys.argv[1]); print('ready', flush=True); time.sleep(60)"
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path_of(spec))], stdout=subprocess.PIPE, text=True
    )
    try:
        assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
        assert cli("upgrade", spec, "--schema", EXAMPLE).exit_code == 0
    finally:
        proc.kill()
        proc.wait(timeout=HANG_GUARD)


# --- Q6: SQLite busy errors name the pid --------------------------------------------


def test_sqlite_busy_errors_name_the_pid(tmp_path) -> None:
    eng = get_engine("sqlite")
    spec = seeded(eng, tmp_path, events=20)
    with held_by_app(spec) as pid:
        r = cli("upgrade", spec, "--schema", EXAMPLE, "--json")
        assert r.exit_code == 3 and f"(pid {pid})" in one_json(r.stdout)["error"]
        # The writer's own busy path (a convert --resume, an upgrade that got past the probe).
        with pytest.raises(StoreBusyError, match=rf"in use by another process \(pid {pid}\)"):
            writer = eng.open_writer(path_of(spec))
            try:
                with writer.transaction():
                    pass
            finally:
                writer.close()


# --- Q3: SQLite's journal mode is left as it was ----------------------------------------

MODES = [
    pytest.param(e, m, id=f"{e}-{m}")
    for e in ("sqlite", "libsql", "turso")
    if e in IN_PLACE
    for m in (("wal",) if e == "turso" else ("rollback", "wal"))  # Turso has only WAL
]


@pytest.mark.parametrize("outcome", ["success", "failure"])
@pytest.mark.parametrize(("engine", "mode"), MODES)
def test_journal_mode_is_kept(engine: str, mode: str, outcome: str, tmp_path) -> None:
    import apsw

    spec = seeded(get_engine(engine), tmp_path, events=20)
    path = path_of(spec)
    if mode == "wal":
        conn = apsw.Connection(str(path))
        assert conn.execute("PRAGMA journal_mode=WAL").fetchall() == [("wal",)]
        conn.close()
    header = path.read_bytes()[18:20]
    assert header == (b"\x02\x02" if mode == "wal" else b"\x01\x01")
    if outcome == "success":
        assert upgrade(spec, EXAMPLE).to_revisions == ["0005"]
    else:
        body = 'op.rewrite("events", lambda r: (r[0], b"x"))\nraise RuntimeError("boom")'
        bad = schema_with(tmp_path, {"0006_bad.py": revision_file("0006", "0005", body)})
        with pytest.raises(RevisionFailedError):
            upgrade(spec, bad)
        assert current(spec).current == ["0005"]
    assert path.read_bytes()[18:20] == header


# --- Q5 and the JSON of every path ------------------------------------------------------


@pytest.mark.parametrize("engine", IN_PLACE)
def test_missing_store_is_exit_4_missing_and_nothing_is_created(engine: str, tmp_path) -> None:
    nothing = tmp_path / f"absent.{engine}"
    for verb in (["upgrade"], ["downgrade", "--to", "base"], ["current"], ["check"]):
        args = [verb[0], f"{engine}:{nothing}", *verb[1:], "--json"]
        if verb[0] != "current":
            args += ["--schema", EXAMPLE]
        r = cli(*args)
        assert r.exit_code == 4, (verb, r.output)
        report = one_json(r.stdout)
        assert report["status"] == "missing" and report["exit_code"] == 4
        assert "no store here" in report["error"] and report["hint"]
        assert ("--create" in report["hint"]) is (verb[0] == "upgrade")
    assert os.listdir(tmp_path) == []


@pytest.mark.parametrize("engine", IN_PLACE)
def test_create_makes_a_first_install_and_is_idempotent(engine: str, tmp_path) -> None:
    reference = upgrade(empty_store(get_engine("sqlite"), tmp_path, "reference"), EXAMPLE)
    target = tmp_path / "new" / f"state.{engine}"
    target.parent.mkdir()
    spec = f"{engine}:{target}"
    r = cli("upgrade", spec, "--schema", EXAMPLE, "--create", "--dry-run", "--json")
    assert r.exit_code == 0 and one_json(r.stdout)["status"] == "dry_run"
    assert one_json(r.stdout)["to"] == ["0005"] and os.listdir(target.parent) == []
    r = cli("upgrade", spec, "--schema", EXAMPLE, "--create", "--json")
    assert r.exit_code == 0, r.output
    report = one_json(r.stdout)
    assert report["created"] is True and report["status"] == "upgraded"
    assert report["from"] == [] and report["to"] == ["0005"]
    assert report["digest_after"] == reference.digest_after == digest(spec)
    r = cli("upgrade", spec, "--schema", EXAMPLE, "--create", "--json")
    assert r.exit_code == 0 and one_json(r.stdout)["status"] == "up_to_date"
    assert one_json(r.stdout)["created"] is False


def test_create_refuses_before_making_anything(tmp_path) -> None:
    for spec, code in (
        (f"sqlite:{tmp_path / 'no-such-dir' / 'state.sqlite'}", 5),
        (f"jsonl:{tmp_path / 'state.jsonl'}", 2),  # no in-place upgrades: nothing to make
        (str(tmp_path / "state.unknown-suffix"), 2),
    ):
        r = cli("upgrade", spec, "--schema", EXAMPLE, "--create", "--json")
        assert r.exit_code == code and one_json(r.stdout)["exit_code"] == code, r.output
    assert os.listdir(tmp_path) == []


def test_internal_error_still_prints_one_json_object(tmp_path, monkeypatch) -> None:
    from statemigrate.schema import runner

    def broken(*_args, **_kwargs):
        raise ValueError("a bug")

    spec = seeded(get_engine("sqlite"), tmp_path, events=10)
    monkeypatch.setattr(runner, "_step_json", broken)  # a bug in statemigrate, not in a store
    r = cli("upgrade", spec, "--schema", EXAMPLE, "--json")
    assert r.exit_code == 70
    report = one_json(r.stdout)
    assert report["status"] == "error" and report["exit_code"] == 70
    assert "ValueError: a bug" in report["error"] and "report it" in report["hint"]
    assert r.stderr.startswith("statemigrate: error: internal error: ValueError: a bug")


def test_history_of_a_missing_schema_prints_one_json_object(tmp_path) -> None:
    r = cli("history", "--schema", tmp_path / "nope", "--json")
    assert r.exit_code == 2
    assert one_json(r.stdout)["status"] == "usage_error"


@pytest.mark.parametrize("engine", IN_PLACE)
def test_the_backup_is_durable_before_the_first_revision_runs(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every file of ``--backup`` and its directory are fsynced before the first revision
    starts: after a power loss during the upgrade the backup is whole (it was written
    through the page cache and never synced, so it could be lost while the upgrade's
    commits were not)."""
    from statemigrate.testing.phases import Phases

    eng = get_engine(engine)
    spec = seeded(eng, tmp_path, events=20)
    backup = tmp_path / "backups" / f"before{eng.suffixes[0] if eng.suffixes else ''}"
    backup.parent.mkdir()
    synced: list[tuple[int, str]] = []
    progress = Phases()
    real_fsync = os.fsync

    def recording_fsync(fd: int) -> None:
        # The backup is synced as PATH.partial, then renamed: its files under their names.
        path = os.path.realpath(f"/proc/self/fd/{fd}").replace(
            f"{backup.name}.partial", backup.name
        )
        synced.append((len(progress.phases), path))
        real_fsync(fd)

    monkeypatch.setattr(os, "fsync", recording_fsync)
    upgrade(spec, EXAMPLE, to="0002", backup=backup, progress=progress, digests=False)
    first_revision = next(i for i, p in enumerate(progress.phases) if p.startswith("revision "))
    before = {path for at, path in synced if at <= first_revision}
    files = [Path(root) / f for root, _, names in os.walk(backup) for f in names]
    wanted = {os.path.realpath(p) for p in (files if backup.is_dir() else [backup])}
    wanted |= {os.path.realpath(backup.parent)}
    assert wanted <= before, sorted(wanted - before)
