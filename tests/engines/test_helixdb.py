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
from statemigrate.engines.helixdb import HelixdbEngine, HelixdbReader, label_of
from statemigrate.engines.helixdb import reader as helixdb_reader
from statemigrate.errors import DestinationError, SourceError, StoreBusyError
from statemigrate.fsutil import store_size
from statemigrate.model import TableInfo, TableKind
from statemigrate.registry import get_engine
from statemigrate.testing.holders import app_code, running
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
            for b in helixdb_reader.sorted_by_scan(reader.hx, path, table, None, 50, 1 << 20, 1024)
            for r in b
        ]
        assert [r[0] for r in got] == keys and all(r[1] == r[0] for r in got)
        tail = helixdb_reader.sorted_by_scan(reader.hx, path, table, keys[500], 50, 1 << 20, 1024)
        assert [r[0] for b in tail for r in b] == keys[501:]


def test_an_out_of_order_page_switches_to_the_sort(tmp_path, monkeypatch):
    path, keys = _shuffled_store(tmp_path, 800)
    real = helixdb_reader.decode_rows
    calls = []

    def third_page_out_of_order(*args):
        calls.append(1)
        if len(calls) == 3:
            raise helixdb_reader.OutOfOrder("simulated")
        return real(*args)

    monkeypatch.setattr(helixdb_reader, "decode_rows", third_page_out_of_order)
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
    app = app_code("helixdb")
    relative = ["s.helixdb", "idle"]
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


# Stores written with HelixDB's embedded client alone, laid out as DESIGN.md documents
# (no statemigrate code, so no private 'helixdb.table:' list): convert copies every
# record, or refuses with exit 4; never exit 0 with fewer records.

DRIVER_CONTENT = {
    "plain": ("plain", [(b"", b"empty key"), (b"a", b""), (b"b", b"\xff")]),
    "many": ("plain", [(b"k%04d" % i, b"v" * (i % 7)) for i in range(250)]),
    "versioned": ("versioned", [(b"k", b"v", 2**64 - 1), (b"l", b"", 0), (b"m", b"x", 2**63)]),
    'a "quoted"/é name': ("plain", [(b"\x00", b"\x00\xff")]),
    "empty": ("versioned", []),  # no nodes: only its kind: entry says it exists
}
DRIVER_META = {"schema": b"driver-app", "revision": b'["0001"]', "kind:empty": b"versioned"}
CLI_TIMEOUT = 300  # seconds: a hang guard only; a conversion here takes a few seconds


def _node(kind: str, rec: tuple) -> dict:
    props = {"k": rec[0].hex(), "v": base64.b64encode(rec[1]).decode()}
    if kind == "versioned":
        props["ver"] = rec[2] - 2**64 if rec[2] >= 2**63 else rec[2]
    return props


def _content_nodes(content: dict, seed: int | None = 7) -> list[tuple[str, dict]]:
    """Every record as ``(label, properties)``, shuffled unless ``seed`` is None."""
    nodes = [
        (label_of(name), _node(kind, rec)) for name, (kind, recs) in content.items() for rec in recs
    ]
    if seed is not None:
        random.Random(seed).shuffle(nodes)
    return nodes


def _wait_for_index(client: Client, op: str) -> None:
    import time

    from helixdb import read_batch

    deadline = time.monotonic() + 300  # a hang guard only, not a timed assertion
    while True:
        request = read_batch().var_as("s", g().get_index_operation(op)).returning(["s"])
        status = client.query(request.to_query_request())["s"].get("status")
        if status == "succeeded":
            return
        assert status not in ("aborted", "failed") and time.monotonic() < deadline, status
        time.sleep(0.05)


def _driver_store(
    path: Path,
    nodes: list[tuple[str, dict]],
    meta: dict[str, bytes],
    indexed: list[str],
) -> Path:
    """A store written with the embedded client alone: range indexes on ``k`` of the
    ``indexed`` labels (built before any node, as an app's backend does), then the nodes
    in the order given (consecutive nodes of one shape in one write batch), then the
    metadata nodes."""
    from helixdb import IndexSpec

    path.mkdir()
    client = Client.embedded(Disk(str(path), "db"))
    try:
        for label in indexed:
            spec = IndexSpec.node_range(label, "k")
            request = write_batch().var_as("ix", g().create_index_if_not_exists(spec))
            answer = client.query(request.returning(["ix"]).to_query_request())
            _wait_for_index(client, answer["ix"]["operation_id"])
        meta_nodes = [
            ("__statemigrate__", {"key": k, "value": base64.b64encode(v).decode()})
            for k, v in meta.items()
        ]
        groups: list[tuple[str, list[str], list[dict]]] = []
        for label, props in nodes + meta_nodes:
            shape = sorted(props)
            if groups and groups[-1][:2] == (label, shape):
                groups[-1][2].append(props)
            else:
                groups.append((label, shape, [props]))
        for label, shape, rows in groups:
            body = write_batch().var_as(
                "n", g().add_n(label, [(p, PropertyInput.param(p)) for p in shape])
            )
            request = write_batch().for_each_param("rows", body).to_query_request()
            client.query(request.with_untyped_parameter("rows", rows))
    finally:
        client.close()
    return path


