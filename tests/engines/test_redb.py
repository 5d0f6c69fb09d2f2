"""redb quirks: every file format, typed tables, locks, damaged files, an untouched source."""

from __future__ import annotations

import hashlib
import json
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import threading
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemigrate import convert
from statemigrate.engines.redb import RedbEngine, read_header
from statemigrate.errors import DestinationError, StoreBusyError, UsageError
from statemigrate.model import MAX_VERSION, TableInfo, TableKind
from statemigrate.testing.cli import DROP_DAC
from statemigrate.testing.holders import app_holding
from statemigrate.testing.phases import Phases
from statemigrate.testing.stores import read_store, write_store

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "redb"
# Fixture files by id: 1, 2, 3 are redb 1.5, 2.6 and 4.x writing their own formats;
# 4 is redb 2.6 writing format 3 (its opt-in), with redb 2.x type names and tuple layout;
# 5 is redb 3.x (the 3.0 tuple layout, variable-width tuples classified Internal2).
FILES = {
    1: "redb1-format1.redb",
    2: "redb2-format2.redb",
    3: "redb4-format3.redb",
    4: "redb2-format3.redb",
    5: "redb3-format3.redb",
}
FORMAT = {1: 1, 2: 2, 3: 3, 4: 3, 5: 3}
LEGACY = {1, 2, 4}  # written by redb <= 2.x
CUSTOM_TYPES = ["fixture::RevId", "fixture::ShortLex"]
ODD_KEYS = [
    b"",
    b"\x00",
    b"\x00\x00",
    b"\x00\xff",
    b"\xff",
    b"\xff\xff",
    b"a",
    b"a\x00",
    b"ab",
    b"k" * 1000,
]


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def all_records(reader, table, **kw):
    return [r for b in reader.read_batches(table, **kw) for r in b]


def encode_key(type_name: str, stored: bytes, fmt: int) -> bytes:
    from statemigrate import _native

    return _native.redb_encode_key(type_name, stored, fmt in LEGACY)


def escaped(b: bytes) -> bytes:
    return b.replace(b"\x00", b"\x00\xff") + b"\x00\x00"


# --- writing and reading back -------------------------------------------------------


@pytest.mark.parametrize("fmt", [2, 3])
def test_round_trip_odd_keys_and_extreme_versions(tmp_path, fmt):
    plain = [(k, k[::-1] * 3) for k in ODD_KEYS]
    versioned = [(k, b"v" * i, [0, MAX_VERSION, 1, 2**63][i % 4]) for i, k in enumerate(ODD_KEYS)]
    path = write_store(
        RedbEngine,
        tmp_path / "s.redb",
        {TableInfo("p"): plain, TableInfo("v", TableKind.VERSIONED): versioned, TableInfo("e"): []},
        metadata={"schema": b"app", "revision": b'["r1"]'},
        batch=3,
        options={"redb_format": fmt},
    )
    assert read_header(path)["format"] == fmt
    got = read_store(RedbEngine, path)
    assert got["tables"]["p"] == ("plain", sorted(plain))
    assert got["tables"]["v"] == ("versioned", sorted(versioned))
    assert got["tables"]["e"] == ("plain", [])
    assert got["metadata"]["schema"] == b"app"


def test_batches_are_bounded_and_resume_strictly_after_a_key(tmp_path):
    recs = [(b"%04d" % i, b"x" * 100) for i in range(50)]
    path = write_store(RedbEngine, tmp_path / "b.redb", {TableInfo("t"): recs})
    with RedbEngine.open_reader(path) as reader:
        (t,) = reader.tables()
        sizes = [len(b) for b in reader.read_batches(t, max_records=7)]
        assert sizes == [7] * 7 + [1]
        by_bytes = [len(b) for b in reader.read_batches(t, max_bytes=1000)]
        assert max(by_bytes) == 10  # 10 records of 104 bytes reach 1000 bytes
        rest = all_records(reader, t, after=b"0041")
        assert [r[0] for r in rest] == [b"%04d" % i for i in range(42, 50)]
        assert all_records(reader, t, after=b"0041\x00")[0][0] == b"0042"


