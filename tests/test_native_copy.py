"""Same-engine converts by the engine's own copy: SQLite's backup API, LMDB's compacting
copy, a RocksDB checkpoint, redb's file copy (its format upgrade: test_native_copy_redb.py).

Which path ran shows in the progress phases ("copying natively (…)" or "converting").
The native path must give exactly what the batch path gives (tables, kinds, records,
metadata, the report's counts, bytes and digests), keep every safety rule of a convert
(kill -9 then --resume, Ctrl-C, permissions, --no-verify), and step aside whenever
the copy would carry something the batch path leaves out.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import stat
import subprocess
import time
from pathlib import Path

import apsw
import lmdb
import pytest

from statemigrate import checksum, convert
from statemigrate.errors import InterruptedByUser
from statemigrate.model import TableInfo, TableKind
from statemigrate.registry import get_engine
from statemigrate.testing.cli import cli_command, describe, run_and_kill, run_cli
from statemigrate.testing.phases import Phases
from statemigrate.testing.stores import content_digest, leftovers, read_store, spec, write_store
from statemigrate.testing.workload import write_workload

ENGINES = ["sqlite", "lmdb", "rocksdb", "redb"]
METHOD = {
    "sqlite": "SQLite backup",
    "lmdb": "LMDB compacting copy",
    "rocksdb": "RocksDB checkpoint",
    "redb": "redb file copy",
}
CONTENT = {
    TableInfo("events", TableKind.VERSIONED): [
        (i.to_bytes(4, "big"), b"v" * (i % 50), 2**64 - 1 - i) for i in range(3000)
    ],
    TableInfo("settings"): [(b"k%03d" % i, b"x" * i) for i in range(200)],
    TableInfo("empty"): [],
    TableInfo('x"; DROP TABLE y; --'): [(b"\x00", b""), (b"\xff" * 40, b"\x01")],
}
METADATA = {"schema": b"native-test", "revision": b'["0002"]'}


def store(engine: str, tmp: Path, name: str = "src") -> Path:
    path = tmp / f"{name}.{engine}"
    write_store(get_engine(engine), path, CONTENT, METADATA)
    return path


@pytest.mark.parametrize("engine", ENGINES)
def test_same_engine_convert_is_native_and_exact(engine: str, tmp_path: Path) -> None:
    src = store(engine, tmp_path)
    progress = Phases()
    report = convert(str(src), str(tmp_path / f"dst.{engine}"), progress=progress)

    assert progress.native()
    assert f"copying natively ({METHOD[engine]})" in progress.phases
    assert "verifying" in progress.phases and report.verified
    eng = get_engine(engine)
    assert read_store(eng, tmp_path / f"dst.{engine}") == read_store(eng, src)
    assert report.store_digest == content_digest(CONTENT)
    assert checksum(str(tmp_path / f"dst.{engine}")).digest == report.store_digest
    assert leftovers(tmp_path / f"dst.{engine}") == []

    # The batch loop (forced by naming every table) reports the same tables.
    batch = Phases()
    names = [t.name for t in CONTENT]
    again = convert(str(src), str(tmp_path / f"batch.{engine}"), tables=names, progress=batch)
    assert not batch.native()
    assert [t.to_json() for t in again.tables] == [t.to_json() for t in report.tables]
    assert again.records == report.records == 3202 and again.bytes == report.bytes > 0


@pytest.mark.parametrize("engine", ENGINES)
def test_cli_json_report_of_a_native_convert(engine: str, tmp_path: Path) -> None:
    src = store(engine, tmp_path)
    run = run_cli(["convert", "--json", src, tmp_path / f"dst.{engine}"])
    assert run.returncode == 0, describe(run)
    out = json.loads(run.stdout)
    assert out["status"] == "converted" and out["verified"] is True
    assert out["records"] == 3202 and out["store_digest"] == content_digest(CONTENT)
    tables = {t["name"]: t for t in out["tables"]}
    assert tables["settings"]["records"] == 200
    assert tables["settings"]["bytes"] == sum(
        len(k) + len(v) for k, v in CONTENT[TableInfo("settings")]
    )


def test_sqlite_copy_opens_in_the_sqlite_shell_in_rollback_mode(tmp_path: Path) -> None:
    src = tmp_path / "src.sqlite"
    write_store(get_engine("sqlite"), src, CONTENT, METADATA)
    conn = apsw.Connection(str(src))
    conn.execute("PRAGMA journal_mode=WAL")  # the copy must not inherit it
    conn.close()
    dst = tmp_path / "dst.sqlite"
    assert convert(str(src), str(dst), progress=(p := Phases())).verified and p.native()

    assert dst.read_bytes()[18:20] == b"\x01\x01"  # rollback journal, as a built store
    query = "PRAGMA integrity_check; SELECT count(*) FROM events; SELECT value FROM __statemigrate__ WHERE key = 'schema';"
    if shutil.which("sqlite3"):
        out = subprocess.run(
            ["sqlite3", str(dst), query], capture_output=True, text=True, check=True
        ).stdout.split()
    else:
        c = apsw.Connection(str(dst))
        out = [str(r[0]) for r in c.execute(query)]
        c.close()
    assert out == ["ok", "3000", "native-test"]


def test_lmdb_copy_opens_with_the_driver(tmp_path: Path) -> None:
    src = store("lmdb", tmp_path)
    dst = tmp_path / "dst.lmdb"
    assert convert(str(src), str(dst), progress=(p := Phases())).verified and p.native()

    env = lmdb.open(str(dst), readonly=True, lock=False, max_dbs=16)
    try:
        with env.begin() as txn:
            db = env.open_db(b"settings", txn=txn, create=False)
            assert txn.stat(db)["entries"] == 200
            assert txn.get(b"k007", db=db) == b"x" * 7
            events = env.open_db(b"events", txn=txn, create=False)
            # versioned: the 8-byte big-endian version before the value
            assert (
                txn.get((5).to_bytes(4, "big"), db=events)
                == (2**64 - 6).to_bytes(8, "big") + b"v" * 5
            )
    finally:
        env.close()


def test_lmdb_copy_keeps_the_sources_map_size(tmp_path: Path) -> None:
    """As ``mdb_copy -c``: an app that opens the copy without a map size gets the source's."""
    src = store("lmdb", tmp_path)
    env = lmdb.open(str(src), map_size=1 << 31, max_dbs=16)  # an app that grew the map
    with env.begin(write=True) as txn:
        txn.put(b"theme", b"dark", db=env.open_db(b"settings", txn=txn))
    env.close()
    dst = tmp_path / "dst.lmdb"
    assert convert(str(src), str(dst), progress=(p := Phases())).verified and p.native()

    def map_size(path: Path) -> int:
        env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=16, map_size=0)
        try:
            return int(env.info()["map_size"])
        finally:
            env.close()

    assert map_size(dst) == map_size(src) == 1 << 31
    assert read_store(get_engine("lmdb"), dst) == read_store(get_engine("lmdb"), src)


