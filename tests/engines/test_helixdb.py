"""HelixDB quirks: ordered reads through the range index, a reader that writes manifests,
no lock file, the synchronous client under a running event loop, labels for any name."""

from __future__ import annotations

import asyncio
import base64
import os
import random
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from helixdb import Client, Disk, PropertyInput, g, write_batch

from statemigrate import convert, verify
from statemigrate.engines import helixdb as helixdb_engine
from statemigrate.engines.helixdb import HelixdbEngine, HelixdbReader, label_of
from statemigrate.errors import DestinationError, SourceError, StoreBusyError
from statemigrate.fsutil import store_size
from statemigrate.model import TableInfo, TableKind
from statemigrate.registry import get_engine
from statemigrate.testing.holders import APP_CODE, running
from statemigrate.testing.stores import read_store, tree_sha256, write_store

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def test_fixture_reads_unchanged_and_converts(tmp_path):
    src = FIXTURES / "helixdb" / "app.helixdb"
    before = tree_sha256(src)
    got = read_store(HelixdbEngine, src)
    assert len(got["tables"]["events"][1]) == 2000
    assert got["tables"]["settings"][0] == "versioned"
    out = tmp_path / "app.sqlite"
    convert(str(src), str(out))  # detected as helixdb by manifest/ and wal/
    assert verify(str(src), str(out)).equal
    # The driver's reader writes new manifests; ours reads a private image instead.
    assert tree_sha256(src) == before


def test_keys_come_back_ascending_whatever_the_insertion_order(tmp_path):
    path, keys = _shuffled_store(tmp_path, 1500)
    with HelixdbEngine.open_reader(path) as reader:
        (table,) = reader.tables()
        got = [r[0] for b in reader.read_batches(table, max_records=97) for r in b]
        assert got == keys
        middle = keys[700]
        assert [r[0] for b in reader.read_batches(table, middle) for r in b] == keys[701:]


def _shuffled_store(tmp_path: Path, n: int) -> tuple[Path, list[bytes]]:
    """A store whose table's nodes were added in random order, straight through the driver."""
    path = tmp_path / "s.helixdb"
    w = HelixdbEngine.create_writer(path)
    w.create_table(TableInfo("t"))
    w.finish()
    w.close()
    rnd = random.Random(5)
    keys = list({rnd.randbytes(rnd.randint(0, 6)) for _ in range(n)})
    rnd.shuffle(keys)
    client = Client.embedded(Disk(str(path), "db"))
    props = [("k", PropertyInput.param("k")), ("v", PropertyInput.param("v"))]
    body = write_batch().var_as("n", g().add_n(label_of("t"), props))
    for i in range(0, len(keys), 500):
        rows = [{"k": k.hex(), "v": base64.b64encode(k).decode()} for k in keys[i : i + 500]]
        request = write_batch().for_each_param("rows", body).to_query_request()
        client.query(request.with_untyped_parameter("rows", rows))
    client.close()
    return path, sorted(keys)


def test_the_fallback_external_sort_is_exact_with_bounded_runs(tmp_path):
    path, keys = _shuffled_store(tmp_path, 1200)
    with HelixdbEngine.open_reader(path) as reader:
        assert isinstance(reader, HelixdbReader) and reader.hx is not None
        table = TableInfo("t")
        # Runs of ~1 KB: dozens of spilled runs merged.
        got = [
            r
            for b in helixdb_engine.sorted_by_scan(reader.hx, path, table, None, 50, 1 << 20, 1024)
            for r in b
        ]
        assert [r[0] for r in got] == keys and all(r[1] == r[0] for r in got)
        tail = helixdb_engine.sorted_by_scan(reader.hx, path, table, keys[500], 50, 1 << 20, 1024)
        assert [r[0] for b in tail for r in b] == keys[501:]


