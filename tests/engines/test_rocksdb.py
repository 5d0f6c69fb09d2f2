"""RocksDB quirks: Debian's ldb (RocksDB 7.8) scans our output, format version, LOCK release."""

from __future__ import annotations

import os
import shutil
import stat
import subprocess
import sys
from pathlib import Path

import pytest

from statemigrate import convert
from statemigrate.engines.rocksdb import RocksdbEngine
from statemigrate.errors import StoreBusyError
from statemigrate.model import TableInfo, TableKind
from statemigrate.testing.cli import run_cli
from statemigrate.testing.holders import app_holding
from statemigrate.testing.stores import read_store, tree_sha256, write_store

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
    """The reason for the default: a format-6 store fails in RocksDB 7.8's ldb (written
    with ``rocksdb_compat=newest``: the default, 7.8, refuses format 6 before writing)."""
    out = tmp_path / "v6.rocksdb"
    convert(
        str(FIXTURES / "sqlite" / "app.sqlite"),
        str(out),
        destination_options={"rocksdb_format_version": 6, "rocksdb_compat": "newest"},
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


def test_a_reader_never_locks_the_app_out(tmp_path):
    """Our reader reads a private link image, so an app can open the store (and take its
    LOCK) while we read; a reader that held the LOCK would keep the app from starting."""
    path = write_store(RocksdbEngine, tmp_path / "l.rocksdb", {TableInfo("t"): [(b"k", b"v")]})
    # app_holding fails unless the app, started while the reader is open, gets the LOCK.
    with RocksdbEngine.open_reader(path) as reader, app_holding("rocksdb", path) as pid:
        (table,) = reader.tables()
        assert [r for b in reader.read_batches(table) for r in b] == [(b"k", b"v")]
        with pytest.raises(StoreBusyError, match=f"pid {pid}\\)"):
            RocksdbEngine.open_writer(path)
    w = RocksdbEngine.open_writer(path)  # the app is gone and the reader closed: free
    w.close()


def test_a_store_held_by_another_process_is_busy(tmp_path):
    path = write_store(RocksdbEngine, tmp_path / "h.rocksdb", {TableInfo("t"): [(b"k", b"v")]})
    with app_holding("rocksdb", path) as pid:  # the app has the database open (its LOCK)
        for opening in (RocksdbEngine.open_reader, RocksdbEngine.open_writer):
            with pytest.raises(
                StoreBusyError, match=f"in use by another process \\(pid {pid}\\)"
            ) as err:
                opening(path)
            assert err.value.exit_code == 3
    assert read_store(RocksdbEngine, path)["tables"]["t"][1] == [(b"k", b"v")]


def test_a_manifest_with_a_copy_of_its_tail_appended_is_exit_4_not_a_hang(tmp_path):
    """The fuzzer's seed 'rocksdb-49' (2026-11): the last 206 bytes of the fixture's
    MANIFEST appended after its end. The first "record" there claims a recyclable
    record (type 5) of 1542 bytes; RocksDB's log reader spun forever on it at 100 % CPU
    with no error. run_cli's hang guard fails this test if the check ever goes."""
    store = tmp_path / "app.rocksdb"
    shutil.copytree(FIXTURES / "rocksdb" / "app.rocksdb", store)
    manifest = store / (store / "CURRENT").read_text().strip()
    raw = manifest.read_bytes()
    assert len(raw) == 888 and raw[682 + 6] == 5, "the fixture's MANIFEST changed"
    manifest.write_bytes(raw + raw[682:])
    run = run_cli(["checksum", f"rocksdb:{store}"], timeout=60)
    assert run.returncode == 4, (run.returncode, run.stderr)
    assert f"{manifest.name} is damaged" in run.stderr, run.stderr


def test_a_manifest_over_many_blocks_passes_the_check(tmp_path):
    """Hundreds of flushes grow the MANIFEST past one 32 KiB block: records that span
    blocks (first/middle/last fragments) and block trailers pass, and the store reads."""
    import rocksdict

    store = tmp_path / "many.rocksdb"
    db = rocksdict.Rdict(str(store), rocksdict.Options(raw_mode=True))
    for i in range(400):
        db[b"key-%04d" % i] = b"v" * 100
        db.flush()
    db.close()
    manifests = list(store.glob("MANIFEST-*"))
    assert max(m.stat().st_size for m in manifests) > 32 * 1024
    run = run_cli(["checksum", f"rocksdb:{store}"], timeout=120)
    assert run.returncode == 0, run.stderr
    assert "default\tplain\t400\t" in run.stdout, run.stdout


# --- the native copy (a checkpoint) ------------------------------------------------------


def _files(path: Path) -> dict[str, os.stat_result]:
    return {p.name: p.lstat() for p in path.iterdir()}


def test_checkpoint_copy_is_its_own_store_and_opens_with_rocksdict(tmp_path: Path) -> None:
    """A same-engine convert takes RocksDB's checkpoint; no file is shared with the source
    (no hard link, no symbolic link) and plain rocksdict reads what was written."""
    import rocksdict

    records = [(b"k%05d" % i, b"v" * (i % 90)) for i in range(5000)]
    src = write_store(RocksdbEngine, tmp_path / "src.rocksdb", {TableInfo("t"): records})
    before = tree_sha256(src)
    dst = tmp_path / "dst.rocksdb"
    report = convert(str(src), str(dst))
    assert report.verified
    assert tree_sha256(src) == before
    inodes = {st.st_ino for st in _files(src).values()}
    for name, st in _files(dst).items():
        assert stat.S_ISREG(st.st_mode) and st.st_nlink == 1, name
        assert st.st_ino not in inodes, name
    assert all(st.st_nlink == 1 for st in _files(src).values())  # the private image is gone
    opts = rocksdict.Options(raw_mode=True)
    db = rocksdict.Rdict(
        str(dst), opts, column_families={"t": opts}, access_type=rocksdict.AccessType.read_only()
    )
    try:
        assert list(db.get_column_family("t").items()) == records
    finally:
        db.close()


def test_a_log_whose_records_were_all_flushed_keeps_the_checkpoint(tmp_path: Path) -> None:
    """A write-ahead log can outlive its records' flush (statemigrate's own 1M-record
    stores keep one); nothing of it is replayed, the checkpoint is complete and taken.
    Made here by an app that saved its log before the flush and put it back after."""
    src = tmp_path / "src.rocksdb"
    code = (
        "import pathlib, rocksdict, sys\n"
        "p = pathlib.Path(sys.argv[1])\n"
        "o = rocksdict.Options(raw_mode=True); o.create_if_missing(True)\n"
        "db = rocksdict.Rdict(str(p), o)\n"
        "for i in range(300): db[b'k%03d' % i] = b'flushed'\n"
        "saved = {q.name: q.read_bytes() for q in p.glob('*.log')}\n"
        "db.flush(True); db.close()\n"
        "for name, data in saved.items():\n"
        "    if not (p / name).exists(): (p / name).write_bytes(data)\n"
    )
    subprocess.run([sys.executable, "-c", code, str(src)], check=True)
    logs = [p for p in src.iterdir() if p.suffix == ".log" and p.stat().st_size > 0]
    assert logs and any(p.suffix == ".sst" for p in src.iterdir())  # the premise
    with RocksdbEngine.open_reader(src) as reader:
        assert not reader.logged and RocksdbEngine.native_copy(reader) is not None
    dst = tmp_path / "dst.rocksdb"
    assert convert(str(src), str(dst)).verified
    # rocksdict alone reads every record back, the same as from the source.
    assert _default_items(dst) == [(b"k%03d" % i, b"flushed") for i in range(300)]


def _default_items(path: Path) -> list[tuple[bytes, bytes]]:
    """The default column family's records, read by rocksdict alone."""
    import rocksdict

    db = rocksdict.Rdict(
        str(path),
        rocksdict.Options(raw_mode=True),
        access_type=rocksdict.AccessType.read_only(),
    )
    try:
        return list(db.items())
    finally:
        db.close()


def test_checkpoint_copy_holds_writes_only_in_the_write_ahead_log(tmp_path: Path) -> None:
    """An app killed before RocksDB flushed: its last writes are in the log alone."""
    src = tmp_path / "src.rocksdb"
    code = (
        "import os, rocksdict, sys\n"
        "o = rocksdict.Options(raw_mode=True); o.create_if_missing(True)\n"
        "db = rocksdict.Rdict(sys.argv[1], o)\n"
        "for i in range(300): db[b'k%03d' % i] = b'logged'\n"
        "os.kill(os.getpid(), 9)\n"
    )
    killed = subprocess.run([sys.executable, "-c", code, str(src)], check=False)
    assert killed.returncode == -9
    assert not any(p.suffix == ".sst" for p in src.iterdir())  # nothing was flushed
    with RocksdbEngine.open_reader(src) as reader:
        # A read-only instance's checkpoint leaves the log out: the batch loop copies it.
        assert reader.logged and RocksdbEngine.native_copy(reader) is None
    dst = tmp_path / "dst.rocksdb"
    assert convert(str(src), str(dst)).verified
    got = read_store(RocksdbEngine, dst)["tables"]
    assert got == {"default": ("plain", [(b"k%03d" % i, b"logged") for i in range(300)])}