def test_a_batch_is_committed_with_its_metadata(tmp_path):
    path = tmp_path / "m.redb"
    w = RedbEngine.create_writer(path)
    t = TableInfo("t")
    w.create_table(t)
    w.write_batch(t, [(b"a", b"1")], {"checkpoint": b"a", "schema": b"s"})
    w.write_batch(t, [(b"b", b"2")], {"checkpoint": None})
    assert w.metadata() == {"schema": b"s"}
    w.finish()
    w.close()
    w = RedbEngine.open_writer(path)
    assert [x.name for x in w.list_tables()] == ["t"]
    w.close()
    assert read_store(RedbEngine, path)["tables"]["t"][1] == [(b"a", b"1"), (b"b", b"2")]


@pytest.mark.parametrize("fmt", [2, 3])
def test_batches_that_do_not_append_overwrite_as_inserts_do(tmp_path, fmt):
    """redb 4.x's writer appends a batch through a cursor at the table's end when its
    keys ascend past the table's last key; a batch that does not (an in-place upgrade
    rewriting keys the table holds, keys out of order, a key twice) goes in record by
    record and overwrites, in either format, as redb's `insert` does."""
    path = tmp_path / "o.redb"
    w = RedbEngine.create_writer(path, {"redb_format": fmt})
    p, v = TableInfo("p"), TableInfo("v", TableKind.VERSIONED)
    w.create_table(p)
    w.create_table(v)
    plain_batches = [
        [(b"b", b"1"), (b"d", b"2")],  # appends to the empty table
        [(b"e", b"3"), (b"f", b"4")],  # appends after "d"
        [(b"a", b"5"), (b"d", b"6")],  # before and on existing keys
        [(b"h", b"7"), (b"g", b"8")],  # after the last key, out of order
        [(b"i", b"9"), (b"i", b"10")],  # one key twice
    ]
    expected: dict[bytes, bytes] = {}
    for batch in plain_batches:
        w.write_batch(p, batch)
        expected.update(batch)
    versioned = [[(b"k", b"x", 1), (b"m", b"y", 2)], [(b"k", b"z", 3)], [(b"n", b"w", 4)]]
    expected_v: dict[bytes, tuple[bytes, int]] = {}
    for batch in versioned:
        w.write_batch(v, batch)
        expected_v.update({k: (val, ver) for k, val, ver in batch})
    w.finish()
    w.close()
    got = read_store(RedbEngine, path)["tables"]
    assert got["p"] == ("plain", sorted(expected.items()))
    assert got["v"] == ("versioned", sorted((k, x, n) for k, (x, n) in expected_v.items()))


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_held_batch_is_the_list_batch_held_in_rust(tmp_path, fmt):
    """What a redb source reads for a redb writer (``read_batches(held=True)``) shows the
    same records as the list batch, digests to the same figures and moves on after the
    same key; the writer takes it like the list, and refuses one of the other kind."""
    from statemigrate import _native
    from statemigrate.stores.walk import batch_facts

    plain = [(k, k[::-1] * 3) for k in ODD_KEYS]
    versioned = [(k, b"v" * i, [0, MAX_VERSION, 1, 2**63][i % 4]) for i, k in enumerate(ODD_KEYS)]
    tables = {TableInfo("p"): plain, TableInfo("v", TableKind.VERSIONED): versioned}
    path = write_store(RedbEngine, tmp_path / "h.redb", tables, options={"redb_format": fmt})
    out = tmp_path / "out.redb"
    w = RedbEngine.create_writer(out, {"redb_format": 3})
    with RedbEngine.open_reader(path) as reader:
        assert w.takes_held(reader)
        for t in reader.tables():
            w.create_table(t)
            lists = list(reader.read_batches(t, max_records=4))
            held = list(reader.read_batches(t, max_records=4, held=True))
            assert all(isinstance(b, _native.HeldBatch) for b in held)
            assert [len(b) for b in held] == [len(b) for b in lists] == [4, 4, 2]
            for a, b in zip(lists, held, strict=True):
                assert list(b) == a  # iteration falls back to indexing
                assert b[-1] == a[-1] and b[0] == a[0] and b[-len(a)] == a[0]
                with pytest.raises(IndexError):
                    b[len(a)]
                for after in (None, a[0][0]):
                    assert batch_facts(b, t.versioned, after) == batch_facts(a, t.versioned, after)
                # asked for the other kind's digest, as batch_digest gives it
                flipped = [r[:2] for r in a] if t.versioned else [(*r, 0) for r in a]
                assert b.digest(not t.versioned) == _native.batch_digest(flipped, not t.versioned)
                w.write_batch(t, b)
            wrong = "plain" if t.versioned else "versioned"
            with pytest.raises(ValueError, match=f"held batch .* cannot be written to a {wrong}"):
                w._handle().write_batch(reader._desc_of(t), wrong, held[0], [])
        w.finish()
        w.close()
    got = read_store(RedbEngine, out)["tables"]
    assert got["p"] == ("plain", sorted(plain))
    assert got["v"] == ("versioned", sorted(versioned))