def test_an_out_of_order_page_switches_to_the_sort(tmp_path, monkeypatch):
    path, keys = _shuffled_store(tmp_path, 800)
    real = helixdb_engine.decode_rows
    calls = []

    def third_page_out_of_order(*args):
        calls.append(1)
        if len(calls) == 3:
            raise helixdb_engine.OutOfOrder("simulated")
        return real(*args)

    monkeypatch.setattr(helixdb_engine, "decode_rows", third_page_out_of_order)
    with HelixdbEngine.open_reader(path) as reader:
        got = [r[0] for b in reader.read_batches(reader.tables()[0], max_records=64) for r in b]
    assert len(calls) == 3
    assert got == keys


def test_an_out_of_order_answer_is_refused(tmp_path):
    path = write_store(HelixdbEngine, tmp_path / "s.helixdb", {TableInfo("t"): [(b"a", b"")]})
    with HelixdbEngine.open_reader(path) as reader:
        assert isinstance(reader, HelixdbReader)
        with pytest.raises(SourceError, match="out of key order"):
            reader._decode([{"k": "02", "v": ""}, {"k": "01", "v": ""}], None, TableInfo("t"))


def test_works_under_a_running_event_loop(tmp_path):
    async def app() -> dict:
        # The driver's synchronous client refuses to run here; the engine uses a private thread.
        path = write_store(
            HelixdbEngine,
            tmp_path / "s.helixdb",
            {TableInfo("t", TableKind.VERSIONED): [(b"k", b"v", 3)]},
        )
        return read_store(HelixdbEngine, path)

    assert asyncio.run(app())["tables"] == {"t": ("versioned", [(b"k", b"v", 3)])}


def _child(code: str, path: Path) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", code, str(path)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _release(proc: subprocess.Popen) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=30)


def test_a_second_statemigrate_writer_is_busy(tmp_path):
    path = write_store(HelixdbEngine, tmp_path / "s.helixdb", {TableInfo("t"): [(b"a", b"1")]})
    proc = _child(
        "import sys\nfrom pathlib import Path\nfrom statemigrate.engines.helixdb import HelixdbEngine\n"
        "w = HelixdbEngine.open_writer(Path(sys.argv[1]))\nprint('ready', flush=True)\nsys.stdin.read()\n"
        "w.close()\n",
        path,
    )
    try:
        with pytest.raises(StoreBusyError, match=f"pid {proc.pid}") as err:
            HelixdbEngine.open_writer(path)
        assert err.value.exit_code == 3
    finally:
        _release(proc)


def test_a_writer_taken_over_by_another_client_fails_busy(tmp_path):
    path = write_store(HelixdbEngine, tmp_path / "s.helixdb", {TableInfo("t"): [(b"a", b"1")]})
    w = HelixdbEngine.open_writer(path)
    try:
        proc = _child(
            "import sys\nfrom pathlib import Path\nfrom helixdb import Client, Disk\n"
            "p = Path(sys.argv[1])\nc = Client.embedded(Disk(str(p), 'db'))\n"
            "print('ready', flush=True)\nsys.stdin.read()\nc.close()\n",
            path,
        )
        try:
            with pytest.raises(StoreBusyError, match="another HelixDB client") as err:
                w.write_batch(TableInfo("t"), [(b"b", b"2")])
            assert err.value.exit_code == 3
        finally:
            _release(proc)
    finally:
        w.close()


def test_labels_are_reversible_and_plain():
    for name in ['x"; DROP TABLE y; --', "../../etc", "状态", "é" * 127 + "x"]:
        label = label_of(name)
        assert label.isalnum() and label.isascii()
        assert bytes.fromhex(label[1:]).decode() == name


def test_space_factor_covers_the_measured_footprint():
    src = FIXTURES / "helixdb" / "app.helixdb"
    payload = sum(
        len(r[0]) + len(r[1])
        for t in read_store(HelixdbEngine, src)["tables"].values()
        for r in t[1]
    )
    assert store_size(src) / payload < HelixdbEngine.space_factor


def test_not_a_helixdb_store(tmp_path):
    with pytest.raises(SourceError):
        HelixdbEngine.open_reader(tmp_path / "missing.helixdb")
    (tmp_path / "empty.helixdb").mkdir()
    with pytest.raises(SourceError, match="not a HelixDB store"):
        HelixdbEngine.open_reader(tmp_path / "empty.helixdb")
    assert sorted(os.listdir(tmp_path)) == ["empty.helixdb"]
    assert os.listdir(tmp_path / "empty.helixdb") == []


