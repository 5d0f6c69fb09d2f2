"""RocksDB quirks: Debian's ldb (RocksDB 7.8) scans our output, format version, LOCK release."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from statemigrate import convert
from statemigrate.engines.rocksdb import RocksdbEngine
from statemigrate.errors import StoreBusyError
from statemigrate.model import TableInfo, TableKind
from statemigrate.testing.stores import read_store, write_store

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _ldb(db: Path, *args: str) -> subprocess.CompletedProcess:
    exe = shutil.which("ldb")
    assert exe, "Debian's ldb is needed (apt-get install rocksdb-tools; `make test` installs it)"
    return subprocess.run(
        [exe, f"--db={db}", "--ignore_unknown_options", *args],
        capture_output=True,
        text=True,
        check=False,
    )


def test_older_rocksdb_ldb_scans_every_table(tmp_path):
    out = tmp_path / "app.rocksdb"
    convert(str(FIXTURES / "sqlite" / "app.sqlite"), str(out))
    cfs = _ldb(out, "list_column_families")
    assert cfs.returncode == 0, cfs.stderr
    for table, count in (("events", 2000), ("settings", 200), ("odd", 8)):
        res = _ldb(out, f"--column_family={table}", "scan", "--hex")
        assert res.returncode == 0, res.stderr
        assert len([line for line in res.stdout.splitlines() if " : " in line]) == count, table


def test_format_version_6_is_what_old_rocksdb_refuses(tmp_path):
    """The reason for the default: a format-6 store fails in RocksDB 7.8's ldb."""
    out = tmp_path / "v6.rocksdb"
    convert(
        str(FIXTURES / "sqlite" / "app.sqlite"),
        str(out),
        destination_options={"rocksdb_format_version": 6},
    )
    res = _ldb(out, "--column_family=events", "scan")
    assert res.returncode != 0 and "format_version" in (res.stderr + res.stdout)


def test_versioned_layout_is_8_byte_big_endian_then_value(tmp_path):
    path = write_store(
        RocksdbEngine,
        tmp_path / "v.rocksdb",
        {TableInfo("s", TableKind.VERSIONED): [(b"k", b"val", 258)]},
    )
    res = _ldb(path, "--column_family=s", "scan", "--hex")
    assert "0x6B : 0x0000000000000102" + b"val".hex().upper() in res.stdout


def test_reader_releases_the_lock(tmp_path):
    path = write_store(RocksdbEngine, tmp_path / "l.rocksdb", {TableInfo("t"): [(b"k", b"v")]})
    read_store(RocksdbEngine, path)
    w = RocksdbEngine.open_writer(path)  # would fail if the LOCK were still held
    w.close()


def test_a_store_held_by_another_process_is_busy(tmp_path):
    import sys

    path = write_store(RocksdbEngine, tmp_path / "h.rocksdb", {TableInfo("t"): [(b"k", b"v")]})
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import rocksdict,sys,time;o=rocksdict.Options(raw_mode=True);"
                "d=rocksdict.Rdict(sys.argv[1],o,column_families={'t':o,'__statemigrate__':o});"
                "print('ok',flush=True);time.sleep(30)"
            ),
            str(path),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout.readline().strip() == b"ok"
        with pytest.raises(StoreBusyError, match=f"pid {child.pid}"):
            RocksdbEngine.open_reader(path)
    finally:
        child.kill()
        child.wait()