def test_a_16_mib_value_round_trips(tmp_path):
    big = os.urandom(16 << 20)
    path = write_store(
        RedbEngine, tmp_path / "big.redb", {TableInfo("t"): [(b"k", big), (b"l", b"")]}
    )
    assert read_store(RedbEngine, path)["tables"]["t"][1] == [(b"k", big), (b"l", b"")]


def test_writer_options_are_checked(tmp_path):
    with pytest.raises(UsageError, match="formats 2 and 3"):
        RedbEngine.create_writer(tmp_path / "x.redb", {"redb_format": 1})
    with pytest.raises(UsageError, match="no option"):
        RedbEngine.create_writer(tmp_path / "x.redb", {"page_size": 1})
    assert not (tmp_path / "x.redb").exists()


# --- the fixtures: every format, every kind of table ---------------------------------


def _expected(fmt: int) -> dict[str, list[tuple[bytes, bytes]]]:
    raw = json.loads((FIXTURES / (FILES[fmt] + ".json")).read_text())
    return {t: [(bytes.fromhex(k), bytes.fromhex(v)) for k, v in rows] for t, rows in raw.items()}


def _versioned(stored: bytes, fmt: int) -> tuple[bytes, int]:
    # (u64, &[u8]): redb <= 2.x prefixes the u32 length of every element but the last.
    body = stored[4:] if fmt in LEGACY else stored
    return body[8:], struct.unpack("<Q", body[:8])[0]


@pytest.mark.parametrize("fmt", [1, 2, 3, 4, 5])
def test_fixture_records_match_what_redb_itself_reads(fmt):
    path = FIXTURES / FILES[fmt]
    before = sha256(path)
    expected = _expected(fmt)
    assert RedbEngine.detect(path)
    assert RedbEngine.format_info(path)["format"] == FORMAT[fmt]
    with RedbEngine.open_reader(path) as reader:
        tables = {t.name: t for t in reader.tables()}
        assert set(tables) == set(expected)
        for name, rows in expected.items():
            t = tables[name]
            got = all_records(reader, t, max_records=2)
            keys = [r[0] for r in got]
            assert keys == sorted(set(keys)), f"{name}: not in strict key order"
            meta = t.meta.get("redb")
            if name in ("plain", "empty"):
                assert t.kind is TableKind.PLAIN and not meta
                assert got == rows
            elif name == "versioned":
                assert t.kind is TableKind.VERSIONED
                assert got == [(k, *_versioned(v, fmt)) for k, v in rows]
            elif name in ("multimap", "empty_multimap"):
                assert meta["multimap"] is True and meta["order"] == "redb"
                assert all(v == b"" for _, v in got)
                if name == "multimap":
                    # key = &str escaped (not last), then the u64 value big-endian.
                    want = [escaped(k) + v[::-1] for k, v in rows]
                    assert keys == want
            elif name.startswith("custom"):
                assert meta["order"] == "custom" and meta["key"]["class"] == "UserDefined"
                # redb's order for these types is not bytewise; records come in byte order.
                assert [k for k, _ in rows] != sorted(k for k, _ in rows)
                assert got == sorted(rows)
            else:
                # Typed: the encoding of each stored key, in redb's own order, is increasing.
                assert meta["order"] == "redb" and meta["multimap"] is False
                assert got == [(encode_key(meta["key"]["name"], k, fmt), v) for k, v in rows]
    assert sha256(path) == before


