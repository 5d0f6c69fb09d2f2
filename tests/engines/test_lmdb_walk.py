"""LMDB's native page walk (``_native.lmdb_digests``): the digests of stores py-lmdb wrote.

Expectations are independent of the code under test: records are written with py-lmdb
alone, and each table's digest is recomputed from those records with plain ``xxhash``
(:func:`statemigrate.digest.record_hash_py`). Stores the walk does not read must be
declined (``ValueError``), never misread, and the reader then reads through the cursor.
"""

from __future__ import annotations

import random
import struct
import subprocess
import sys
from pathlib import Path

import lmdb
import pytest

from statemigrate import _native, checksum
from statemigrate.digest import MOD, record_hash_py
from statemigrate.engines.lmdb import LmdbEngine
from statemigrate.errors import StoreBusyError
from statemigrate.stores.walk import digest_store

Records = list[tuple[bytes, bytes]]


def app_store(path: Path, tables: dict[bytes, Records], flags: dict | None = None) -> int:
    """A store written by py-lmdb alone; its last transaction id."""
    env = lmdb.open(str(path), subdir=True, max_dbs=16, map_size=1 << 30)
    with env.begin(write=True) as txn:
        for name, records in tables.items():
            db = env.open_db(name, txn=txn, **(flags or {}))
            for key, value in records:
                assert txn.put(key, value, db=db)
    txnid = int(env.info()["last_txnid"])
    env.close()
    return txnid


def expected(records: Records, versioned: bool) -> tuple[int, int, int]:
    """(count, sum, payload bytes), by plain xxhash over the records as written."""
    total = nbytes = 0
    for key, raw in dict(records).items():
        if versioned:
            value, version = raw[8:], int.from_bytes(raw[:8], "big")
            total += record_hash_py(key, value, version)
        else:
            value = raw
            total += record_hash_py(key, value)
        nbytes += len(key) + len(value)
    return len(dict(records)), total % MOD, nbytes


def shuffled(records: Records, seed: int = 5) -> Records:
    out = list(records)
    random.Random(seed).shuffle(out)
    return out


SHAPES: dict[str, Records] = {
    "empty": [],
    "one": [(b"k", b"v")],
    # 20,000 records: leaves under two levels of branch pages, written out of order.
    "many": shuffled([(b"%08d" % i, b"x" * (i % 300)) for i in range(20_000)]),
    "empty_values": [(b"a", b""), (b"b", b""), (b"\x00", b"")],
    # values around and far above the size LMDB moves to overflow pages
    "big_values": [(b"%03d" % n, bytes([n % 251]) * n * 97) for n in range(1, 120)],
    "long_keys": [(bytes([i]) * 511, b"v%d" % i) for i in range(1, 60)]
    + [(bytes([i]) * (1 + i % 200), b"") for i in range(0, 256, 3)],
}


@pytest.mark.parametrize("shape", sorted(SHAPES))
def test_walk_gives_the_digest_of_what_py_lmdb_wrote(shape: str, tmp_path: Path) -> None:
    records = SHAPES[shape]
    txnid = app_store(tmp_path / "s", {b"t": records, b"other": [(b"x", b"y")]})
    got = _native.lmdb_digests(str(tmp_path / "s" / "data.mdb"), txnid, [(b"t", False)])
    assert got == [expected(records, versioned=False)]


# Pages are read in windows while the walk goes on in file order, alone otherwise, and
# a file walked out of order is read through once after 256 pages read alone
# (rust/src/engines/lmdb/pages.rs). These stores take each path over thousands of pages.
LARGE: dict[str, Records] = {
    # key order in one commit: the walk runs through the file (2,972 of 3,015 steps to
    # the next page), window after window
    "in_order": [(b"%08d" % i, bytes([i % 251]) * (50 + i % 400)) for i in range(40_000)],
    # random order, one commit a record as an app writes: the walk jumps about (1,032 of
    # 1,072 steps go further than 16 pages), so the file is read through
    "random": shuffled([(b"%08d" % i, b"r" * (20 + i % 300)) for i in range(15_000)], seed=9),
}