@pytest.mark.parametrize("engine", ENGINES)
def test_tables_or_options_take_the_batch_path(engine: str, tmp_path: Path) -> None:
    src = store(engine, tmp_path)
    eng = get_engine(engine)
    progress = Phases()
    convert(str(src), str(tmp_path / f"some.{engine}"), tables=["settings"], progress=progress)
    assert not progress.native()
    assert set(read_store(eng, tmp_path / f"some.{engine}")["tables"]) == {"settings"}
    if engine == "sqlite":  # the only one of the two with options
        progress = Phases()
        convert(
            str(src),
            str(tmp_path / "opt.sqlite"),
            source_options={"skip_foreign_tables": True},
            progress=progress,
        )
        assert not progress.native()
        assert read_store(eng, tmp_path / "opt.sqlite") == read_store(eng, src)


def test_a_sqlite_foreign_table_is_left_out_by_the_batch_path(tmp_path: Path) -> None:
    src = store("sqlite", tmp_path)
    conn = apsw.Connection(str(src))
    conn.execute("CREATE TABLE app_log (id INTEGER PRIMARY KEY, line TEXT)")
    conn.execute("INSERT INTO app_log (line) VALUES ('hello')")
    conn.close()
    dst = tmp_path / "dst.sqlite"
    run = run_cli(["convert", "--skip-foreign-tables", src, dst])
    assert run.returncode == 0, describe(run)
    assert "copying natively" not in run.stderr and "converting" in run.stderr

    conn = apsw.Connection(str(dst))
    names = {r[0] for r in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    conn.close()
    assert "app_log" not in names and "settings" in names
    eng = get_engine("sqlite")
    assert read_store(eng, dst) == read_store(eng, src, {"skip_foreign_tables": True})


@pytest.mark.parametrize(
    "sql",
    [
        "CREATE INDEX by_value ON settings (value)",
        "CREATE VIEW v AS SELECT key FROM settings",
        "CREATE TRIGGER t AFTER INSERT ON settings BEGIN SELECT 1; END",
    ],
    ids=["index", "view", "trigger"],
)
def test_sqlite_schema_objects_outside_the_layout_take_the_batch_path(
    sql: str, tmp_path: Path
) -> None:
    src = store("sqlite", tmp_path)
    conn = apsw.Connection(str(src))
    conn.execute(sql)
    conn.close()
    dst = tmp_path / "dst.sqlite"
    progress = Phases()
    convert(str(src), str(dst), progress=progress)
    assert not progress.native()
    conn = apsw.Connection(str(dst))
    kinds = {
        r[0] for r in conn.execute("SELECT type FROM sqlite_schema WHERE name NOT LIKE 'sqlite_%'")
    }
    conn.close()
    assert kinds == {"table"}
    assert read_store(get_engine("sqlite"), dst) == read_store(get_engine("sqlite"), src)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_source_carrying_a_checkpoint_takes_the_batch_path(engine: str, tmp_path: Path) -> None:
    src = tmp_path / f"src.{engine}"
    stale = {"checkpoint": b'{"table": null, "last_key": null, "so_far": [0, "0"]}'}
    write_store(get_engine(engine), src, CONTENT, {**METADATA, **stale})
    dst = tmp_path / f"dst.{engine}"
    progress = Phases()
    convert(str(src), str(dst), progress=progress)
    assert not progress.native()
    assert "checkpoint" not in read_store(get_engine(engine), dst)["metadata"]


@pytest.mark.parametrize("engine", ENGINES)
def test_a_source_carrying_facts_of_a_table_it_lacks_takes_the_batch_path(
    engine: str, tmp_path: Path
) -> None:
    """A ``table:<name>`` entry of a table the source does not hold is left out by the
    batch loop: a copy of the file would carry it, so the copy steps aside."""
    src = tmp_path / f"src.{engine}"
    ghost = {"table:ghost": b'{"facts": "of a table dropped long ago"}'}
    write_store(get_engine(engine), src, CONTENT, {**METADATA, **ghost})
    assert read_store(get_engine(engine), src)["metadata"]["table:ghost"] == ghost["table:ghost"]
    dst = tmp_path / f"dst.{engine}"
    progress = Phases()
    assert convert(str(src), str(dst), progress=progress).verified
    assert not progress.native()
    got = read_store(get_engine(engine), dst)
    assert "table:ghost" not in got["metadata"] and got["metadata"]["schema"] == b"native-test"
    assert got["tables"] == read_store(get_engine(engine), src)["tables"]


def test_carried_as_is_names_what_the_batch_loop_would_change() -> None:
    """The metadata a copy of the file may carry: everything but a checkpoint and the
    facts of tables not copied (pipeline/native.py's own contract, checked whole)."""
    from statemigrate.pipeline.native import carried_as_is

    typed = TableInfo("typed", meta={"key_type": "u64"})
    plain = TableInfo("plain")
    assert carried_as_is({"schema": b"s", "revision": b"[]"}, [typed, plain])
    assert carried_as_is({"table:typed": b"{}"}, [typed, plain])
    assert not carried_as_is({"table:plain": b"{}"}, [typed, plain])  # no facts: not carried
    assert not carried_as_is({"table:ghost": b"{}"}, [typed, plain])
    assert not carried_as_is({"checkpoint": b"{}"}, [typed, plain])


@pytest.mark.parametrize("engine", ENGINES)
def test_no_verify(engine: str, tmp_path: Path) -> None:
    src = store(engine, tmp_path)
    dst = tmp_path / f"dst.{engine}"
    progress = Phases()
    report = convert(str(src), str(dst), verify=False, progress=progress)
    assert progress.native() and "verifying" not in progress.phases
    # No verification work: the source is not digested (no "reading the source"
    # phase), the copy is the only read, and the report carries no digests.
    assert not any(p.startswith("reading the source") for p in progress.phases), progress.phases
    assert not report.verified and report.store_digest is None
    assert [(t.records, t.bytes, t.digest) for t in report.tables] == [(None, None, None)] * len(
        report.tables
    )
    assert report.records is None and len(report.tables) == len(CONTENT)
    assert read_store(get_engine(engine), dst) == read_store(get_engine(engine), src)
    # What --no-verify left out, checksum gives: the copy's digest is the source's.
    assert checksum(str(dst)).digest == content_digest(CONTENT)


def test_no_verify_on_the_batch_path_counts_but_carries_no_digest(tmp_path: Path) -> None:
    src = store("sqlite", tmp_path)
    dst = tmp_path / "dst.lmdb"
    report = convert(str(src), str(dst), verify=False)
    assert not report.verified and report.store_digest is None
    assert all(t.digest is None for t in report.tables)
    counted = {t.name: t.records for t in report.tables}
    assert counted == {t.name: len(records) for t, records in CONTENT.items()}
    assert checksum(str(dst)).digest == content_digest(CONTENT)


@pytest.mark.parametrize("engine", ENGINES)
def test_a_private_source_gives_a_private_copy(engine: str, tmp_path: Path) -> None:
    src = store(engine, tmp_path)
    files = [src] if src.is_file() else [src, *src.iterdir()]
    for f in files:
        f.chmod(0o700 if f.is_dir() else 0o600)
    dst = tmp_path / f"dst.{engine}"
    assert convert(str(src), str(dst), progress=(p := Phases())).verified and p.native()
    for f in [dst] if dst.is_file() else [dst, *dst.iterdir()]:
        want = 0o700 if f.is_dir() else 0o600
        assert stat.S_IMODE(f.stat().st_mode) == want, f


@pytest.mark.parametrize("engine", ENGINES)
def test_stop_while_reading_the_source_leaves_nothing(engine: str, tmp_path: Path) -> None:
    src = store(engine, tmp_path)
    dst = tmp_path / f"dst.{engine}"
    progress = Phases()
    with pytest.raises(InterruptedByUser, match="before anything was written") as stopped:
        convert(str(src), str(dst), progress=progress, should_stop=lambda: True)
    assert stopped.value.hint is None  # nothing to --resume
    # RocksDB's checkpoint is verified by its read back alone: the source is not walked.
    assert ("reading the source" in progress.phases) is (engine != "rocksdb"), progress.phases
    assert not any(p.startswith("copying natively") for p in progress.phases)
    assert not dst.exists() and not Path(f"{dst}.partial").exists()


@pytest.mark.parametrize("engine", ENGINES)
def test_stop_after_the_copy_resumes_from_the_finished_copy(engine: str, tmp_path: Path) -> None:
    src = store(engine, tmp_path)
    dst = tmp_path / f"dst.{engine}"
    progress = Phases()
    with pytest.raises(InterruptedByUser):
        convert(
            str(src), str(dst), progress=progress, should_stop=lambda: "syncing" in progress.phases
        )
    assert Path(f"{dst}.partial").exists() and Path(f"{dst}.partial.done").exists()
    assert not dst.exists()

    again = Phases()
    report = convert(str(src), str(dst), resume=True, progress=again)
    assert "checking the interrupted destination" in again.phases
    assert not any(p.startswith("copying natively") for p in again.phases)
    assert report.resumed and report.store_digest == content_digest(CONTENT)
    assert read_store(get_engine(engine), dst) == read_store(get_engine(engine), src)
    assert leftovers(dst) == []


def kill_source(engine: str, tmp: Path) -> Path:
    """A store big enough that SQLite's backup takes more than one step (16 MiB)."""
    path = tmp / f"big.{engine}"
    write_workload(get_engine(engine), path, 70_000)
    return path


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("point", ["native copy", "copied", "finished"])
def test_kill_during_the_native_copy_then_resume(engine: str, point: str, tmp_path: Path) -> None:
    src = kill_source(engine, tmp_path)
    dst = tmp_path / f"dst with space.{engine}"
    args = ["convert", spec(engine, src), spec(engine, dst)]
    killed = run_and_kill(args, 120, env={"STATEMIGRATE_CRASH_AT": point})
    assert killed.killed_by(signal.SIGKILL), describe(killed)
    assert "copying natively" in killed.stderr
    partial = Path(f"{dst}.partial")
    assert partial.exists() and not dst.exists()
    if point == "native copy" and engine == "sqlite":
        assert 0 < partial.stat().st_size < src.stat().st_size  # cut short mid-copy

    plain = run_cli(args)  # a .partial is never continued without --resume
    assert plain.returncode == 5, describe(plain)
    resumed = run_cli([*args, "--resume"], timeout=300)
    assert resumed.returncode == 0, describe(resumed)
    if point == "finished":  # the copy was complete and marked: read back and kept
        assert "checking the interrupted destination" in resumed.stderr
        assert "copying natively" not in resumed.stderr
    else:  # no checkpoint, no mark: started over, natively again
        assert "copying natively" in resumed.stderr
    eng = get_engine(engine)
    assert checksum(spec(engine, dst)).digest == checksum(spec(engine, src)).digest
    assert read_store(eng, dst) == read_store(eng, src)
    assert leftovers(dst) == []


def test_a_half_written_lmdb_copy_is_started_over(tmp_path: Path) -> None:
    """An LMDB copy cut short (what a kill during mdb_env_copy leaves) is not trusted."""
    src = kill_source("lmdb", tmp_path)
    dst = tmp_path / "dst.lmdb"
    assert convert(str(src), str(tmp_path / "whole.lmdb")).verified
    partial = Path(f"{dst}.partial")
    partial.mkdir()
    data = (tmp_path / "whole.lmdb" / "data.mdb").read_bytes()
    (partial / "data.mdb").write_bytes(data[: len(data) // 2])

    progress = Phases()
    report = convert(str(src), str(dst), resume=True, progress=progress)
    assert progress.native() and report.verified
    assert read_store(get_engine("lmdb"), dst) == read_store(get_engine("lmdb"), src)
    assert leftovers(dst) == []
    assert not os.path.exists(f"{dst}.partial")


# --- what verification and a damaged source do on the native path --------------------


@pytest.mark.parametrize("engine", ENGINES)
def test_a_copy_unequal_to_the_source_is_refused_and_not_placed(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A copy missing one record (the engine's copy replaced by one that leaves a
    record out) is exit 5 on reading back, never placed."""
    from statemigrate.engines.base import NativeCopy
    from statemigrate.errors import DestinationError

    src = store(engine, tmp_path)
    eng = get_engine(engine)
    short = {t: (recs[1:] if t.name == "settings" else recs) for t, recs in CONTENT.items()}
    monkeypatch.setattr(
        eng,
        "native_copy",
        classmethod(
            lambda cls, reader, options=None: NativeCopy(
                "short", lambda p: write_store(cls, p, short, METADATA)
            )
        ),
    )
    dst = tmp_path / f"dst.{engine}"
    with pytest.raises(DestinationError, match="verification failed for table 'settings'"):
        convert(str(src), str(dst), progress=Phases())
    assert not dst.exists() and leftovers(dst) == []


# How each engine's own copy runs beside the source's digest (pipeline/native.py):
# SQLite outside WAL digests a twin reader while it copies, LMDB and redb walk the
# source's pages during the copy. The plain NativeCopy above takes neither branch.
BRANCH = {"sqlite": "twin", "lmdb": "digest_alongside", "redb": "digest_alongside"}


@pytest.mark.parametrize("engine", sorted(BRANCH))
def test_a_short_copy_beside_the_sources_digest_is_refused_and_not_placed(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The engine's real copy (its twin or its walk kept) replaced by one holding 199 of
    the 200 settings: the source is digested from the source, so it is exit 5, never
    placed "verified" (a source digest taken from the copy would make it equal)."""
    import dataclasses

    from statemigrate.errors import DestinationError

    src = store(engine, tmp_path)
    eng = get_engine(engine)
    real = eng.native_copy
    short = {t: (recs[1:] if t.name == "settings" else recs) for t, recs in CONTENT.items()}
    taken: list[object] = []

    def shortened(cls, reader, options=None):  # type: ignore[no-untyped-def]
        copy = real(reader, options)
        taken.append(copy)
        return dataclasses.replace(copy, run=lambda p, *_stop: write_store(cls, p, short, METADATA))

    monkeypatch.setattr(eng, "native_copy", classmethod(shortened))
    dst = tmp_path / f"dst.{engine}"
    progress = Phases()
    with pytest.raises(DestinationError, match="verification failed for table 'settings'") as err:
        convert(str(src), str(dst), progress=progress)
    assert "199 records read back, 200 written" in err.value.message
    assert progress.native() and "reading the source (beside the copy)" in progress.phases
    (copy,) = taken
    if BRANCH[engine] == "twin":
        assert copy.twin is not None and not copy.digest_alongside
    else:
        assert copy.digest_alongside
    assert not dst.exists() and leftovers(dst) == []


def test_a_checkpoint_of_the_sources_own_bytes_is_verified_by_one_walk(tmp_path: Path) -> None:
    """A RocksDB checkpoint is the snapshot's files: compared byte for byte, the copy's
    read back is the only walk, and its digests are the report's (the expected digest
    is computed from the content written, not by the tool)."""
    src = store("rocksdb", tmp_path)
    dst = tmp_path / "dst.rocksdb"
    progress = Phases()
    report = convert(str(src), str(dst), progress=progress)
    assert progress.native() and report.verified
    assert not any(p.startswith("reading the source") for p in progress.phases), progress.phases
    assert progress.phases.index("verifying") > progress.phases.index("syncing")
    assert report.store_digest == content_digest(CONTENT)
    tables = {t.name: t for t in report.tables}
    assert tables["settings"].records == 200
    assert tables["settings"].bytes == sum(
        len(k) + len(v) for k, v in CONTENT[TableInfo("settings")]
    )
    assert read_store(get_engine("rocksdb"), dst) == read_store(get_engine("rocksdb"), src)


def test_a_checkpoint_that_is_not_the_sources_bytes_is_checked_against_the_source(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The checkpoint replaced by a store holding 199 of the 200 settings: its files
    are not the snapshot's, so the source is walked and compared, and the copy is exit 5,
    never placed (a check that trusted the copy would call it verified)."""
    import dataclasses

    from statemigrate.errors import DestinationError

    src = store("rocksdb", tmp_path)
    eng = get_engine("rocksdb")
    real = eng.native_copy
    short = {t: (recs[1:] if t.name == "settings" else recs) for t, recs in CONTENT.items()}

    def shortened(cls, reader, options=None):  # type: ignore[no-untyped-def]
        copy = real(reader, options)
        assert copy.own_bytes is not None
        return dataclasses.replace(copy, run=lambda p: write_store(cls, p, short, METADATA))

    monkeypatch.setattr(eng, "native_copy", classmethod(shortened))
    dst = tmp_path / "dst.rocksdb"
    progress = Phases()
    with pytest.raises(DestinationError, match="verification failed for table 'settings'") as err:
        convert(str(src), str(dst), progress=progress)
    assert "199 records read back, 200 written" in err.value.message
    assert "reading the source" in progress.phases, progress.phases
    assert not dst.exists() and leftovers(dst) == []


def test_same_bytes_compares_every_byte_and_follows_no_link(tmp_path: Path) -> None:
    from statemigrate.engines.snapshot import same_bytes

    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir(), b.mkdir()
    body = os.urandom(3 << 20)
    (a / "x.sst").write_bytes(body)
    (b / "x.sst").write_bytes(body)
    assert same_bytes(a, b, [Path("x.sst")])
    (b / "x.sst").write_bytes(body[:-1] + bytes([body[-1] ^ 1]))  # the last byte differs
    assert not same_bytes(a, b, [Path("x.sst")])
    (b / "x.sst").write_bytes(body + b"\0")
    assert not same_bytes(a, b, [Path("x.sst")])
    assert not same_bytes(a, b, [Path("missing")])
    (b / "x.sst").unlink()
    (b / "x.sst").symlink_to(a / "x.sst")  # the same bytes, through a link: not followed
    assert not same_bytes(a, b, [Path("x.sst")])
    os.link(a / "x.sst", b / "y.sst")
    (a / "y.sst").symlink_to("x.sst")
    assert not same_bytes(a, b, [Path("y.sst")])


def test_a_damaged_sqlite_source_is_refused_and_its_copy_removed(tmp_path: Path) -> None:
    """SQLite's backup copies a damaged page as it is: the source, digested while it
    copies, finds the damage, and the copy is removed (exit 4, nothing left)."""
    from statemigrate.errors import SourceError

    src = tmp_path / "src.sqlite"
    write_store(
        get_engine("sqlite"),
        src,
        {TableInfo("events"): [(i.to_bytes(4, "big"), b"e" * 300) for i in range(5000)]},
    )
    size = src.stat().st_size
    page = 4096
    with open(src, "r+b") as f:  # the header of a leaf page in the middle of the table
        f.seek((size // page // 2) * page)
        f.write(b"\xff" * 12)
    dst = tmp_path / "dst.sqlite"
    progress = Phases()
    with pytest.raises(SourceError) as err:
        convert(str(src), str(dst), progress=progress)
    assert err.value.exit_code == 4, err.value
    assert "reading the source (beside the copy)" in progress.phases, progress.phases
    assert not dst.exists() and leftovers(dst) == []


def _journal_mode(path: Path, mode: str) -> None:
    conn = apsw.Connection(str(path))
    conn.execute(f"PRAGMA journal_mode={mode}")
    conn.close()


@pytest.mark.parametrize("mode", ["delete", "wal"])
def test_sqlite_source_is_digested_during_its_copy_outside_wal_mode(
    mode: str, tmp_path: Path
) -> None:
    """Outside WAL mode the reader's SHARED lock holds off every commit, so a second
    connection reads the same snapshot while the first copies it; in WAL mode the
    source is read first, then copied, as before."""
    src = store("sqlite", tmp_path)
    _journal_mode(src, mode)
    dst = tmp_path / "dst.sqlite"
    report = convert(str(src), str(dst), progress=(p := Phases()))
    beside = "reading the source (beside the copy)" in p.phases
    assert beside == (mode == "delete"), p.phases
    copying = p.phases.index("copying natively (SQLite backup)")
    assert p.phases.index("reading the source") < copying, p.phases
    assert report.verified and report.store_digest == content_digest(CONTENT)
    assert read_store(get_engine("sqlite"), dst) == read_store(get_engine("sqlite"), src)


def test_an_app_cannot_commit_while_its_store_is_copied_and_digested(tmp_path: Path) -> None:
    """An app writing to the source (rollback mode) while the convert, in another
    process, is held inside its copy: its commit is refused (SQLITE_BUSY), and the
    copy holds the records as they were when the convert began."""
    from statemigrate.fsutil import HOLD_ENV

    src = store("sqlite", tmp_path)
    _journal_mode(src, "delete")
    before = read_store(get_engine("sqlite"), src)
    dst, hold = tmp_path / "dst.sqlite", tmp_path / "held"
    env = dict(os.environ, **{HOLD_ENV: f"native copy:{hold}"})
    proc = subprocess.Popen(
        [*cli_command(), "convert", "--quiet", "--json", str(src), str(dst)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60  # a hang guard only
        while not hold.exists() and proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.005)
        assert hold.exists(), proc.communicate()
        app = apsw.Connection(str(src))
        app.set_busy_timeout(200)
        with pytest.raises(apsw.BusyError):
            app.execute("INSERT INTO settings (key, value) VALUES (x'ff', x'00')")
        app.close()
    finally:
        hold.unlink(missing_ok=True)
        out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, err
    assert json.loads(out)["store_digest"] == content_digest(CONTENT)
    assert read_store(get_engine("sqlite"), dst) == before


def test_a_stop_during_the_digest_beside_the_copy_ends_the_copy_early(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The copy (held after its first 16 MiB step) is told to stop once the digest
    beside it was stopped: it ends there, unfinished and unmarked, for `--resume` to
    start over, instead of copying the rest first."""
    import threading

    from statemigrate.fsutil import HOLD_ENV

    src = tmp_path / "src.sqlite"
    big = {TableInfo("events"): [(i.to_bytes(4, "big"), b"e" * 400) for i in range(100_000)]}
    write_store(get_engine("sqlite"), src, big)
    assert src.stat().st_size > 3 * 16 * 2**20  # several backup steps
    dst, hold = tmp_path / "dst.sqlite", tmp_path / "held"
    monkeypatch.setenv(HOLD_ENV, f"native copy:{hold}")
    released: list[threading.Timer] = []

    def should_stop() -> bool:
        if not hold.exists():
            return False
        if not released:  # let the copy go on once the stop has reached it (1 s: ample)
            released.append(threading.Timer(1.0, hold.unlink, kwargs={"missing_ok": True}))
            released[0].start()
        return True

    with pytest.raises(InterruptedByUser, match="interrupted"):
        convert(str(src), str(dst), progress=(p := Phases()), should_stop=should_stop)
    released[0].join()
    assert "reading the source (beside the copy)" in p.phases, p.phases
    partial = Path(f"{dst}.partial")
    assert partial.exists() and not Path(f"{dst}.partial.done").exists()
    assert partial.stat().st_size < src.stat().st_size  # the copy ended early
    report = convert(str(src), str(dst), resume=True)
    eng = get_engine("sqlite")
    assert report.verified and read_store(eng, dst) == read_store(eng, src)
