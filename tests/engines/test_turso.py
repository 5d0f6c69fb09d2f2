"""Turso quirks: no read-only open (reads use a private copy), the per-process lock, rowid
tables, names Turso lower-cases, and files the sqlite3 shell accepts."""

from __future__ import annotations

import gc
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import turso

from statemigrate import convert, verify
from statemigrate.engines.turso import TursoEngine
from statemigrate.errors import DestinationError, SourceError, StoreBusyError
from statemigrate.model import MAX_VERSION, TableInfo, TableKind
from statemigrate.testing.stores import read_store, tree_sha256, write_store

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _shell(db: Path, sql: str) -> str:
    exe = shutil.which("sqlite3")
    assert exe, "the sqlite3 shell is needed (apt-get install sqlite3)"
    return subprocess.run([exe, str(db), sql], capture_output=True, text=True, check=True).stdout


def _hold(path: Path) -> subprocess.Popen:
    code = (
        "import turso, sys\nc = turso.connect(sys.argv[1])\nc.execute('SELECT 1').fetchall()\n"
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


def test_converted_store_passes_the_sqlite3_shells_integrity_check(tmp_path):
    out = tmp_path / "app.turso"
    convert(str(FIXTURES / "lmdb" / "app.lmdb"), str(out))
    assert _shell(out, "PRAGMA integrity_check;").strip() == "ok"
    assert _shell(out, "SELECT count(*) FROM events;").strip() == "2000"
    assert sorted(os.listdir(tmp_path)) == ["app.turso"]  # the WAL was checkpointed and removed
    assert verify(str(FIXTURES / "lmdb" / "app.lmdb"), f"turso:{out}").equal


def test_layout_is_a_rowid_table_with_a_blob_primary_key(tmp_path):
    path = write_store(TursoEngine, tmp_path / "s.turso", {TableInfo("t"): [(b"a", b"1")]})
    schema = _shell(path, "SELECT sql FROM sqlite_schema WHERE name = 't';")
    assert '"key" BLOB PRIMARY KEY NOT NULL' in schema and "WITHOUT ROWID" not in schema


def test_reading_never_touches_the_source(tmp_path):
    src = tmp_path / "app.turso"
    shutil.copyfile(FIXTURES / "turso" / "app.turso", src)
    before = tree_sha256(src)
    got = read_store(TursoEngine, src)
    assert len(got["tables"]["events"][1]) == 2000
    assert tree_sha256(src) == before
    assert os.listdir(tmp_path) == ["app.turso"]  # no -wal created beside it


def test_a_missing_source_creates_nothing(tmp_path):
    # pyturso would create it, or a file literally named '…?mode=ro'.
    with pytest.raises(SourceError):
        TursoEngine.open_reader(tmp_path / "nope.turso")
    with pytest.raises(DestinationError):
        TursoEngine.open_writer(tmp_path / "nope.turso")
    assert os.listdir(tmp_path) == []


def test_a_store_held_by_another_process_is_busy_with_its_pid(tmp_path):
    path = write_store(TursoEngine, tmp_path / "s.turso", {TableInfo("t"): [(b"a", b"1")]})
    proc = _hold(path)
    try:
        with pytest.raises(StoreBusyError, match=f"pid {proc.pid}") as err:
            TursoEngine.open_reader(path)
        assert err.value.exit_code == 3
        with pytest.raises(StoreBusyError, match=f"pid {proc.pid}"):
            TursoEngine.open_writer(path)
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)


def test_names_turso_lower_cases_keep_their_spelling(tmp_path):
    names = ["MixedCase", "Événements", "ÉTAT", 'Q"uote']
    content = {TableInfo(n): [(b"k", n.encode())] for n in names}
    path = write_store(TursoEngine, tmp_path / "s.turso", content)
    assert sorted(read_store(TursoEngine, path)["tables"]) == sorted(names)
    conn = turso.connect(str(path))
    # Turso could never insert into a table spelled with a non-ASCII capital; an app
    # using Turso reads and writes it under the lower-cased spelling.
    conn.execute("INSERT INTO \"événements\" VALUES (x'6b32', x'')")
    assert conn.execute('SELECT count(*) FROM "événements"').fetchall() == [(2,)]
    conn.commit()
    conn.close()
    del conn  # pyturso keeps its file lock until the connection is freed
    gc.collect()
    assert _shell(path, "PRAGMA integrity_check;").strip() == "ok"


def test_names_differing_only_in_case_are_refused(tmp_path):
    with pytest.raises(Exception) as err:
        write_store(TursoEngine, tmp_path / "s.turso", {TableInfo("a"): [], TableInfo("A"): []})
    assert getattr(err.value, "exit_code", None) == 5


def test_versions_round_trip_at_the_extremes(tmp_path):
    recs = [(b"a", b"", 0), (b"b", b"x", 2**63 - 1), (b"c", b"y", 2**63), (b"d", b"z", MAX_VERSION)]
    path = write_store(
        TursoEngine, tmp_path / "v.turso", {TableInfo("s", TableKind.VERSIONED): recs}
    )
    assert _shell(path, "SELECT version FROM s ORDER BY key;").split() == [
        "0",
        "9223372036854775807",
        "-9223372036854775808",
        "-1",
    ]
    assert read_store(TursoEngine, path)["tables"]["s"][1] == recs


def test_cli_exits_3_while_the_app_holds_the_store(tmp_path):
    from click.testing import CliRunner

    from statemigrate.cli import main

    path = write_store(TursoEngine, tmp_path / "s.turso", {TableInfo("t"): [(b"a", b"1")]})
    proc = _hold(path)
    try:
        res = CliRunner().invoke(main, ["convert", f"turso:{path}", str(tmp_path / "b.sqlite")])
        assert res.exit_code == 3
        assert f"pid {proc.pid}" in res.output and "Traceback" not in res.output
    finally:
        assert proc.stdin is not None
        proc.stdin.close()
        proc.wait(timeout=10)
    assert not (tmp_path / "b.sqlite").exists()


def test_a_damaged_file_is_refused_before_pyturso_opens_it(tmp_path):
    # pyturso panics (SIGABRT, the whole interpreter) on some damaged b-trees; run the
    # read in a child so that a crash fails this test instead of killing the runner.
    path = tmp_path / "bad.turso"
    shutil.copyfile(FIXTURES / "turso" / "app.turso", path)
    data = bytearray(path.read_bytes())
    for off in range(len(data) // 3, len(data) // 3 + 4000, 97):
        data[off] ^= 0xFF
    path.write_bytes(bytes(data))
    code = (
        "import sys\nfrom pathlib import Path\nfrom statemigrate.engines.turso import TursoEngine\n"
        "from statemigrate.errors import SourceError\nfrom statemigrate.testing.stores import read_store\n"
        "try:\n    read_store(TursoEngine, Path(sys.argv[1]))\nexcept SourceError as exc:\n"
        "    print('refused', exc.exit_code, exc.message)\nelse:\n    print('read')\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code, str(path)],
        check=False,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.startswith("refused 4") and "damaged" in out.stdout