def _hashed_by_hand(records, versioned: bool) -> tuple[int, int, int]:
    """DESIGN.md's (count, sum of record hashes, payload bytes) with plain xxhash."""
    import xxhash

    total = nbytes = 0
    for rec in records:
        key, value = rec[0], rec[1]
        data = struct.pack("<Q", len(key)) + key + struct.pack("<Q", len(value)) + value
        if versioned:
            data += struct.pack("<Q", rec[2])
        total += xxhash.xxh3_128_intdigest(data)
        nbytes += len(key) + len(value)
    return len(records), total % 2**128, nbytes


@pytest.mark.parametrize("fmt", [1, 2, 3, 4, 5])
def test_fixture_native_digests_are_plain_xxhash_over_its_records(fmt):
    """The digest walk (records lent in place for plain and versioned tables, batches
    for the rest) against the records the test above checks against redb's own reads."""
    path = FIXTURES / FILES[fmt]
    with RedbEngine.open_reader(path) as reader:
        tables = reader.tables()
        walked = reader.native_digests(tables)
        assert walked is not None
        for t, got in zip(tables, walked, strict=True):
            records = all_records(reader, t)
            assert got == _hashed_by_hand(records, t.kind is TableKind.VERSIONED), t.name
    assert {t.name for t in tables} >= {"plain", "versioned", "empty", "multimap"}


_SORTED = r"""
import json, sys
from pathlib import Path
from statemigrate.engines.redb import RedbEngine
with RedbEngine.open_reader(Path(sys.argv[1])) as r:
    out = {t.name: [[k.hex(), v.hex()] for b in r.read_batches(t, max_records=2) for k, v in b]
           for t in r.tables() if t.name.startswith("custom")}
print(json.dumps(out))
"""