def test_a_store_laid_out_by_an_app_reads_the_same(tmp_path):
    # Disk(ROOT, NAME): the database directory itself rather than PATH/db.
    flat = FIXTURES / "helixdb" / "app-flat.helixdb"
    before = tree_sha256(flat)
    assert HelixdbEngine.detect(flat)
    assert read_store(HelixdbEngine, flat) == read_store(
        HelixdbEngine, FIXTURES / "helixdb" / "app.helixdb"
    )
    assert tree_sha256(flat) == before


def test_paths_helixdb_would_encode_work(tmp_path):
    # HelixDB percent-encodes a non-ASCII database name (twice for some directories);
    # the database inside a store is always called "db", so any store path works.
    odd = tmp_path / "état #1 %41"
    odd.mkdir()
    src = FIXTURES / "sqlite" / "app.sqlite"
    out = odd / "état.helixdb"
    convert(str(src), f"helixdb:{out}", tables=["settings"])
    assert sorted(os.listdir(odd)) == ["état.helixdb"]
    assert sorted(os.listdir(out)) == ["db"]
    got = read_store(HelixdbEngine, out)["tables"]["settings"]
    assert got == read_store(get_engine("sqlite"), src)["tables"]["settings"]


def test_an_app_store_with_a_name_helixdb_would_encode_is_not_written(tmp_path):
    shutil.copytree(FIXTURES / "helixdb" / "app-flat.helixdb", tmp_path / "état")
    with pytest.raises(DestinationError, match="would encode this database name"):
        HelixdbEngine.open_writer(tmp_path / "état")
    assert read_store(HelixdbEngine, tmp_path / "état")["metadata"]["schema"] == b"example-app"


def test_an_app_naming_the_store_is_seen_and_a_namesake_elsewhere_is_not(tmp_path):
    path = write_store(HelixdbEngine, tmp_path / "s.helixdb", {TableInfo("t"): [(b"a", b"1")]})
    elsewhere = tmp_path / "other"
    elsewhere.mkdir()
    write_store(HelixdbEngine, elsewhere / "s.helixdb", {TableInfo("t"): [(b"b", b"2")]})
    # The app opens its store (an embedded client on PATH/db) by a path relative to its
    # working directory, as apps name their data directory.
    app = APP_CODE["helixdb"]
    relative = ["s.helixdb", "idle", "s.helixdb", "db"]
    with running(app, relative, cwd=elsewhere):  # a namesake in another directory: not ours
        w = HelixdbEngine.open_writer(path)
        w.write_batch(TableInfo("t"), [(b"c", b"3")])
        w.finish()
        w.close()
    with running(app, relative, cwd=tmp_path) as pid:  # this very store
        with pytest.raises(StoreBusyError, match=f"pid {pid}\\)") as err:
            HelixdbEngine.open_writer(path)
        assert err.value.exit_code == 3
    assert read_store(HelixdbEngine, path)["tables"]["t"][1] == [(b"a", b"1"), (b"c", b"3")]
    assert read_store(HelixdbEngine, elsewhere / "s.helixdb")["tables"]["t"][1] == [(b"b", b"2")]


def test_backup_holds_every_write_and_the_writer_goes_on(tmp_path):
    path = write_store(HelixdbEngine, tmp_path / "s.helixdb", {TableInfo("t"): [(b"a", b"1")]})
    w = HelixdbEngine.open_writer(path)
    try:
        w.write_batch(TableInfo("t"), [(b"b", b"2")])
        w.backup(tmp_path / "copy.helixdb")
        w.write_batch(TableInfo("t"), [(b"c", b"3")])
        w.finish()
    finally:
        w.close()
    assert read_store(HelixdbEngine, tmp_path / "copy.helixdb")["tables"]["t"][1] == [
        (b"a", b"1"),
        (b"b", b"2"),
    ]
    assert [r[0] for r in read_store(HelixdbEngine, path)["tables"]["t"][1]] == [b"a", b"b", b"c"]
    assert "statemigrate.lock" not in os.listdir(tmp_path / "copy.helixdb")
