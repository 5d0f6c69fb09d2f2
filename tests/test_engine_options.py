"""Typed engine options: declared per engine, parsed and refused in one place, on the CLI."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner

from statemigrate import api
from statemigrate.cli import main
from statemigrate.engines.base import check_options
from statemigrate.engines.lmdb import LmdbEngine
from statemigrate.engines.redb import RedbEngine
from statemigrate.engines.rocksdb import RocksdbEngine
from statemigrate.engines.sqlite import SqliteEngine
from statemigrate.errors import UsageError
from statemigrate.model import TableInfo, TableKind
from statemigrate.registry import get_engine
from statemigrate.testing.stores import write_store


def run(*args: Any) -> Any:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    content = {
        TableInfo("events"): [(b"e%03d" % i, b"payload %d" % i) for i in range(50)],
        TableInfo("settings", TableKind.VERSIONED): [(b"s1", b"on", 3), (b"s2", b"off", 7)],
    }
    return write_store(SqliteEngine, tmp_path / "src.sqlite", content)


def rocksdb_format_versions(store: Path) -> set[str]:
    """The block-based table format the store's newest OPTIONS file records for its tables."""
    newest = max(store.glob("OPTIONS-*"), key=lambda p: int(p.name.split("-")[1]))
    return set(re.findall(r"^\s*format_version=(\d+)$", newest.read_text(), re.MULTILINE))


# RocksDB's options for an app's own layout (README: Your app's own layout), unset.
ROCKSDB_LAYOUT_DEFAULTS = {"layout": None, "skip_foreign_tables": False}
# The writer's: the oldest RocksDB to stay readable by (Debian 12's).
ROCKSDB_DEST_DEFAULTS = {"rocksdb_compat": "7.8", **ROCKSDB_LAYOUT_DEFAULTS}


# --- parsing and conversion --------------------------------------------------------------


def test_values_are_converted_to_the_declared_type() -> None:
    assert check_options(RocksdbEngine, {"rocksdb_format_version": "6"}, "dest") == {
        "rocksdb_format_version": 6,
        **ROCKSDB_DEST_DEFAULTS,
    }
    assert check_options(RocksdbEngine, {"rocksdb_format_version": 3}, "dest") == {
        "rocksdb_format_version": 3,
        **ROCKSDB_DEST_DEFAULTS,
    }
    for text, value in (("true", True), ("YES", True), ("1", True), ("off", False), ("0", False)):
        got = check_options(SqliteEngine, {"skip_foreign_tables": text}, "source")
        assert got == {"skip_foreign_tables": value, "layout": None}, text
    got = check_options(RedbEngine, {"redb_format": "2", "bytewise_key_types": "app::Id"}, "dest")
    assert got == {"redb_format": 2, "bytewise_key_types": ("app::Id",)}
    got = check_options(RedbEngine, {"bytewise_key_types": ["a::A", "b::B"]}, "dest")
    assert got["bytewise_key_types"] == ("a::A", "b::B")


def test_defaults_fill_what_is_not_given() -> None:
    assert check_options(RocksdbEngine, None, "dest") == {
        "rocksdb_format_version": 5,
        **ROCKSDB_DEST_DEFAULTS,
    }
    assert check_options(RedbEngine, {}, "dest") == {"redb_format": None, "bytewise_key_types": ()}
    assert check_options(SqliteEngine, None, "source") == {
        "skip_foreign_tables": False,
        "layout": None,
    }
    assert check_options(SqliteEngine, {"layout": "kv.toml"}, "dest") == {
        "skip_foreign_tables": False,
        "layout": "kv.toml",
    }
    # The same two, and whether the store is one file (a new one; an existing one is as it is).
    assert check_options(LmdbEngine, None, "source") == {**ROCKSDB_LAYOUT_DEFAULTS, "subdir": None}


def test_the_dataclass_itself_is_accepted() -> None:
    opts = RocksdbEngine.options(rocksdb_format_version=6)  # type: ignore[call-arg]
    assert check_options(RocksdbEngine, opts, "dest") == {
        "rocksdb_format_version": 6,
        **ROCKSDB_DEST_DEFAULTS,
    }
    with pytest.raises(
        UsageError, match="the rocksdb engine takes RocksdbOptions, not RedbOptions"
    ):
        check_options(RocksdbEngine, RedbEngine.options(), "dest")
    with pytest.raises(dataclasses.FrozenInstanceError):
        opts.rocksdb_format_version = 2  # type: ignore[attr-defined]


# --- refusals ----------------------------------------------------------------------------


def test_an_unknown_option_lists_the_engines_options() -> None:
    with pytest.raises(UsageError) as info:
        check_options(RedbEngine, {"page_size": "4096"}, "dest")
    assert info.value.exit_code == 2
    assert info.value.message == (
        "the redb engine has no option 'page_size'; its options: "
        "redb_format (destination), bytewise_key_types (destination)"
    )
    with pytest.raises(UsageError, match=r"the jsonl engine has no option 'x'; it has no options$"):
        check_options(get_engine("jsonl"), {"x": 1}, "source")