@pytest.mark.parametrize("fmt", [1, 2, 3, 4, 5])
def test_custom_order_tables_sort_through_spilled_runs(fmt):
    """With one-record runs every record spills to disk; the merge still yields byte order."""
    env = dict(os.environ, STATEMIGRATE_SORT_RUN_BYTES="1")
    out = subprocess.run(
        [sys.executable, "-c", _SORTED, str(FIXTURES / FILES[fmt])],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert out.returncode == 0, out.stderr[-2000:]
    got = json.loads(out.stdout)
    raw = json.loads((FIXTURES / (FILES[fmt] + ".json")).read_text())
    assert got == {t: sorted(raw[t]) for t in ("custom_fixed", "custom_var")}


def test_typed_table_meta_carries_types_widths_and_classification():
    with RedbEngine.open_reader(FIXTURES / FILES[3]) as reader:
        meta = {t.name: t.meta.get("redb") for t in reader.tables()}
    assert meta["tuple_fixed"]["key"] == {
        "name": "(u32,i16)",
        "class": "Internal3",
        "width": 6,
        "legacy": False,
    }
    assert meta["tuple_fixed"]["value"] == {
        "name": "[u8;4]",
        "class": "Internal3",
        "width": 4,
        "legacy": False,
    }
    assert meta["u64_keys"]["key"] == {
        "name": "u64",
        "class": "Internal",
        "width": 8,
        "legacy": False,
    }
    assert meta["custom_fixed"]["key"] == {
        "name": "fixture::RevId",
        "class": "UserDefined",
        "width": 8,
        "legacy": False,
    }
    assert meta["custom_var"]["key"]["width"] is None
    with RedbEngine.open_reader(FIXTURES / FILES[2]) as reader:
        old = {t.name: t.meta.get("redb") for t in reader.tables()}
    assert old["tuple_var"]["key"] == {
        "name": "(u64,&str,Option<u8>)",
        "class": "Internal",
        "width": None,
        "legacy": True,
    }


@pytest.mark.parametrize(
    ("type_name", "values", "pack"),
    [
        ("i32", [-(2**31), -256, -1, 0, 1, 2**31 - 1], lambda v: struct.pack("<i", v)),
        ("u64", [0, 1, 255, 256, 2**64 - 1], lambda v: struct.pack("<Q", v)),
        ("i128", [-(2**127), -1, 0, 2**127 - 1], lambda v: v.to_bytes(16, "little", signed=True)),
        ("char", ["\x00", "a", "\xe9", "\U0010ffff"], lambda v: ord(v).to_bytes(3, "little")),
        (
            "Option<u16>",
            [None, 0, 7, 65535],
            lambda v: b"\x00\x00\x00" if v is None else b"\x01" + struct.pack("<H", v),
        ),
    ],
)
def test_key_encoding_preserves_redbs_order(type_name, values, pack):
    encs = [encode_key(type_name, pack(v), 3) for v in values]
    assert encs == sorted(encs) and len(set(encs)) == len(encs)


@settings(max_examples=200, deadline=None)
@given(
    st.lists(
        st.tuples(st.integers(-(2**15), 2**15 - 1), st.binary(max_size=6), st.booleans()),
        min_size=2,
        max_size=20,
    )
)
def test_variable_width_tuple_encoding_order_property(items):
    """(i16, &[u8], bool) in redb 3+ layout (varint lengths of the variable-width elements
    but the last, then the elements) and in the redb <= 2.x layout (u32 lengths of every
    element but the last)."""

    def stored(t):
        a, b, c = t
        return bytes([len(b)]) + struct.pack("<h", a) + b + bytes([c])

    def legacy(t):
        a, b, c = t
        return struct.pack("<II", 2, len(b)) + struct.pack("<h", a) + b + bytes([c])

    ordered = sorted(set(items))
    for fmt, enc in ((3, stored), (2, legacy)):
        keys = [encode_key("(i16,&[u8],bool)", enc(t), fmt) for t in ordered]
        assert keys == sorted(keys) and len(set(keys)) == len(keys)


# --- conversions through other engines -----------------------------------------------


@pytest.mark.parametrize("fmt", [1, 2, 3, 4, 5])
def test_custom_key_types_are_refused_unless_asserted_bytewise(tmp_path, fmt):
    src = FIXTURES / FILES[fmt]
    mid = tmp_path / "mid.sqlite"
    convert(str(src), str(mid))
    with pytest.raises(
        DestinationError, match="custom_fixed.*fixture::RevId|fixture::RevId.*custom_fixed"
    ):
        convert(str(mid), str(tmp_path / "back.redb"))
    assert not (tmp_path / "back.redb").exists()


@pytest.fixture(scope="session")
def redb_dump(fixture_maker):
    """The fixture maker's `dump` mode: what the real redb reads, with the apps' types."""

    def dump(fmt: int, path: Path) -> dict[str, list[list[str]]]:
        got = json.loads(fixture_maker("dump", fmt, path))
        # Custom key types were written in byte order (as asserted), not in their own.
        return {t: sorted(rows) if t.startswith("custom") else rows for t, rows in got.items()}

    return dump


def _native_json(fmt: int) -> dict[str, list[list[str]]]:
    raw = json.loads((FIXTURES / (FILES[fmt] + ".json")).read_text())
    return {t: sorted(rows) if t.startswith("custom") else rows for t, rows in raw.items()}


@pytest.mark.parametrize("fmt", [1, 2, 3, 4, 5])
@pytest.mark.parametrize("via", ["sqlite", "jsonl"])
def test_round_trip_through_another_engine_restores_typed_tables(tmp_path, fmt, via, redb_dump):
    """redb -> other engine -> redb with --redb-format 3: the tables are byte for byte what
    redb 4 itself writes for the same data, and they open with the apps' own table definitions
    (files of formats 1 and 2 are upgraded: tuples re-laid, type names as redb 4 spells them;
    without the option each comes back in its own format: test_redb_writeback.py)."""
    src = FIXTURES / FILES[fmt]
    before = sha256(src)
    mid = tmp_path / f"mid.{via}"
    back = tmp_path / "back.redb"
    convert(str(src), str(mid))
    convert(
        str(mid),
        str(back),
        destination_options={"redb_format": 3, "bytewise_key_types": CUSTOM_TYPES},
    )
    assert sha256(src) == before
    assert read_header(back)["format"] == 3
    assert redb_dump(3, back) == _native_json(3)
    native = FIXTURES / FILES[3]
    with RedbEngine.open_reader(native) as a, RedbEngine.open_reader(back) as b:
        ta = {t.name: t for t in a.tables()}
        tb = {t.name: t for t in b.tables()}
        assert set(ta) == set(tb)
        for name, t in ta.items():
            assert tb[name].kind == t.kind
            assert tb[name].meta.get("redb") == t.meta.get("redb"), name
            assert all_records(b, tb[name]) == all_records(a, t), name


@pytest.mark.parametrize("fmt", [1, 2, 3, 4, 5])
def test_format_2_is_written_on_request_as_redb_2_writes_it(tmp_path, fmt, redb_dump):
    mid = tmp_path / "mid.sqlite"
    out = tmp_path / "out.redb"
    convert(str(FIXTURES / FILES[fmt]), str(mid))
    convert(
        str(mid),
        str(out),
        destination_options={"redb_format": 2, "bytewise_key_types": CUSTOM_TYPES},
    )
    assert read_header(out)["format"] == 2
    assert redb_dump(2, out) == _native_json(2)
    assert (
        read_store(RedbEngine, out)["tables"]
        == read_store(RedbEngine, FIXTURES / FILES[2])["tables"]
    )


# --- the source is never modified; locks; damaged files -------------------------------

_CHILD = r"""
import sys
from pathlib import Path
from statemigrate.engines.redb import RedbEngine
from statemigrate.model import TableInfo
path = Path(sys.argv[1])
# Write forever, to be killed mid-write; "ready" once the first batch is durable (the
# writer makes only every 16th commit durable by itself). With "app": no checkpoint entry.
app = sys.argv[2:] == ["app"]
w = RedbEngine.open_writer(path)
t = TableInfo("t")
i = 0
while True:
    meta = None if app else {"checkpoint": b"%d" % i}
    w.write_batch(t, [(b"%08d" % (i * 100 + j), b"x" * 200) for j in range(100)], meta)
    if i == 0:
        w.sync()
        print("ready", flush=True)
    i += 1
"""


def _writer_child(path: Path, *args: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", _CHILD, str(path), *args], stdout=subprocess.PIPE, text=True
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _store(tmp_path: Path, fmt: int) -> Path:
    return write_store(
        RedbEngine,
        tmp_path / f"s{fmt}.redb",
        {TableInfo("t"): [(b"a", b"1")]},
        options={"redb_format": fmt},
    )


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_file_held_by_another_process_is_busy_at_once(tmp_path, fmt):
    path = _store(tmp_path, fmt)
    with app_holding("redb", path) as pid:  # an app with the file open through redb
        # "At once", without a stopwatch: a reader that waited for redb's file lock would
        # wait as long as the app lives. The hang guard ends the app after 60 s, the wait
        # then ends without StoreBusyError, and the test fails.
        guard = threading.Timer(60, os.kill, (pid, signal.SIGKILL))
        guard.start()
        try:
            busy = f"store is in use by another process \\(pid {pid}\\)"
            with pytest.raises(StoreBusyError, match=busy):
                RedbEngine.open_reader(path)
        finally:
            guard.cancel()
    assert read_store(RedbEngine, path)["tables"]["t"][1] == [(b"a", b"1")]


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_file_left_needing_repair_is_read_without_changing_a_byte(tmp_path, fmt):
    path = _store(tmp_path, fmt)
    proc = _writer_child(path)  # killed once its first batch is durable, mid-write
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert read_header(path)["needs_repair"], "the killed writer should leave the recovery flag set"
    before = sha256(path)
    stat = path.stat()
    got = read_store(RedbEngine, path)
    keys = [r[0] for r in got["tables"]["t"][1]]
    assert keys[0] == b"%08d" % 0 and keys == sorted(keys)
    assert sha256(path) == before
    assert path.stat().st_mtime_ns == stat.st_mtime_ns
    assert read_header(path)["needs_repair"]


@pytest.mark.parametrize("fmt", [2, 3])
def test_a_same_engine_copy_of_a_file_needing_repair_is_repaired_in_the_copy(tmp_path, fmt):
    """redb -> redb is redb's file copy: the copy of a killed app's file is repaired (by
    the redb of its format, opening it), and the source keeps every byte."""
    path = _store(tmp_path, fmt)
    proc = _writer_child(path, "app")
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    assert read_header(path)["needs_repair"]
    before = sha256(path)
    dst, progress = tmp_path / "copy.redb", Phases()
    assert convert(str(path), str(dst), progress=progress).verified
    assert progress.native()
    assert sha256(path) == before and read_header(path)["needs_repair"]
    assert read_header(dst)["format"] == fmt and not read_header(dst)["needs_repair"]
    assert read_store(RedbEngine, dst) == read_store(RedbEngine, path)


_DAMAGE = r"""
import json, sys
from pathlib import Path
from statemigrate.engines.redb import RedbEngine
from statemigrate.errors import StateMigrateError
from statemigrate.testing.stores import read_store
out = []
for p in sys.argv[1:]:
    try:
        got = read_store(RedbEngine, Path(p))
        out.append(["ok", repr(sorted(got["tables"].items()))])
    except StateMigrateError as e:
        assert "\n" not in e.message
        out.append([type(e).__name__, e.message])
print(json.dumps(out))
"""


def _damaged_outcomes(paths: list[Path]) -> list[list[str]]:
    proc = subprocess.run(
        [sys.executable, "-c", _DAMAGE, *map(str, paths)],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


@pytest.mark.parametrize("fmt", [1, 2, 3, 4, 5])
def test_truncated_files_are_a_source_error(tmp_path, fmt):
    data = (FIXTURES / FILES[fmt]).read_bytes()
    paths = []
    for n in (0, 5, 100, 319, 320, 4096, len(data) // 2, len(data) - 1):
        p = tmp_path / f"t{n}.redb"
        p.write_bytes(data[:n])
        paths.append(p)
    outcomes = _damaged_outcomes(paths)
    assert [o[0] for o in outcomes] == ["SourceError"] * len(paths), outcomes


@pytest.mark.parametrize("fmt", [1, 2, 3, 4, 5])
def test_flipped_bytes_never_crash_and_never_read_wrong_records(tmp_path, fmt):
    src = FIXTURES / FILES[fmt]
    data = bytearray(src.read_bytes())
    clean = _damaged_outcomes([src])[0]
    assert clean[0] == "ok"
    rng = random.Random(fmt)
    positions = [0, 9, 64, 100, 192] + [rng.randrange(320, len(data)) for _ in range(24)]
    paths = []
    for i, pos in enumerate(positions):
        d = bytearray(data)
        d[pos] ^= 0x5A
        p = tmp_path / f"f{i}.redb"
        p.write_bytes(d)
        paths.append(p)
    outcomes = _damaged_outcomes(paths)
    assert outcomes[0] == ["SourceError", f"{paths[0]}: not a redb file (bad magic)"]
    for pos, o in zip(positions, outcomes):
        assert o[0] == "SourceError" or o == clean, (pos, o)


def test_inspect_facts_come_from_the_header_alone(tmp_path):
    p = tmp_path / "copy.redb"
    shutil.copy(FIXTURES / FILES[2], p)
    before, mtime = sha256(p), p.stat().st_mtime_ns
    # Read-only, and read in a child that the mode binds even when the tests run as root
    # (no CAP_DAC_OVERRIDE): an open for writing would fail there.
    os.chmod(p, 0o444)
    code = (
        "import sys\nfrom pathlib import Path\nfrom statemigrate.engines.redb import RedbEngine\n"
        "print(RedbEngine.format_info(Path(sys.argv[1]))['written_by'])\n"
    )
    cmd = [sys.executable, "-c", code, str(p)]
    if os.geteuid() == 0:
        cmd = DROP_DAC + cmd
    info = subprocess.run(cmd, capture_output=True, text=True, timeout=120, check=False)
    assert info.returncode == 0, info.stderr[-2000:]
    assert info.stdout.strip() == "redb 2.0-2.6"
    assert sha256(p) == before and p.stat().st_mtime_ns == mtime
    assert not RedbEngine.detect(tmp_path)
    (tmp_path / "n.txt").write_bytes(b"redb\x1a\n")
    assert not RedbEngine.detect(tmp_path / "n.txt")


def test_native_bulk_load_and_full_scan_ceiling(tmp_path):
    from statemigrate import _native

    # The benchmarks' ceilings are built only with the cargo feature `bench` (not in the
    # default build nor the wheel; `python benchmarks/build_native.py` adds them).
    built = [hasattr(_native, f) for f in ("redb_bulk_load", "redb_full_scan")]
    assert built in ([True, True], [False, False])
    if not built[0]:
        return
    path = tmp_path / "bench.redb"
    _native.redb_bulk_load(str(path), 1000, 16, 100)
    assert _native.redb_full_scan(str(path)) == (1000, 1000 * 116)
    assert read_header(path)["format"] == 3


@pytest.mark.parametrize("fmt", [1, 2, 3, 4, 5])
def test_every_typed_table_resumes_strictly_after_any_of_its_keys(fmt):
    """Resuming after each record key (inside a multimap key's values too) yields the rest."""
    with RedbEngine.open_reader(FIXTURES / FILES[fmt]) as reader:
        for t in reader.tables():
            full = all_records(reader, t)
            for i, rec in enumerate(full):
                assert all_records(reader, t, after=rec[0], max_records=2) == full[i + 1 :], (
                    t.name,
                    i,
                )
                # Any byte string bounds a range, whether or not it encodes a key.
                for probe in (rec[0] + b"\x00", rec[0] + b"\xff", rec[0][:-1]):
                    want = [r for r in full if r[0] > probe]
                    assert all_records(reader, t, after=probe) == want, (t.name, probe)
            if full:
                assert all_records(reader, t, after=full[-1][0] + b"\xff") == []


def test_a_builtin_type_the_writer_cannot_produce_is_refused_by_name(tmp_path):
    odd = {"name": "niche::Option<u8>", "class": "Internal3", "width": 1, "legacy": False}
    meta = {"redb": {"multimap": False, "key": odd, "value": dict(odd, name="u8"), "order": "redb"}}
    w = RedbEngine.create_writer(tmp_path / "n.redb")
    try:
        with pytest.raises(DestinationError, match=r"'niche_table'.*niche::Option<u8>"):
            w.create_table(TableInfo("niche_table", TableKind.PLAIN, meta))
    finally:
        w.close()


_KEYS = st.binary(max_size=40) | st.sampled_from([b"", b"\x00", b"\xff", b"\x00\xff", b"a\x00"])


@settings(max_examples=25, deadline=None)
@given(
    fmt=st.sampled_from([2, 3]),
    plain=st.dictionaries(_KEYS, st.binary(max_size=64), max_size=40),
    versioned=st.dictionaries(
        _KEYS, st.tuples(st.binary(max_size=16), st.integers(0, MAX_VERSION)), max_size=40
    ),
)
def test_any_records_round_trip_property(tmp_path_factory, fmt, plain, versioned):
    path = tmp_path_factory.mktemp("prop") / "p.redb"
    content = {
        TableInfo("p"): list(plain.items()),
        TableInfo("v", TableKind.VERSIONED): [(k, v, ver) for k, (v, ver) in versioned.items()],
    }
    write_store(RedbEngine, path, content, batch=7, options={"redb_format": fmt})
    got = read_store(RedbEngine, path)["tables"]
    assert got["p"] == ("plain", sorted(plain.items()))
    assert got["v"] == ("versioned", sorted((k, v, ver) for k, (v, ver) in versioned.items()))


def test_a_tree_that_leads_back_to_a_key_already_passed_is_exit_4_not_a_hang(tmp_path):
    """Found by `make test-long`'s fuzzer (seed 'redb-3070203314', 2026-11): a damaged
    redb 4 file whose u64 table's tree leads a resumed read back to keys it passed.
    The binding's skip loop for typed tables read it again and again, forever; the
    reader child's hang guard (statemigrate.testing.fuzz.HANG_GUARD) fails this test
    if the guard in read.rs ever goes."""
    from statemigrate.testing.fuzz import ReaderWorker, mutated_copy, seed_store

    pristine = seed_store("redb", tmp_path / "pristine")
    (tmp_path / "work").mkdir()
    rnd = random.Random("redb-3070203314")
    target = mutated_copy(pristine, tmp_path / "work" / pristine.name, rnd, rnd.randint(1, 6))
    assert target.read_bytes() != pristine.read_bytes()
    worker = ReaderWorker("redb")
    try:
        assert worker.read(pristine).exit == 0
        outcome = worker.read(target)
    finally:
        worker.close()
    assert outcome.exit == 4 and not outcome.hung, outcome.describe()
    assert "leads its reader back to a key it already passed" in outcome.detail