def _driver_app_store(
    path: Path, extra: list[tuple[str, dict]] | None = None, **meta: bytes
) -> Path:
    """DRIVER_CONTENT and DRIVER_META (``meta`` added) written by the driver, plus ``extra`` nodes."""
    nodes = _content_nodes(DRIVER_CONTENT) + (extra or [])
    labels = [label_of(name) for name in DRIVER_CONTENT]
    return _driver_store(path, nodes, {**DRIVER_META, **meta}, labels)


def _convert_cli(src: Path, dst: Path, *options: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "statemigrate", "convert", "--quiet", "--from", "helixdb"]
        + ["--to", "sqlite", *options, str(src), str(dst)],
        capture_output=True,
        text=True,
        timeout=CLI_TIMEOUT,
        check=False,
    )


def _expected(content: dict) -> dict:
    return {name: (kind, sorted(recs)) for name, (kind, recs) in content.items()}


def test_a_store_written_by_the_driver_alone_converts_every_record(tmp_path):
    src = _driver_app_store(tmp_path / "app.helixdb")
    before = tree_sha256(src)
    with HelixdbEngine.open_reader(src) as reader:
        assert reader.list_tables() == [
            TableInfo(name, TableKind(kind))
            for name, (kind, _r) in sorted(DRIVER_CONTENT.items(), key=lambda i: i[0].encode())
        ]
    done = _convert_cli(src, tmp_path / "out.sqlite")
    assert done.returncode == 0, done.stderr
    got = read_store(get_engine("sqlite"), tmp_path / "out.sqlite")
    assert got["tables"] == _expected(DRIVER_CONTENT)
    assert got["metadata"]["schema"] == b"driver-app"
    assert not [k for k in got["metadata"] if k.startswith(("kind:", "helixdb.table:"))]
    assert tree_sha256(src) == before


def test_a_writer_on_a_driver_store_sees_and_drops_its_tables(tmp_path):
    src = _driver_app_store(tmp_path / "app.helixdb")
    w = HelixdbEngine.open_writer(src)
    try:
        assert {t.name: t.kind.value for t in w.list_tables()} == {
            name: kind for name, (kind, _r) in DRIVER_CONTENT.items()
        }
        w.drop_table("many")
        w.drop_table("empty")
        w.finish()
    finally:
        w.close()
    left = {k: v for k, v in DRIVER_CONTENT.items() if k not in ("many", "empty")}
    assert read_store(HelixdbEngine, src)["tables"] == _expected(left)


def test_statemigrate_writes_kinds_a_driver_reader_can_use(tmp_path):
    from helixdb import SourcePredicate

    tables = {TableInfo("p"): [], TableInfo("v", TableKind.VERSIONED): [(b"k", b"", 1)]}
    path = write_store(HelixdbEngine, tmp_path / "s.helixdb", tables)
    client = Client.embedded(Disk(str(path), "db"))
    try:
        # Without the private list, the kind: entries alone keep the empty table.
        private = SourcePredicate.starts_with("key", "helixdb.table:")
        drop = g().n_with_label_where("__statemigrate__", private).drop()
        client.query(write_batch().var_as("x", drop).to_query_request())
    finally:
        client.close()
    got = read_store(HelixdbEngine, path)
    assert got["tables"] == {"p": ("plain", []), "v": ("versioned", [(b"k", b"", 1)])}


def _short_run_first() -> list[tuple[str, dict]]:
    # Without a range index HelixDB answers in insertion order: 150 ascending keys, then
    # 50 smaller ones, read in pages of 'k > last', give the first 150 only.
    recs = [(b"%03d" % i, b"x") for i in list(range(50, 200)) + list(range(50))]
    return [(label_of("t"), _node("plain", r)) for r in recs]


