"""fjall 2 and fjall 3 quirks: the real crates' stores, name escaping, limits, untouched sources."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import example, given, settings
from hypothesis import strategies as st
from test_names import documented_model_name, documented_partition_name, documented_read_back

from statemigrate import _native, convert, verify
from statemigrate.cli import main
from statemigrate.engines.fjall2 import Fjall2Engine, escape, unescape
from statemigrate.engines.fjall3 import Fjall3Engine
from statemigrate.errors import DestinationError, SourceError, StoreBusyError
from statemigrate.model import MAX_VERSION, TableInfo, TableKind
from statemigrate.registry import get_engine
from statemigrate.testing.holders import app_holding
from statemigrate.testing.stores import (
    content_as_data,
    expectation_as_data,
    read_store,
    tree_sha256,
    write_store,
)

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures" / "fjall"
ENGINES = {2: Fjall2Engine, 3: Fjall3Engine}
V = TableKind.VERSIONED


def fixture(major: int, tmp_path: Path) -> Path:
    """A private copy of the store the real fjall crate wrote (``rust/fjall-fixture-maker``)."""
    return Path(shutil.copytree(FIXTURES / f"app.fjall{major}", tmp_path / f"app.fjall{major}"))


def expected(major: int) -> dict:
    return json.loads((FIXTURES / f"app.fjall{major}.expected.json").read_text())


@pytest.mark.parametrize("major", [2, 3])
def test_the_crates_fixture_reads_exactly_and_stays_byte_identical(
    major: int, tmp_path: Path
) -> None:
    store = fixture(major, tmp_path)
    before = tree_sha256(store)
    exp = expected(major)
    got = read_store(ENGINES[major], store)
    assert got["tables"] == expectation_as_data(exp)
    assert {k: got["metadata"][k].hex() for k in exp["metadata"]} == exp["metadata"]
    assert not any(k.startswith("kind:") for k in got["metadata"])
    assert tree_sha256(store) == before
    assert ENGINES[major].detect(store) and not ENGINES[5 - major].detect(store)


def test_fjall2_partitions_are_named_as_the_readme_says(tmp_path: Path) -> None:
    store = fixture(2, tmp_path)
    parts = {p.name for p in (store / "partitions").iterdir()}
    wanted = {t["partition"] for t in expected(2)["tables"].values()}
    assert parts == wanted | {"__statemigrate__"}
    assert escape('a "quoted" name') == "a$20$22quoted$22$20name"
    assert unescape("a$20$22quoted$22$20name") == 'a "quoted" name'


def test_sqlite_to_fjall3_and_back_is_exact(tmp_path: Path) -> None:
    content = {
        TableInfo("events"): [(b"\x00", b""), (b"a", b"1"), (b"k" * 65_535, b"\xff" * 10)],
        TableInfo("settings", V): [(b"x", b"v", 0), (b"y", b"w", MAX_VERSION)],
        TableInfo('é "odd" /name'): [(b"q", b"r")],
        TableInfo("empty", V): [],
    }
    src = write_store(get_engine("sqlite"), tmp_path / "a.sqlite", content)
    mid, back = tmp_path / "s.fjall3", tmp_path / "b.sqlite"
    assert convert(str(src), str(mid)).verified
    before = tree_sha256(mid)
    assert convert(str(mid), str(back)).verified
    assert tree_sha256(mid) == before
    assert read_store(Fjall3Engine, mid)["tables"] == content_as_data(content)
    assert read_store(get_engine("sqlite"), back)["tables"] == content_as_data(content)
    assert verify(str(src), str(back)).equal


def test_fjall2_to_fjall3_converts_and_verifies(tmp_path: Path) -> None:
    src = fixture(2, tmp_path)
    before = tree_sha256(src)
    dst = tmp_path / "upgraded.fjall3"
    report = convert(str(src), f"fjall3:{dst}")
    assert report.verified
    assert tree_sha256(src) == before
    assert read_store(Fjall3Engine, dst)["tables"] == expectation_as_data(expected(2))
    assert verify(str(src), str(dst)).equal
    # fjall 3 keeps the real name as the keyspace name: the app finds it as it is.
    reader = _native.FjallReader(str(shutil.copytree(dst, tmp_path / "copy")), 3)
    try:
        assert 'a "quoted" name' in reader.names()
    finally:
        reader.close()


@settings(max_examples=300, deadline=None)
@given(st.text(min_size=1, max_size=80))
@example("a b")
@example("\u00e9")
@example("..")
@example(".")
@example("x$20")
@example("a$zz")
@example("$")
@example("events")
@example("L" * 255)
@example("\u00e9" * 127 + "x")
def test_fjall2_escaping_is_reversible_and_leaves_safe_names(name: str) -> None:
    """Every name the README says fjall 2 holds is held, stored as it says, and read back;
    every other is refused (before writing)."""
    problems = Fjall2Engine.table_name_problems([name])
    if not documented_model_name(name):
        assert name in problems
        return
    stored = documented_partition_name(name)
    must_hold = len(stored) <= 255 and documented_read_back(stored) == name
    assert (name not in problems) == must_hold, (name, stored, problems)
    if must_hold:
        assert escape(name) == stored
        assert unescape(stored) == name
        assert _native.fjall2_valid_name(stored)
    if _native.fjall2_valid_name(name) and must_hold:
        assert escape(name) == name


def test_fjall2_refuses_names_it_cannot_hold_before_writing(tmp_path: Path) -> None:
    src = write_store(
        Fjall3Engine,
        tmp_path / "a.fjall3",
        {TableInfo("x$20"): [(b"k", b"v")], TableInfo("é" * 100): [], TableInfo("ok"): []},
    )
    dst = tmp_path / "b.fjall2"
    with pytest.raises(DestinationError) as err:
        convert(str(src), str(dst))
    assert "'x$20' (its partition name would read back as 'x ')" in err.value.message
    assert "over 255" in err.value.message
    assert not dst.exists() and not list(tmp_path.glob("b.fjall2*"))


@pytest.mark.parametrize("major", [2, 3])
@pytest.mark.parametrize("key", [b"", b"k" * 65_536])
def test_keys_fjall_cannot_hold_are_refused_before_writing(
    major: int, key: bytes, tmp_path: Path
) -> None:
    src = write_store(get_engine("sqlite"), tmp_path / "a.sqlite", {TableInfo("t"): [(key, b"v")]})
    dst = tmp_path / f"b.fjall{major}"
    result = CliRunner().invoke(main, ["convert", "--quiet", str(src), str(dst)])
    assert result.exit_code == 5, result.output
    assert f"of table 't': length {len(key)} is outside 1..65535 bytes" in result.output
    assert not dst.exists() and not list(tmp_path.glob("b.fjall*"))


@pytest.mark.parametrize("major", [2, 3])
def test_the_binding_refuses_a_bad_key_without_a_panic(major: int, tmp_path: Path) -> None:
    w = _native.FjallWriter(str(tmp_path / "s"), major, True)
    try:
        w.create_table("t", [])
        with pytest.raises(_native.FjallRefusedError, match="length 65536 is outside"):
            w.write_batch("t", [(b"k" * 65_536, b"v")], False, [])
        with pytest.raises(_native.FjallRefusedError, match="out of order"):
            w.write_batch("t", [(b"b", b"v"), (b"a", b"v")], False, [])
    finally:
        w.close()


@pytest.mark.parametrize("engine", ["fjall2", "fjall3"])
@pytest.mark.parametrize("layout", ["empty", "files", "other_major"])
def test_a_directory_that_is_not_this_fjall_is_refused_and_untouched(
    engine: str, layout: str, tmp_path: Path
) -> None:
    path = tmp_path / "dir"
    if layout == "other_major":
        path = fixture(5 - int(engine[-1]), tmp_path)
    else:
        path.mkdir()
        if layout == "files":
            (path / "version").write_bytes(b"NOTFJALL")
            (path / "data").write_bytes(b"x" * 100)
    before = tree_sha256(path)
    names = sorted(p.name for p in path.iterdir())
    result = CliRunner().invoke(main, ["convert", f"{engine}:{path}", str(tmp_path / "o.sqlite")])
    assert result.exit_code == 4, result.output
    wanted = "--from fjall" if layout == "other_major" else "not a fjall store"
    assert wanted in result.output
    with pytest.raises(SourceError, match=wanted):
        get_engine(engine).open_reader(path)
    # Nothing created there (fjall would create a database in any directory it opens).
    assert tree_sha256(path) == before
    assert sorted(p.name for p in path.iterdir()) == names


def test_fjall3_held_by_an_app_is_busy_with_its_pid(tmp_path: Path) -> None:
    store = fixture(3, tmp_path)
    with app_holding("fjall3", store) as pid, pytest.raises(StoreBusyError) as err:
        Fjall3Engine.open_reader(store)
    assert f"pid {pid}" in err.value.message


def test_inspect_shows_the_format_and_keyspaces(tmp_path: Path) -> None:
    store = fixture(3, tmp_path)
    before = tree_sha256(store)
    info = Fjall3Engine.format_info(store)
    assert info["format"] == 3 and info["lock_holder_pid"] is None
    assert set(info["keyspaces"]) == set(expected(3)["tables"]) | {"__statemigrate__"}
    assert info["disk_bytes"] > 0
    assert Fjall2Engine.format_info(fixture(2, tmp_path))["format"] == 2
    assert tree_sha256(store) == before


# A table written through the journal only (no flush), dropped and made again under the
# same name, then the process killed: fjall 2's journals name partitions, so without the
# flush-and-evict before the deletion its records would come back into the new table.
_DROP_THEN_KILL = """
import os, signal, sys
from pathlib import Path
from statemigrate.model import TableInfo, TableKind
from statemigrate.registry import get_engine
eng, path = get_engine(sys.argv[1]), Path(sys.argv[2])
w = eng.open_writer(path)
w.write_batch(TableInfo("t", TableKind.VERSIONED), [(b"old%04d" % i, b"x", i) for i in range(500)])
w.drop_table("t")
w.drop_table("t")  # a second drop (recovery repeats steps) does nothing
w.create_table(TableInfo("t"))
w.write_batch(TableInfo("u"), [(b"zz", b"after")])
os.kill(os.getpid(), signal.SIGKILL)
"""


@pytest.mark.parametrize("engine", ["fjall2", "fjall3"])
def test_a_dropped_table_never_comes_back_into_a_new_one_after_a_kill(
    engine: str, tmp_path: Path
) -> None:
    eng = get_engine(engine)
    store = write_store(
        eng,
        tmp_path / "s",
        {TableInfo("t", V): [(b"a", b"1", 7)], TableInfo("u"): [(b"k", b"v")]},
    )
    run = subprocess.run(
        [sys.executable, "-c", _DROP_THEN_KILL, engine, str(store)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert run.returncode == -signal.SIGKILL, run.stderr
    got = read_store(eng, store)["tables"]
    assert got["t"] == ("plain", [])
    assert got["u"][1][0] == (b"k", b"v")


@pytest.mark.parametrize("engine", ["fjall2", "fjall3"])
def test_backup_is_a_closed_copy_and_the_writer_goes_on(engine: str, tmp_path: Path) -> None:
    eng = get_engine(engine)
    store = write_store(eng, tmp_path / "s", {TableInfo("t"): [(b"a", b"1")]})
    writer = eng.open_writer(store)
    try:
        writer.write_batch(TableInfo("t"), [(b"b", b"2")])  # in the journal only
        writer.backup(tmp_path / "backup")
        writer.write_batch(TableInfo("t"), [(b"c", b"3")])
        writer.finish()
    finally:
        writer.close()
    assert read_store(eng, tmp_path / "backup")["tables"] == {
        "t": ("plain", [(b"a", b"1"), (b"b", b"2")])
    }
    assert read_store(eng, store)["tables"]["t"][1] == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]


def allocated_bytes(path: Path) -> int:
    """Bytes allocated below ``path``, as ``du`` counts them (sparse journals count as used).

    fjall's background worker renames its ``.tmp*`` files while the walk runs: a file
    gone between the listing and its ``lstat`` is left out of this sample (``du`` does
    the same), and the next sample counts it under its new name.
    """
    total = 0
    for root, _dirs, files in os.walk(path):
        for f in files:
            try:
                total += os.lstat(os.path.join(root, f)).st_blocks * 512
            except FileNotFoundError:
                continue
    return total


# Why 4x: a fjall 3 store of one-record tables takes about 14 KB of blocks per table
# (its keyspace's directory, version and table files). fjall 3 records each new keyspace
# by compacting its own meta keyspace and keeps the replaced tables until the database
# is opened again (they grew as N^2: 658 MB for a 32 MB store of 1,500 tables, issue
# 27). The writer reopens it every 32 keyspaces, which bounds the dead tables to about
# 1.2x the live store whatever N is; 4x leaves room for the journal and for compaction
# timing, and is far below the 20x a session without reopening reached at 1,000 tables.
@pytest.mark.parametrize("engine", ["fjall2", "fjall3"])
def test_the_store_of_many_tables_stays_within_a_small_multiple_of_its_size(
    engine: str, tmp_path: Path
) -> None:
    path = tmp_path / f"many.{engine}"
    writer = get_engine(engine).create_writer(path)
    peak = 0
    try:
        for i in range(1_000):
            table = TableInfo(f"t{i:05d}")
            writer.create_table(table)
            writer.write_batch(table, [(b"k", b"v%d" % i)])
            if i % 7 == 0:
                peak = max(peak, allocated_bytes(path))
        writer.finish()
    finally:
        writer.close()
    final = allocated_bytes(path)
    assert peak <= 4 * final, f"peak {peak:,} bytes for a store of {final:,}"
    got = read_store(get_engine(engine), path)["tables"]
    assert len(got) == 1_000 and got["t00999"] == ("plain", [(b"k", b"v999")])
