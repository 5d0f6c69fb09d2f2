"""libSQL quirks: every error a ValueError (mapped by message), big integers bound as REAL,
read-only through a URI, and a libSQL file being a SQLite file."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import apsw
import libsql_experimental
import pytest

from statemigrate import convert, inspect, verify
from statemigrate.engines.libsql import LibsqlEngine, map_error
from statemigrate.errors import DestinationError, SourceError, StoreBusyError
from statemigrate.model import MAX_VERSION, TableInfo, TableKind
from statemigrate.registry import detect_engine, get_engine
from statemigrate.testing.stores import read_store, tree_sha256, write_store

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _hold_exclusive(path: Path) -> subprocess.Popen:
    code = (
        "import apsw, sys\nc = apsw.Connection(sys.argv[1])\nc.execute('BEGIN EXCLUSIVE')\n"
        "print('ready', flush=True)\nsys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def test_fixture_is_a_sqlite_file_detected_as_sqlite(tmp_path):
    src = FIXTURES / "libsql" / "app.libsql"
    assert detect_engine(src).name == "sqlite"  # nothing in the file tells libSQL apart
    report = inspect(f"libsql:{src}")
    assert report.engine == "libsql" and "cannot be told" in report.format["written_by"]
    got = read_store(LibsqlEngine, src)
    assert len(got["tables"]["events"][1]) == 2000
    assert got["metadata"]["revision"] == b'["0001_event_log"]'
    assert read_store(get_engine("sqlite"), src) == got


def test_from_libsql_reads_a_plain_sqlite_file(tmp_path):
    src = FIXTURES / "sqlite" / "app.sqlite"
    before = tree_sha256(src)
    out = tmp_path / "out.jsonl"
    report = convert(str(src), str(out), from_engine="libsql")
    assert report.source_engine == "libsql" and report.verified
    assert verify(str(src), str(out)).equal
    assert tree_sha256(src) == before


def test_versions_over_32_bits_stay_integers(tmp_path):
    # The driver binds such Python ints as REAL (2**63-1 came back as 9.223372036854776e18).
    versions = [0, 2**31, 2**53 + 1, 2**63 - 1, 2**63, MAX_VERSION]
    recs = [(b"%02d" % i, b"v", ver) for i, ver in enumerate(versions)]
    path = write_store(
        LibsqlEngine, tmp_path / "v.libsql", {TableInfo("s", TableKind.VERSIONED): recs}
    )
    con = apsw.Connection(str(path))
    assert {r[0] for r in con.execute("SELECT typeof(version) FROM s")} == {"integer"}
    con.close()
    assert read_store(LibsqlEngine, path)["tables"]["s"][1] == recs


def test_a_locked_store_is_busy_with_the_holders_pid(tmp_path):
    path = write_store(LibsqlEngine, tmp_path / "s.libsql", {TableInfo("t"): [(b"a", b"1")]})
    proc = _hold_exclusive(path)
    try:
        with pytest.raises(StoreBusyError, match=f"pid {proc.pid}") as err:
            read_store(LibsqlEngine, path)
        assert err.value.exit_code == 3
        with pytest.raises(StoreBusyError, match=f"pid {proc.pid}"):
            LibsqlEngine.open_writer(path)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


def test_driver_errors_map_to_exit_codes_by_message(tmp_path):
    path = write_store(LibsqlEngine, tmp_path / "s.libsql", {TableInfo("t"): [(b"a", b"1")]})
    ro = libsql_experimental.connect("file:" + str(path) + "?mode=ro")
    with pytest.raises(ValueError) as readonly:
        ro.execute("INSERT INTO t VALUES (x'02', x'02')")
    ro.close()
    rw = libsql_experimental.connect(str(path))
    with pytest.raises(ValueError) as unique:
        rw.execute("INSERT INTO t VALUES (x'61', x'02')")
    rw.close()
    (tmp_path / "junk.db").write_bytes(b"SQLite format 3\x00" + os.urandom(4000))
    with pytest.raises(ValueError) as corrupt:
        libsql_experimental.connect(str(tmp_path / "junk.db")).execute(
            "SELECT * FROM sqlite_schema"
        ).fetchall()
    assert isinstance(map_error(readonly.value, path, "x", source=False), DestinationError)
    assert map_error(readonly.value, path, "x", source=False).exit_code == 5
    assert (
        "duplicate or out-of-order key" in map_error(unique.value, path, "x", source=False).message
    )
    assert map_error(corrupt.value, path, "x", source=True).exit_code == 4


def test_corrupt_and_foreign_sources_exit_4(tmp_path):
    junk = tmp_path / "junk.libsql"
    junk.write_bytes(b"SQLite format 3\x00" + os.urandom(4000))
    with pytest.raises(SourceError) as err:
        read_store(LibsqlEngine, junk)
    assert err.value.exit_code == 4
    with pytest.raises(SourceError, match="no SQLite header"):
        LibsqlEngine.open_reader(FIXTURES / "jsonl" / "app.jsonl")


def test_a_missing_source_is_refused_and_not_created(tmp_path):
    missing = tmp_path / "nope.libsql"
    with pytest.raises(SourceError):
        LibsqlEngine.open_reader(missing)
    assert os.listdir(tmp_path) == []


def test_paths_with_uri_characters_read_back(tmp_path):
    odd = tmp_path / "we ird?#%25 dir"
    odd.mkdir()
    path = write_store(LibsqlEngine, odd / "s?x#y.libsql", {TableInfo("t"): [(b"a", b"1")]})
    assert read_store(LibsqlEngine, path)["tables"]["t"][1] == [(b"a", b"1")]
    assert sorted(os.listdir(odd)) == ["s?x#y.libsql"]


def test_a_directory_named_libsql_is_not_taken_for_the_driver(tmp_path):
    # A ``libsql`` directory on sys.path imports as an empty namespace package when the
    # newer ``libsql`` driver is not installed; the engine must then use libsql-experimental.
    (tmp_path / "libsql").mkdir()
    code = (
        "import sys; sys.path.insert(0, sys.argv[1])\n"
        "from statemigrate.engines.libsql import LibsqlEngine\n"
        "print(hasattr(LibsqlEngine.require_driver(), 'connect'))\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path)], capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "True"


def test_finished_store_is_a_self_contained_rollback_journal_file(tmp_path):
    path = write_store(LibsqlEngine, tmp_path / "s.libsql", {TableInfo("t"): [(b"a", b"1")]})
    assert sorted(os.listdir(tmp_path)) == ["s.libsql"]
    with open(path, "rb") as f:
        assert f.read(20)[18] == 1  # journal mode byte: 1 = rollback journal


def test_cli_exits_4_on_a_corrupt_source(tmp_path):
    from click.testing import CliRunner

    from statemigrate.cli import main

    junk = tmp_path / "junk.libsql"
    junk.write_bytes(b"SQLite format 3\x00" + os.urandom(4000))
    res = CliRunner().invoke(main, ["convert", f"libsql:{junk}", str(tmp_path / "b.lmdb")])
    assert res.exit_code == 4 and "Traceback" not in res.output
    assert (
        len([line for line in res.output.splitlines() if line.strip()]) <= 2
    )  # the line, maybe a hint


def test_backup_holds_what_the_wal_held(tmp_path):
    path = write_store(LibsqlEngine, tmp_path / "s.libsql", {TableInfo("t"): [(b"a", b"1")]})
    w = LibsqlEngine.open_writer(path)  # WAL mode while it writes
    try:
        w.write_batch(TableInfo("t"), [(b"b", b"2")])
        w.backup(tmp_path / "copy.libsql")
    finally:
        w.close()
    got = read_store(LibsqlEngine, tmp_path / "copy.libsql")["tables"]["t"][1]
    assert got == [(b"a", b"1"), (b"b", b"2")]