def test_an_option_of_the_other_side_is_refused() -> None:
    with pytest.raises(UsageError, match="has no option 'skip_foreign_tables' for a destination"):
        check_options(SqliteEngine, {"skip_foreign_tables": True}, "dest")
    with pytest.raises(UsageError, match="has no option 'rocksdb_format_version' for a source"):
        check_options(RocksdbEngine, {"rocksdb_format_version": 5}, "source")
    # side None (redb's reader, as before) takes every option of the engine.
    assert check_options(RedbEngine, {"redb_format": 3}, None)["redb_format"] == 3


@pytest.mark.parametrize(
    ("engine", "name", "value", "expects"),
    [
        (RocksdbEngine, "rocksdb_format_version", "abc", "a whole number from 2 to 6"),
        (RocksdbEngine, "rocksdb_format_version", "7", "a whole number from 2 to 6"),
        (RocksdbEngine, "rocksdb_format_version", True, "a whole number from 2 to 6"),
        (RocksdbEngine, "rocksdb_format_version", 1.5, "a whole number from 2 to 6"),
        (RedbEngine, "redb_format", "1", "2 or 3"),
        (RedbEngine, "redb_format", 4.0, "2 or 3"),
        (RedbEngine, "bytewise_key_types", 12, "a name or a list of names"),
        (SqliteEngine, "skip_foreign_tables", "maybe", "true or false"),
        (SqliteEngine, "skip_foreign_tables", 1, "true or false"),
    ],
)
def test_a_bad_value_names_engine_option_and_type(
    engine: Any, name: str, value: Any, expects: str
) -> None:
    side = "source" if name == "skip_foreign_tables" else "dest"
    with pytest.raises(UsageError) as info:
        check_options(engine, {name: value}, side)
    assert info.value.exit_code == 2
    assert info.value.message.startswith(f"the {engine.name} engine's option {name} must be ")
    assert expects in info.value.message and repr(value) in info.value.message


# Every engine declares its options as a frozen dataclass of typed, documented fields:
# the contract suite (statemigrate.testing.contract_suite, tests/test_engine_contract.py).


# --- the command line --------------------------------------------------------------------


def test_rocksdb_format_version_old_flag_and_new_spelling_agree(src: Path, tmp_path: Path) -> None:
    old, new, plain = tmp_path / "old.rocksdb", tmp_path / "new.rocksdb", tmp_path / "d.rocksdb"
    # Table format 6 is newer than RocksDB 7.8 reads (the default rocksdb_compat).
    newest = ("--dest-option", "rocksdb_compat=newest")
    res = run("convert", "-q", src, old, "--rocksdb-format-version", "6", *newest)
    assert res.exit_code == 0, res.output
    res = run("convert", "-q", src, new, "--dest-option", "rocksdb_format_version=6", *newest)
    assert res.exit_code == 0, res.output
    assert run("convert", "-q", src, plain).exit_code == 0
    assert rocksdb_format_versions(old) == rocksdb_format_versions(new) == {"6"}
    assert rocksdb_format_versions(plain) == {"5"}
    assert api.checksum(old).digest == api.checksum(new).digest == api.checksum(src).digest


def test_redb_format_old_flag_and_new_spelling_agree(src: Path, tmp_path: Path) -> None:
    old, new, plain = tmp_path / "old.redb", tmp_path / "new.redb", tmp_path / "d.redb"
    assert run("convert", "-q", src, old, "--redb-format", "2").exit_code == 0
    res = run("convert", "-q", src, new, "--dest-option", "redb_format=2")
    assert res.exit_code == 0, res.output
    assert run("convert", "-q", src, plain).exit_code == 0
    assert api.inspect(old).format["format"] == api.inspect(new).format["format"] == 2
    assert api.inspect(plain).format["format"] == 3
    assert api.checksum(old).digest == api.checksum(new).digest == api.checksum(src).digest


def test_skip_foreign_tables_old_flag_and_new_spelling_agree(src: Path, tmp_path: Path) -> None:
    import apsw

    conn = apsw.Connection(str(src))
    conn.execute("CREATE TABLE app_notes (id INTEGER PRIMARY KEY, note TEXT)")
    conn.close()
    refused = run("convert", "-q", src, tmp_path / "r.jsonl")
    assert refused.exit_code != 0 and "app_notes" in refused.output
    old, new = tmp_path / "old.jsonl", tmp_path / "new.jsonl"
    assert run("convert", "-q", src, old, "--skip-foreign-tables").exit_code == 0
    res = run("convert", "-q", src, new, "--source-option", "skip_foreign_tables=true")
    assert res.exit_code == 0, res.output
    assert api.checksum(old).digest == api.checksum(new).digest


