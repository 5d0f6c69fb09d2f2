"""TurboKV 0.6 quirks: the crate's own store, detection before opening, the layout's
names, the presets, private images, moved stores, and the reader under a fuzzer.

The engine is this distribution (``statemigrate-turbokv``), installed only where the CPU
has AES instructions: without it this file is skipped as a whole. It uses statemigrate's
public API and its shipped test kit (``statemigrate.testing``) only, as any third-party
engine's tests would; the shared suites run in ``test_turbokv_suites.py``.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner

from statemigrate import DestinationError, SourceError, StoreBusyError, convert, verify
from statemigrate.cli import main
from statemigrate.model import MAX_VERSION, TableInfo, TableKind
from statemigrate.registry import detect_engine, get_engine
from statemigrate.testing.fuzz import fuzz_reader
from statemigrate.testing.holders import app_holding
from statemigrate.testing.stores import (
    content_as_data,
    expectation_as_data,
    read_store,
    tree_sha256,
    write_store,
)

_native = pytest.importorskip("statemigrate_turbokv._native")
from statemigrate_turbokv.engine import TurbokvEngine

# Written by the real crate (../fixture-maker; how: fixtures/README.md).
FIXTURES = Path(__file__).resolve().parent / "fixtures"
V = TableKind.VERSIONED


def fixture(tmp_path: Path) -> Path:
    """A private copy of the store the real crate wrote (``plugins/turbokv/fixture-maker``)."""
    return Path(shutil.copytree(FIXTURES / "app.turbokv", tmp_path / "app.turbokv"))


def expected() -> dict:
    return json.loads((FIXTURES / "app.turbokv.expected.json").read_text())


def crate_reads(path: Path) -> list[str]:
    """The table names the crate itself finds when it opens ``path`` (which it may change)."""
    w = _native.TurbokvWriter(str(path.absolute()), False)
    try:
        return w.names()
    finally:
        w.close()


def test_the_crates_moved_store_reads_exactly_and_stays_byte_identical(tmp_path: Path) -> None:
    # Written elsewhere and moved: its MANIFEST names SSTables by paths that do not exist,
    # and half its records are only in the WAL (the app was killed).
    store = fixture(tmp_path)
    before = tree_sha256(store)
    assert TurbokvEngine.detect(store) and detect_engine(store) is TurbokvEngine
    exp = expected()
    got = read_store(TurbokvEngine, store)
    assert got["tables"] == expectation_as_data(exp)
    assert {k: got["metadata"][k].hex() for k in exp["metadata"]} == exp["metadata"]
    assert not any(k.startswith("kind:") for k in got["metadata"])
    assert tree_sha256(store) == before
    assert sorted(p.name for p in store.iterdir()) == [
        ".turbokv.lock",
        "MANIFEST",
        "sstables",
        "wal",
    ]


def test_sqlite_to_turbokv_and_back_is_exact(tmp_path: Path) -> None:
    content = {
        TableInfo("events"): [(b"", b"empty key"), (b"\x00", b""), (b"k" * 70_000, b"\xff" * 10)],
        TableInfo("event"): [(b"\xff", b"a prefix of another table's name")],
        TableInfo("settings", V): [(b"x", b"v", 0), (b"y", b"w", MAX_VERSION)],
        TableInfo('é "odd" /name'): [(b"q", b"r")],
        TableInfo("empty", V): [],
        TableInfo("empty plain"): [],
    }
    src = write_store(get_engine("sqlite"), tmp_path / "a.sqlite", content)
    src_before = tree_sha256(src)
    mid, back = tmp_path / "s.turbokv", tmp_path / "b.sqlite"
    assert convert(str(src), str(mid)).verified
    assert tree_sha256(src) == src_before
    before = tree_sha256(mid)
    assert convert(str(mid), str(back)).verified
    assert tree_sha256(mid) == before
    assert read_store(TurbokvEngine, mid)["tables"] == content_as_data(content)
    assert read_store(get_engine("sqlite"), back)["tables"] == content_as_data(content)
    assert verify(str(src), str(back)).equal


def test_a_built_store_opens_where_it_was_renamed_and_copied(tmp_path: Path) -> None:
    src = write_store(get_engine("jsonl"), tmp_path / "a.jsonl", {TableInfo("t"): [(b"k", b"v")]})
    dst = tmp_path / "built.turbokv"
    assert convert(str(src), str(dst)).verified  # built as built.turbokv.partial, renamed
    manifest = (dst / "MANIFEST").read_bytes()
    assert b"sstables/" in manifest and str(tmp_path).encode() not in manifest
    copy = Path(shutil.copytree(dst, tmp_path / "elsewhere" / "copy.turbokv"))
    assert "t" in crate_reads(copy)  # the crate itself opens the copy
    assert read_store(TurbokvEngine, copy)["tables"] == {"t": ("plain", [(b"k", b"v")])}


@pytest.mark.parametrize("layout", ["empty", "files", "lookalike"])
def test_a_directory_that_is_not_turbokv_is_refused_and_untouched(
    layout: str, tmp_path: Path
) -> None:
    path = tmp_path / "dir"
    path.mkdir()
    if layout == "files":
        (path / "data").write_bytes(b"x" * 100)
        (path / "wal").mkdir()
        (path / "wal" / "0.wal").write_bytes(b"NOTTURBO" * 4)
    elif layout == "lookalike":
        (path / "MANIFEST").write_bytes(b"MANIFEST-000001\n")
    before = tree_sha256(path)
    names = sorted(p.name for p in path.rglob("*"))
    assert not TurbokvEngine.detect(path)
    result = CliRunner().invoke(main, ["convert", f"turbokv:{path}", str(tmp_path / "o.sqlite")])
    assert result.exit_code == 4, result.output
    assert "not a TurboKV store" in result.output
    with pytest.raises(SourceError, match="not a TurboKV store"):
        TurbokvEngine.open_reader(path)
    with pytest.raises(DestinationError, match="not a TurboKV store"):
        TurbokvEngine.open_writer(path)
    # Nothing created there (TurboKV writes its files into any directory it opens).
    assert tree_sha256(path) == before
    assert sorted(p.name for p in path.rglob("*")) == names


def test_table_names_with_nul_are_refused_before_writing(tmp_path: Path) -> None:
    with pytest.raises(DestinationError, match="NUL"):
        TurbokvEngine.check_table_names([TableInfo("ok"), TableInfo("a\x00b")])
    # The binding refuses it too, before the batch reaches the store.
    w = _native.TurbokvWriter(str(tmp_path / "s"), True)
    try:
        with pytest.raises(_native.TurbokvRefusedError, match="NUL"):
            w.write_batch("a\x00b", [(b"k", b"v")], False, [])
        with pytest.raises(_native.TurbokvRefusedError, match="out of order"):
            w.write_batch("t", [(b"b", b"v"), (b"a", b"v")], False, [])
        assert w.names() == []
    finally:
        w.close()


def test_preset_fast_is_refused_for_a_destination_with_one_line(tmp_path: Path) -> None:
    src = write_store(get_engine("jsonl"), tmp_path / "a.jsonl", {TableInfo("t"): [(b"k", b"v")]})
    dst = tmp_path / "b.turbokv"
    result = CliRunner().invoke(
        main, ["convert", "--quiet", str(src), str(dst), "--dest-option", "preset=fast"]
    )
    assert result.exit_code == 2, result.output
    assert "preset=fast keeps no WAL" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert not list(tmp_path.glob("b.turbokv*"))


def test_preset_paranoid_writes_the_same_store(tmp_path: Path) -> None:
    content = {TableInfo("t"): [(bytes([i]), b"v" * i) for i in range(200)]}
    src = write_store(get_engine("sqlite"), tmp_path / "a.sqlite", content)
    dst = tmp_path / "b.turbokv"
    report = convert(str(src), str(dst), destination_options={"preset": "paranoid"})
    assert report.verified
    assert read_store(TurbokvEngine, dst)["tables"] == content_as_data(content)


def test_keys_outside_the_layout_are_refused_as_damaged(tmp_path: Path) -> None:
    # An app's store whose keys are not table ‖ 0x00 ‖ key (written by the crate: user:1 …):
    # refused with one line (exit 4), never guessed at, the store untouched.
    store = Path(shutil.copytree(FIXTURES / "foreign.turbokv", tmp_path / "foreign.turbokv"))
    before = tree_sha256(store)
    result = CliRunner().invoke(main, ["convert", str(store), str(tmp_path / "o.sqlite")])
    assert result.exit_code == 4, result.output
    assert "not statemigrate's TurboKV layout" in result.output
    assert len(result.output.strip().splitlines()) == 1
    assert tree_sha256(store) == before
    assert not list(tmp_path.glob("o.sqlite*"))


def test_held_by_an_app_is_busy_with_its_pid(tmp_path: Path) -> None:
    src = write_store(get_engine("jsonl"), tmp_path / "a.jsonl", {TableInfo("t"): [(b"k", b"v")]})
    store = tmp_path / "held.turbokv"
    assert convert(str(src), str(store)).verified
    with app_holding("turbokv", store) as pid, pytest.raises(StoreBusyError) as err:
        TurbokvEngine.open_reader(store)
    assert f"pid {pid}" in err.value.message
    assert TurbokvEngine.format_info(store)["lock_holder_pid"] is None


def test_inspect_shows_the_format_without_opening(tmp_path: Path) -> None:
    store = fixture(tmp_path)
    before = tree_sha256(store)
    info = TurbokvEngine.format_info(store)
    assert info["signature"] == "MANIFEST" and info["manifest_version"] == 3
    assert info["sstables"] >= 1 and info["disk_bytes"] > 0
    assert info["lock_holder_pid"] is None
    assert tree_sha256(store) == before


def test_every_fixture_says_how_it_was_made() -> None:
    readme = (FIXTURES / "README.md").read_text()
    assert "plugins/turbokv/fixture-maker/" in readme
    stores = sorted(p.name for p in FIXTURES.glob("*.turbokv"))
    assert stores == ["app.turbokv", "foreign.turbokv"]
    assert all(f"`{name}/`" in readme for name in stores)
    assert expected()["tables"], "app.turbokv.expected.json lists no table"


def test_reader_under_fuzzer(tmp_path: Path) -> None:
    # Mutated copies of the crate's store, each read in a child process: read, or refused
    # as unreadable (exit 4) with one line; a crash, a hang or another exit fails (its seed
    # named). The same seeds as every built-in engine's (tests/test_safety_fuzz.py).
    fuzz_reader("turbokv", fixture(tmp_path), tmp_path / "work")