REFUSED = {
    "no range index": (
        lambda p: _driver_store(p, _short_run_first(), {}, indexed=[]),
        "range index on 'k' is missing or incomplete",
    ),
    "a node without k": (
        lambda p: _driver_app_store(p, [(label_of("plain"), {"v": "eA=="})]),
        "range index on 'k' is missing or incomplete",
    ),
    "a foreign label": (
        lambda p: _driver_app_store(p, [("Person", {"name": "x"})]),
        "node labels 'Person' not in statemigrate's layout",
    ),
    "kind: disagrees with the records": (
        lambda p: _driver_app_store(p, **{"kind:versioned": b"plain"}),
        "'versioned' is plain in the metadata, but its records are versioned",
    ),
    "a plain table's record with ver": (
        lambda p: _driver_store(
            p,
            [
                (label_of("t"), {"k": "00", "v": ""}),
                (label_of("t"), {"k": "01", "v": "", "ver": 1}),
            ],
            {},
            indexed=[label_of("t")],
        ),
        "has 'ver' in a plain table",
    ),
}


@pytest.mark.parametrize("case", sorted(REFUSED))
def test_a_driver_store_that_cannot_be_read_whole_is_refused(case, tmp_path):
    make, message = REFUSED[case]
    src = make(tmp_path / "app.helixdb")
    before = tree_sha256(src)
    done = _convert_cli(src, tmp_path / "out.sqlite")
    assert done.returncode == 4, done.stderr
    errors = [line for line in done.stderr.splitlines() if not line.startswith("hint:")]
    assert len(errors) == 1 and message in errors[0], done.stderr
    assert sorted(os.listdir(tmp_path)) == ["app.helixdb"]  # no DST, no DST.partial
    assert tree_sha256(src) == before


def test_foreign_labels_are_left_out_on_request(tmp_path):
    src = _driver_app_store(tmp_path / "app.helixdb", [("Person", {"name": "x"})])
    done = _convert_cli(src, tmp_path / "out.sqlite", "--skip-foreign-tables")
    assert done.returncode == 0, done.stderr
    assert read_store(get_engine("sqlite"), tmp_path / "out.sqlite")["tables"] == _expected(
        DRIVER_CONTENT
    )


_KILLED_MID_BUILD = """
import os, random, sys, pathlib
from statemigrate.registry import get_engine
from statemigrate.model import TableInfo, TableKind
w = get_engine("helixdb").create_writer(pathlib.Path(sys.argv[1]))
t = TableInfo("events", TableKind.PLAIN)
keys = [i.to_bytes(4, "big") for i in range(int(sys.argv[2]))]
random.Random(7).shuffle(keys)
w.write_batch(t, [(k, k * 3) for k in keys])
w.create_table(t)  # the range index is built over the records already there ...
os.kill(os.getpid(), 9)  # ... and the build is still queued or running when killed
"""


def test_a_table_whose_index_build_a_kill_left_unfinished_reads_whole_and_in_order(tmp_path):
    """A writer killed while HelixDB builds a table's range index leaves the build queued
    or running for good, as readers see it; the table is then read without the index
    (sorted by scan), never refused after a wait, never read short."""
    from statemigrate.engines.helixdb.tables import _read_meta, _registry, index_state

    store, n = tmp_path / "killed.helixdb", 20_000
    run = subprocess.run(
        [sys.executable, "-c", _KILLED_MID_BUILD, str(store), str(n)], check=False, timeout=120
    )
    assert run.returncode == -9
    before = tree_sha256(store)
    reader = HelixdbReader(HelixdbEngine, store)
    try:
        assert reader.hx is not None
        entry = _registry(_read_meta(reader.hx))[label_of("events")]
        state = index_state(reader.hx, entry["index_op"])
        assert state in ("queued", "running"), f"the build finished before the kill: {state}"
        assert reader._unindexed == {"events"}
    finally:
        reader.close()
    expected = [(i.to_bytes(4, "big"), i.to_bytes(4, "big") * 3) for i in range(n)]
    assert read_store(HelixdbEngine, store)["tables"]["events"] == ("plain", expected)
    assert tree_sha256(store) == before
    # A writer (an upgrade run again after the kill) reads it whole and in order too.
    w = HelixdbEngine.open_writer(store)
    try:
        table = TableInfo("events", TableKind.PLAIN)
        assert [r for b in w.scan(table, None, 4096, 1 << 20) for r in b] == expected
        w.finish()
    finally:
        w.close()