def test_unknown_or_bad_options_exit_2_and_create_nothing(src: Path, tmp_path: Path) -> None:
    out = tmp_path / "x.rocksdb"
    res = run("convert", src, out, "--dest-option", "block_size=4096")
    assert res.exit_code == 2
    assert "the rocksdb engine has no option 'block_size'" in res.output
    assert "its options: rocksdb_format_version (destination)" in res.output
    res = run("convert", src, out, "--source-option", "rocksdb_format_version=6")
    assert res.exit_code == 2 and "the sqlite engine has no option" in res.output
    res = run("convert", src, out, "--dest-option", "rocksdb_format_version=six")
    assert res.exit_code == 2
    assert "rocksdb_format_version must be a whole number from 2 to 6, not 'six'" in res.output
    assert run("convert", src, out, "--dest-option", "no_equals_sign").exit_code == 2
    assert not out.exists() and not list(tmp_path.glob("x.rocksdb*"))


def test_repeated_keys_and_the_shorthand_flag_add_up(src: Path, tmp_path: Path) -> None:
    """bytewise_key_types is repeatable; --bytewise-key adds to the pairs (checked on a
    source whose custom key types need all three)."""
    from statemigrate.cli.convert import _engine_options, _parse_options

    assert _parse_options(("a=1", "b=x", "a=2", "a=3")) == {"a": ["1", "2", "3"], "b": "x"}
    _, dst = _engine_options(
        (), ("bytewise_key_types=a::A", "bytewise_key_types=b::B"), {"flag_bytewise_key": ("c::C",)}
    )
    assert dst == {"bytewise_key_types": ["a::A", "b::B", "c::C"]}
    assert check_options(RedbEngine, dst, "dest")["bytewise_key_types"] == ("a::A", "b::B", "c::C")


def test_checksum_inspect_and_verify_take_reader_options(src: Path, tmp_path: Path) -> None:
    opt = "skip_foreign_tables=true"
    res = run("checksum", src, "--option", opt, "--json")
    assert res.exit_code == 0 and json.loads(res.output)["digest"] == api.checksum(src).digest
    assert run("inspect", src, "--option", opt).exit_code == 0
    for cmd in (["checksum", src], ["inspect", src]):
        res = run(*cmd, "--option", "cache_size=1")
        assert res.exit_code == 2 and "the sqlite engine has no option 'cache_size'" in res.output
    copy = tmp_path / "copy.rocksdb"
    assert run("convert", "-q", src, copy).exit_code == 0
    res = run("verify", src, copy, "--option-a", opt)
    assert res.exit_code == 0 and "equal" in res.output
    res = run("verify", src, copy, "--option-b", "rocksdb_format_version=6")
    assert res.exit_code == 2 and "for a source" in res.output
    manifest = tmp_path / "m.json"
    manifest.write_text(run("checksum", src, "--json").output)
    assert run("verify", src, "--manifest", manifest, "--option-a", opt).exit_code == 0
    res = run("verify", src, "--manifest", manifest, "--option-b", opt)
    assert res.exit_code == 2 and "--option-b needs a second store B" in res.output


def test_engines_lists_options_with_type_default_and_help() -> None:
    rows = {r["name"]: r for r in json.loads(run("engines", "--json").output)["engines"]}
    for row in rows.values():  # today's keys, and the options
        assert {"name", "description", "extra", "driver_installed", "capabilities"} <= set(row)
    assert rows["rocksdb"]["options"][0] == {
        "name": "rocksdb_format_version",
        "type": "int",
        "default": 5,
        "help": "block-based table format written (5 is readable since RocksDB 6.6)",
        "applies": "dest",
    }
    assert [(o["name"], o["applies"]) for o in rows["rocksdb"]["options"][1:]] == [
        ("rocksdb_compat", "dest"),
        ("layout", "both"),
        ("skip_foreign_tables", "source"),
    ]
    assert [o["name"] for o in rows["redb"]["options"]] == ["redb_format", "bytewise_key_types"]
    assert rows["redb"]["options"][1]["default"] == []
    assert [o["name"] for o in rows["lmdb"]["options"]] == [
        "layout",
        "subdir",
        "skip_foreign_tables",
    ]
    text = run("engines").output.splitlines()
    # The list fits 80 columns: one row per option (engine, name, where it applies, type,
    # default), its help wrapped under it.
    start = next(i for i, line in enumerate(text) if line.startswith("options ("))
    assert all(len(line) <= 80 for line in text), max(text, key=len)
    assert any(
        re.match(r"rocksdb +rocksdb_format_version \(destination; int; default 5\)$", line)
        for line in text[start:]
    ), text
    assert any(
        re.match(r"sqlite +skip_foreign_tables \(source; bool; default false\)$", x) for x in text
    ), text