def app_store_by_commits(path: Path, records: Records) -> int:
    """A store py-lmdb wrote one commit per record; its last transaction id."""
    env = lmdb.open(str(path), subdir=True, max_dbs=4, map_size=1 << 30)
    db = env.open_db(b"t")
    for key, value in records:
        with env.begin(write=True, db=db) as txn:
            txn.put(key, value)
    txnid = int(env.info()["last_txnid"])
    env.close()
    return txnid


@pytest.mark.parametrize("order", sorted(LARGE))
def test_the_check_and_the_walk_read_large_stores_in_either_order(
    order: str, tmp_path: Path
) -> None:
    records = LARGE[order]
    if order == "random":
        txnid = app_store_by_commits(tmp_path / "s", records)
    else:
        txnid = app_store(tmp_path / "s", {b"t": records})
    data = str(tmp_path / "s" / "data.mdb")
    assert _native.lmdb_check(data) is None
    assert _native.lmdb_digests(data, txnid, [(b"t", False)]) == [expected(records, False)]


def test_a_page_read_in_a_window_is_checked_like_any_other(tmp_path: Path) -> None:
    """A leaf page far into a store walked in file order, its page number damaged: the
    check names it and the walk declines, though the page came in a window of others."""
    records = LARGE["in_order"]
    txnid = app_store(tmp_path / "s", {b"t": records})
    path = tmp_path / "s" / "data.mdb"
    raw = bytearray(path.read_bytes())
    psize = struct.unpack_from("<I", raw, 40)[0]
    leaves = [p for p in range(2, len(raw) // psize) if raw[p * psize + 10] == 2]
    assert len(leaves) > 500, len(leaves)
    page = leaves[len(leaves) * 3 // 4]
    struct.pack_into("<Q", raw, page * psize, page + 1)
    path.write_bytes(bytes(raw))
    assert _native.lmdb_check(str(path)) == f"page {page} says it is page {page + 1}"
    with pytest.raises(ValueError, match=f"page {page} says it is page {page + 1}"):
        _native.lmdb_digests(str(path), txnid, [(b"t", False)])


def test_versioned_tables_split_the_big_endian_version(tmp_path: Path) -> None:
    records = shuffled(
        [(b"s%05d" % i, (i * 7919).to_bytes(8, "big") + b"value" * (i % 50)) for i in range(3000)]
        + [(b"max", (2**64 - 1).to_bytes(8, "big"))]
    )
    txnid = app_store(tmp_path / "s", {b"plain": SHAPES["one"], b"vers": records})
    got = _native.lmdb_digests(
        str(tmp_path / "s" / "data.mdb"), txnid, [(b"vers", True), (b"plain", False)]
    )
    assert got == [expected(records, versioned=True), expected(SHAPES["one"], versioned=False)]


@pytest.mark.parametrize(
    "why, tables, flags, ask",
    [
        ("duplicate keys", {b"t": [(b"k", b"1"), (b"k", b"2")]}, {"dupsort": True}, b"t"),
        ("integer keys", {b"t": [(b"\x01\x00\x00\x00", b"1")]}, {"integerkey": True}, b"t"),
        ("reversed keys", {b"t": [(b"ab", b"1"), (b"ba", b"2")]}, {"reverse_key": True}, b"t"),
        ("no such table", {b"t": [(b"k", b"v")]}, {}, b"absent"),
    ],
)
def test_walk_declines_what_it_does_not_read(why, tables, flags, ask, tmp_path: Path) -> None:
    txnid = app_store(tmp_path / "s", tables, flags)
    with pytest.raises(ValueError):
        _native.lmdb_digests(str(tmp_path / "s" / "data.mdb"), txnid, [(ask, False)])


def test_walk_declines_a_versioned_value_shorter_than_its_version(tmp_path: Path) -> None:
    txnid = app_store(tmp_path / "s", {b"t": [(b"k", b"1234567")]})
    with pytest.raises(ValueError, match="8-byte version"):
        _native.lmdb_digests(str(tmp_path / "s" / "data.mdb"), txnid, [(b"t", True)])


def test_walk_declines_a_snapshot_whose_meta_page_was_overwritten(tmp_path: Path) -> None:
    """LMDB keeps two meta pages: two later commits leave none naming the snapshot."""
    path = tmp_path / "s"
    txnid = app_store(path, {b"t": [(b"k", b"v")]})
    ok = _native.lmdb_digests(str(path / "data.mdb"), txnid, [(b"t", False)])
    assert ok == [expected([(b"k", b"v")], versioned=False)]
    app_store(path, {b"t": [(b"k2", b"v")]})
    app_store(path, {b"t": [(b"k3", b"v")]})
    with pytest.raises(ValueError, match=f"transaction {txnid}"):
        _native.lmdb_digests(str(path / "data.mdb"), txnid, [(b"t", False)])


def test_checksum_walks_and_agrees_with_the_cursor(tmp_path: Path) -> None:
    """The same store digested through the walk and through the driver's cursor."""
    from statemigrate.testing.workload import write_workload

    path = write_workload(LmdbEngine, tmp_path / "w.lmdb", 5000)
    with LmdbEngine.open_reader(path) as reader:
        tables = reader.tables()
        walked = reader.native_digests(tables)
        assert walked is not None
        reader.native_digests = lambda tables: None  # type: ignore[method-assign]
        cursor = digest_store(reader, tables, str(path))
    assert [(d.count, d.sum) for d in cursor.values()] == [(c, s) for c, s, _ in walked]
    assert checksum(str(path)).tables == [
        {"table": t.name, "kind": t.kind.value, **cursor[t.name].to_json()} for t in tables
    ]


def _holder(path: Path, then_write: bool) -> subprocess.Popen:
    """An app with the environment open (py-lmdb); it commits once when told to."""
    code = (
        "import lmdb, sys\n"
        f"env = lmdb.open({str(path)!r}, subdir=True, max_dbs=8)\n"
        "print('ready', flush=True)\n"
        "sys.stdin.readline()\n"
        f"if {then_write}:\n"
        "    with env.begin(write=True) as txn:\n"
        "        txn.put(b'k', b'new', db=env.open_db(b'events', txn=txn))\n"
        "print('done', flush=True)\n"
        "sys.stdin.read()\n"
    )
    proc = subprocess.Popen(
        [sys.executable, "-c", code], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _step(proc: subprocess.Popen) -> None:
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write("go\n")
    proc.stdin.flush()
    assert proc.stdout.readline().strip() == "done"


def _end(proc: subprocess.Popen) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    assert proc.wait(timeout=60) == 0  # a hang guard only


def test_a_commit_after_the_reader_opened_is_refused_not_walked(tmp_path: Path) -> None:
    """Without LMDB's lock (no app had it open), a commit meanwhile is caught after the walk."""
    from statemigrate.testing.workload import write_workload

    path = write_workload(LmdbEngine, tmp_path / "w.lmdb", 2000)
    with LmdbEngine.open_reader(path) as reader:
        assert not reader.locked
        proc = _holder(path, then_write=True)
        try:
            _step(proc)  # one commit: the reader's meta page is still there
            with pytest.raises(StoreBusyError, match="wrote to the store while it was being read"):
                digest_store(reader, reader.tables(), str(path))
        finally:
            _end(proc)


def test_an_environment_an_app_holds_is_read_through_the_cursor(tmp_path: Path) -> None:
    """Registered in LMDB's reader table, the reader leaves the page walk alone."""
    from statemigrate.testing.workload import write_workload

    path = write_workload(LmdbEngine, tmp_path / "w.lmdb", 2000)
    alone = checksum(str(path)).digest
    proc = _holder(path, then_write=False)
    try:
        with LmdbEngine.open_reader(path) as reader:
            assert reader.locked
            assert reader.native_digests(reader.tables()) is None
        assert checksum(str(path)).digest == alone
    finally:
        _step(proc)
        _end(proc)
