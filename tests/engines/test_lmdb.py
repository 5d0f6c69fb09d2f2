"""LMDB quirks: putmulti's count, key limits, a held writer mutex, lock-free reads, map growth."""

from __future__ import annotations

import os
import shutil
import struct
import subprocess
import sys
import threading
from pathlib import Path

import lmdb
import pytest

from statemigrate import convert, verify
from statemigrate.engines.lmdb import LmdbEngine
from statemigrate.engines.lmdb import writer as lmdb_writer
from statemigrate.errors import DestinationError, SourceError, StoreBusyError
from statemigrate.model import TableInfo, TableKind
from statemigrate.registry import get_engine
from statemigrate.testing.cli import run_cli
from statemigrate.testing.stores import read_store, tree_sha256, write_store

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _hold(script: str, path: Path) -> subprocess.Popen:
    """A child process that runs ``script`` on the store, prints 'ready' and waits for stdin."""
    code = (
        f"import lmdb, sys\nenv = lmdb.open({str(path)!r}, subdir=True, max_dbs=8)\n{script}\n"
        "print('ready', flush=True)\nsys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _release(proc: subprocess.Popen) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=10)


def test_fixture_made_by_py_lmdb_reads_and_converts(tmp_path):
    src = FIXTURES / "lmdb" / "app.lmdb"
    before = tree_sha256(src)
    got = read_store(LmdbEngine, src)
    assert len(got["tables"]["events"][1]) == 2000
    assert got["tables"]["settings"][0] == "versioned"
    assert got["metadata"]["schema"] == b"example-app"
    out = tmp_path / "app.sqlite"
    convert(str(src), str(out))  # detected as lmdb by data.mdb
    assert verify(str(src), str(out)).equal
    assert tree_sha256(src) == before
    assert not (src / "lock.mdb").exists()


def test_out_of_order_batch_is_refused_whole(tmp_path):
    path = tmp_path / "s.lmdb"
    w = LmdbEngine.create_writer(path)
    t = TableInfo("t")
    w.create_table(t)
    w.write_batch(t, [(b"b", b"1")])
    # putmulti(append=True) skips a key before the last one without raising: we count.
    with pytest.raises(DestinationError, match="out of key order"):
        w.write_batch(t, [(b"c", b"2"), (b"a", b"3")], {"checkpoint": b"x"})
    assert "checkpoint" not in w.metadata()
    w.close()
    assert read_store(LmdbEngine, path)["tables"]["t"][1] == [(b"b", b"1")]


@pytest.mark.parametrize("key", [b"", b"k" * 512], ids=["empty", "512-bytes"])
def test_keys_outside_lmdb_limits_are_refused_before_writing(tmp_path, key):
    src = write_store(
        get_engine("sqlite"),
        tmp_path / "a.sqlite",
        {TableInfo("odd"): [(key, b"v"), (b"ok", b"v")]},
    )
    dst = tmp_path / "b.lmdb"
    with pytest.raises(DestinationError, match="'odd'") as err:
        convert(str(src), str(dst))
    assert err.value.exit_code == 5
    assert (key[:64].hex() or "(empty)") in err.value.message
    assert not dst.exists() and not (tmp_path / "b.lmdb.partial").exists()


def test_511_byte_key_is_accepted(tmp_path):
    path = write_store(LmdbEngine, tmp_path / "s.lmdb", {TableInfo("t"): [(b"k" * 511, b"v")]})
    assert read_store(LmdbEngine, path)["tables"]["t"][1] == [(b"k" * 511, b"v")]


def test_a_held_write_lock_is_busy_at_once(tmp_path):
    path = write_store(LmdbEngine, tmp_path / "s.lmdb", {TableInfo("t"): [(b"a", b"1")]})
    proc = _hold("txn = env.begin(write=True)", path)
    # "At once", without a stopwatch: a writer that waited for LMDB's mutex would wait as
    # long as the app lives. The hang guard ends the app after 60 s, the wait then ends
    # without StoreBusyError, and the test fails.
    guard = threading.Timer(60, proc.kill)
    guard.start()
    try:
        with pytest.raises(
            StoreBusyError, match=f"in use by another process \\(pid {proc.pid}\\)"
        ) as err:
            LmdbEngine.open_writer(path)
        guard.cancel()
        assert err.value.exit_code == 3
        # Readers are never blocked by LMDB's writer.
        assert read_store(LmdbEngine, path)["tables"]["t"][1] == [(b"a", b"1")]
    finally:
        _release(proc)
    w = LmdbEngine.open_writer(path)  # free again
    w.close()


def test_reading_an_idle_store_creates_no_lock_file(tmp_path):
    path = write_store(LmdbEngine, tmp_path / "s.lmdb", {TableInfo("t"): [(b"a", b"1")]})
    (path / "lock.mdb").unlink()
    before = tree_sha256(path)
    assert read_store(LmdbEngine, path)["tables"]["t"][1] == [(b"a", b"1")]
    assert sorted(os.listdir(path)) == ["data.mdb"]
    assert tree_sha256(path) == before


def test_a_write_during_a_lock_free_read_is_caught(tmp_path):
    recs = [(b"%05d" % i, b"v" * 100) for i in range(2000)]
    path = write_store(LmdbEngine, tmp_path / "s.lmdb", {TableInfo("t"): recs})
    (path / "lock.mdb").unlink()
    with LmdbEngine.open_reader(path) as reader:
        assert not reader.locked
        batches = reader.read_batches(reader.tables()[0], max_records=100)
        next(batches)
        proc = _hold(
            "db = env.open_db(b't')\nwith env.begin(write=True) as t: t.put(b'zz', b'new', db=db)",
            path,
        )
        _release(proc)
        with pytest.raises(
            StoreBusyError, match="wrote to the store while it was being read"
        ) as err:
            list(batches)
        assert err.value.exit_code == 3


def test_a_store_open_in_the_app_is_read_through_the_reader_table(tmp_path):
    path = write_store(LmdbEngine, tmp_path / "s.lmdb", {TableInfo("t"): [(b"a", b"1")]})
    proc = _hold("pass", path)  # the app has the environment open, idle
    try:
        with LmdbEngine.open_reader(path) as reader:
            assert reader.locked
            assert [r for b in reader.read_batches(reader.tables()[0]) for r in b] == [(b"a", b"1")]
    finally:
        _release(proc)


def test_the_map_grows_instead_of_failing(tmp_path, monkeypatch):
    monkeypatch.setattr(lmdb_writer, "MIN_MAP_SIZE", 1 << 20)
    recs = [(b"%06d" % i, os.urandom(1000)) for i in range(3000)]  # ~3 MB > 1 MiB map
    path = write_store(LmdbEngine, tmp_path / "s.lmdb", {TableInfo("t"): recs}, batch=500)
    env = lmdb.open(str(path), subdir=True, readonly=True, lock=False)
    assert env.info()["map_size"] > 1 << 20
    env.close()
    assert read_store(LmdbEngine, path)["tables"]["t"][1] == recs


def test_many_tables_grow_max_dbs(tmp_path):
    content = {
        TableInfo(f"t{i:02d}", TableKind.VERSIONED if i % 2 else TableKind.PLAIN): (
            [(b"k", b"v", i)] if i % 2 else [(b"k", b"v")]
        )
        for i in range(40)
    }
    path = write_store(LmdbEngine, tmp_path / "s.lmdb", content)
    got = read_store(LmdbEngine, path)["tables"]
    assert len(got) == 40 and got["t07"] == ("versioned", [(b"k", b"v", 7)])


def test_versioned_layout_is_big_endian_version_then_value(tmp_path):
    path = write_store(
        LmdbEngine, tmp_path / "s.lmdb", {TableInfo("s", TableKind.VERSIONED): [(b"a", b"xy", 258)]}
    )
    env = lmdb.open(str(path), subdir=True, readonly=True, lock=False, max_dbs=4)
    with env.begin() as txn:
        assert (
            txn.get(b"a", db=env.open_db(b"s", txn=txn, create=False))
            == (258).to_bytes(8, "big") + b"xy"
        )
        meta = env.open_db(b"__statemigrate__", txn=txn, create=False)
        assert txn.get(b"kind:s", db=meta) == b"versioned"
    env.close()


def test_records_in_the_unnamed_database_are_refused(tmp_path):
    path = tmp_path / "plain.lmdb"
    env = lmdb.open(str(path), subdir=True)
    with env.begin(write=True) as txn:
        txn.put(b"user:1", b"alice")
    env.close()
    with pytest.raises(SourceError, match="unnamed database"):
        LmdbEngine.open_reader(path)


def test_not_an_lmdb_store(tmp_path):
    junk = tmp_path / "junk.lmdb"
    junk.mkdir()
    with pytest.raises(SourceError, match="no|not"):
        LmdbEngine.open_reader(junk)
    (junk / "data.mdb").write_bytes(b"garbage" * 1000)
    with pytest.raises(SourceError, match="not an LMDB store"):
        LmdbEngine.open_reader(junk)
    assert sorted(os.listdir(junk)) == ["data.mdb"]


def test_cli_names_table_and_key_and_exits_5(tmp_path):
    from click.testing import CliRunner

    from statemigrate.cli import main

    src = write_store(
        get_engine("sqlite"), tmp_path / "a.sqlite", {TableInfo("odd"): [(b"", b"v")]}
    )
    res = CliRunner().invoke(main, ["convert", str(src), str(tmp_path / "b.lmdb")])
    assert res.exit_code == 5
    assert "'odd'" in res.output and "(empty)" in res.output and "Traceback" not in res.output


def test_backup_is_lmdbs_own_consistent_copy(tmp_path):
    path = write_store(LmdbEngine, tmp_path / "s.lmdb", {TableInfo("t"): [(b"a", b"1")]})
    w = LmdbEngine.open_writer(path)
    try:
        with w.transaction():
            w.write_batch(TableInfo("t"), [(b"b", b"2")])
        w.backup(tmp_path / "copy.lmdb")
    finally:
        w.close()
    assert read_store(LmdbEngine, tmp_path / "copy.lmdb")["tables"]["t"][1] == [
        (b"a", b"1"),
        (b"b", b"2"),
    ]


@pytest.mark.parametrize("fraction", [0.02, 0.3, 0.6, 0.95])
def test_a_truncated_data_file_is_refused_before_it_is_mapped(tmp_path, fraction):
    # LMDB would read past the end of the mapped file: SIGBUS, the interpreter dies.
    path = tmp_path / "cut.lmdb"
    shutil.copytree(FIXTURES / "lmdb" / "app.lmdb", path)
    data = path / "data.mdb"
    os.truncate(data, int(data.stat().st_size * fraction))
    with pytest.raises(SourceError, match="truncated") as err:
        LmdbEngine.open_reader(path)
    assert err.value.exit_code == 4
    with pytest.raises(DestinationError, match="truncated"):
        LmdbEngine.open_writer(path)


def _store_with_sizes(path: Path) -> dict[bytes, int]:
    """A store written by py-lmdb alone: one value on overflow pages, small ones inline."""
    sizes = {b"big-value-key": 10_000, b"inline-key": 100, b"last-key": 50}
    env = lmdb.open(str(path), subdir=True, max_dbs=4, map_size=1 << 24)
    db = env.open_db(b"events")
    with env.begin(write=True, db=db) as txn:
        for key, size in sizes.items():
            txn.put(key, b"v" * size)
    env.close()
    return sizes


@pytest.mark.parametrize("key", [b"big-value-key", b"inline-key", b"last-key"])
def test_a_value_size_damaged_past_the_end_of_the_file_is_exit_4_not_sigbus(key, tmp_path):
    """A leaf node's size field (mn_lo/mn_hi, LMDB 0.9's MDB_node) grown by 16 MiB.

    LMDB does not check a value's size against its page or overflow run: the read
    runs past the end of data.mdb inside LMDB's map and the process dies of SIGBUS (CI
    found it by fuzzing, 2026-11). The node is found by its bytes, as LMDB lays it out:
    size low and high halves, flags (F_BIGDATA = 1 for an overflow value), key size, key.
    """
    path = tmp_path / "s.lmdb"
    sizes = _store_with_sizes(path)
    assert run_cli(["checksum", f"lmdb:{path}"]).returncode == 0
    data = path / "data.mdb"
    raw = bytearray(data.read_bytes())
    flags = 1 if sizes[key] > 4000 else 0
    node = bytes(struct.pack("<HHHH", sizes[key], 0, flags, len(key))) + key
    assert raw.count(node) == 1, "the node must be found exactly once"
    at = raw.index(node)
    raw[at + 2 : at + 4] = struct.pack("<H", 0x100)  # + 256 << 16 bytes
    data.write_bytes(bytes(raw))
    run = run_cli(["checksum", f"lmdb:{path}"])
    assert run.returncode == 4, (run.returncode, run.stderr)
    assert "data.mdb is damaged" in run.stderr and run.stderr.count("\n") <= 2, run.stderr


def test_a_branch_link_past_the_end_of_the_file_is_exit_4(tmp_path):
    """A store big enough for branch pages, one child link pointed past the file's end."""
    path = tmp_path / "s.lmdb"
    env = lmdb.open(str(path), subdir=True, max_dbs=4, map_size=1 << 26)
    db = env.open_db(b"events")
    with env.begin(write=True, db=db) as txn:
        for i in range(5_000):
            txn.put(b"key-%06d" % i, b"x" * 200)
    env.close()
    data = path / "data.mdb"
    raw = bytearray(data.read_bytes())
    psize = struct.unpack_from("<I", raw, 40)[0]
    # The first branch page (flags P_BRANCH = 1 at byte 10) and its first node's link.
    page = next(p for p in range(2, len(raw) // psize) if raw[p * psize + 10] == 1)
    node = struct.unpack_from("<H", raw, page * psize + 16)[0]
    struct.pack_into("<HH", raw, page * psize + node, 0xFFFF, 0x00FF)  # page ~16M
    data.write_bytes(bytes(raw))
    run = run_cli(["checksum", f"lmdb:{path}"])
    assert run.returncode == 4, (run.returncode, run.stderr)
    assert "data.mdb is damaged" in run.stderr, run.stderr
