"""Engine facts are declared on the engine class, and the core modules read them.

Suffixes (a destination named by its suffix), volatile files (left out of the source's
fingerprint), detection priority (a SQLite file is also a libSQL and a Turso file),
the registry without installed metadata, and key limits refused before anything exists.
"""

from __future__ import annotations

import fnmatch
import os
from pathlib import Path

import pytest
from builtin_engines import builtin_engines  # tests/ is on sys.path, not a package

from statemigrate import registry
from statemigrate.api import convert
from statemigrate.checkpoint import fingerprint
from statemigrate.engines.base import Engine
from statemigrate.errors import DestinationError, UsageError
from statemigrate.model import TableInfo
from statemigrate.registry import detect_engine, engine_for_suffix, engine_names, get_engine
from statemigrate.stores.opening import resolve_destination
from statemigrate.testing.phases import Phases
from statemigrate.testing.stores import write_store

CONTENT = {TableInfo("t"): [(b"a", b"1"), (b"b", b"2")], TableInfo("u"): [(b"c", b"3")]}


def _store(engine: type[Engine], tmp_path: Path) -> Path:
    suffix = engine.suffixes[0] if engine.suffixes else ".store"
    return write_store(engine, tmp_path / f"store{suffix}", CONTENT)


def _fingerprint(engine: type[Engine], path: Path) -> dict:
    return fingerprint(engine.name, path, engine.store_paths(path)[1:], engine.volatile_files)


def _bump_mtime(path: Path) -> None:
    st = path.stat()
    os.utime(path, ns=(st.st_atime_ns, st.st_mtime_ns + 5_000_000_000))


# --- suffixes ----------------------------------------------------------------------------


# Each engine's own suffixes name its stores and its destinations: the contract suite
# (statemigrate.testing.contract_suite, run in tests/test_engine_contract.py).


def test_no_suffix_is_claimed_by_two_engines() -> None:
    claimed: dict[str, str] = {}
    for name in engine_names():
        for suffix in get_engine(name).suffixes:
            assert claimed.setdefault(suffix, name) == name, f"{suffix}: {claimed[suffix]}, {name}"


def test_a_destination_of_unknown_suffix_is_a_usage_error(tmp_path: Path) -> None:
    with pytest.raises(UsageError, match="cannot tell the destination engine"):
        resolve_destination(str(tmp_path / "new.txt"), None)
    assert engine_for_suffix(tmp_path / "new") is None


# --- volatile files ----------------------------------------------------------------------


def _volatile_example(engine: type[Engine], path: Path, pattern: str) -> Path:
    """A file of the store named by ``pattern`` (inside a directory store, else beside it)."""
    if pattern.startswith("*"):
        return path.with_name(path.name + pattern[1:].replace("*", "x"))
    return path / pattern.replace("*", ".old.1")


def test_the_fingerprint_leaves_out_the_declared_volatile_files_only(
    engine: type[Engine], tmp_path: Path
) -> None:
    path = _store(engine, tmp_path)
    before = _fingerprint(engine, path)
    for pattern in engine.volatile_files:
        example = _volatile_example(engine, path, pattern)
        if example.exists():
            _bump_mtime(example)
        else:
            example.write_bytes(b"no state here")
        assert _fingerprint(engine, path) == before, f"{example.name} changed the fingerprint"
    files = sorted(p for p in path.rglob("*") if p.is_file()) if path.is_dir() else [path]
    data = [
        p
        for p in files
        if p.name not in {"LOCK", "lock.mdb"}
        and "LOG" not in p.name
        and not any(fnmatch.fnmatch(p.name, pattern) for pattern in engine.volatile_files)
    ]
    assert data, f"no data file in {path}"
    _bump_mtime(data[0])
    assert _fingerprint(engine, path) != before, f"{data[0]} did not change the fingerprint"


# --- detection -------------------------------------------------------------------------------


def test_detection_picks_the_highest_declared_priority(
    engine: type[Engine], tmp_path: Path
) -> None:
    path = _store(engine, tmp_path)
    matches = [get_engine(n) for n in engine_names() if get_engine(n).detect(path)]
    assert engine in matches
    winner = detect_engine(path)
    others = [m for m in matches if m is not winner]
    # Never decided by the order of names: the winner declares more than every other.
    assert all(winner.detect_priority > m.detect_priority for m in others), matches


def test_a_libsql_file_is_detected_as_sqlite(tmp_path: Path) -> None:
    libsql = get_engine("libsql")
    libsql.require_driver()
    path = write_store(libsql, tmp_path / "store.libsql", CONTENT)
    assert libsql.detect(path) and get_engine("turso").detect(path)
    assert detect_engine(path) is get_engine("sqlite")


# --- the registry without installed metadata ---------------------------------------------


def test_without_metadata_the_builtin_engines_are_found_by_their_module(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    everything = engine_names()
    # The built-in ones (a plugin distribution's engine, plugins/turbokv, needs its entry point).
    installed = {name: get_engine(name) for name in builtin_engines()}
    monkeypatch.setattr(registry, "entry_points", lambda group: [])
    registry._entry_points.cache_clear()
    registry.get_engine.cache_clear()
    try:
        assert engine_names() == sorted(installed)
        assert {name: get_engine(name) for name in engine_names()} == installed
        with pytest.raises(UsageError, match="unknown engine 'base'"):
            get_engine("base")
    finally:
        monkeypatch.undo()
        registry._entry_points.cache_clear()
        registry.get_engine.cache_clear()
    assert engine_names() == everything


# --- key limits --------------------------------------------------------------------------

LIMITED = [n for n in engine_names() if get_engine(n).capabilities.min_key_len > 0]
LONG = [n for n in engine_names() if get_engine(n).capabilities.max_key_len is not None]


def _source(tmp_path: Path, extra: list[tuple[bytes, bytes]]) -> Path:
    """A SQLite store of 10,001 records (more than one default batch) plus ``extra``."""
    records = [(b"k%06d" % i, b"v") for i in range(10_001)] + extra
    return write_store(get_engine("sqlite"), tmp_path / "src.sqlite", {TableInfo("t"): records})


def _refused(tmp_path: Path, src: Path, dst_engine: str) -> DestinationError:
    with pytest.raises(DestinationError) as info:
        convert(str(src), str(tmp_path / "dst"), to_engine=dst_engine)
    assert info.value.exit_code == 5
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.sqlite"]  # nothing created
    return info.value


@pytest.mark.parametrize("dst_engine", LIMITED)
def test_an_empty_key_is_refused_before_anything_exists(tmp_path: Path, dst_engine: str) -> None:
    src = _source(tmp_path, [(b"", b"empty key")])
    err = _refused(tmp_path, src, dst_engine)
    assert "key (empty) of table 't': length 0 is outside" in err.message


def test_sqlite_measures_key_lengths_in_sql_and_declines_keys_that_are_not_blobs(
    tmp_path: Path,
) -> None:
    """The check before writing asks SQLite for min/max(length(key)); a TEXT key (whose
    length SQLite counts in characters) is left to the batches, which refuse it."""
    import apsw

    keys = [b"", b"a" * 700, b"k1", b"\x00\xff"]
    src = write_store(
        get_engine("sqlite"),
        tmp_path / "s.sqlite",
        {
            TableInfo("t"): [(k, b"v") for k in sorted(keys)],
            TableInfo("e"): [],
            TableInfo("z"): [(b"", b"only an empty key")],
        },
    )
    with get_engine("sqlite").open_reader(src) as reader:
        tables = {t.name: t for t in reader.tables()}
        assert reader.key_length_bounds(tables["t"]) == (0, 700)
        assert reader.key_length_bounds(tables["e"]) is None  # empty: nothing to measure
        assert reader.key_length_bounds(tables["z"]) == (0, 0)  # not mistaken for empty
    conn = apsw.Connection(str(src))
    conn.execute("INSERT INTO t (key, value) VALUES ('é', x'00')")  # a TEXT key, as an app might
    conn.close()
    with get_engine("sqlite").open_reader(src) as reader:
        assert reader.key_length_bounds(next(t for t in reader.tables() if t.name == "t")) is None


@pytest.mark.parametrize("dst_engine", LONG)
def test_a_key_too_long_in_a_later_batch_is_refused_before_anything_exists(
    tmp_path: Path, dst_engine: str
) -> None:
    limit = get_engine(dst_engine).capabilities.max_key_len
    assert limit is not None
    too_long, longer = b"z" * (limit + 1), b"z" * (limit + 2)
    src = _source(tmp_path, [(too_long, b"x"), (longer, b"y")])
    err = _refused(tmp_path, src, dst_engine)
    # The first offender in key order is named.
    assert f"key {too_long[:64].hex()} of table 't': length {limit + 1} is outside" in err.message


# --- engines written against the 0.1 contract -------------------------------------------

_OLD_PLUGIN = """
from statemigrate.engines.sqlite import SqliteEngine


class OldSqlite(SqliteEngine):
    name = "oldsqlite"
    suffixes = (".oldsqlite",)
    calls = []

    @classmethod
    def check_tables(cls, tables, options):
        cls.calls.append(sorted(t.name for t in tables))
        super().check_tables(tables, options)
"""


def test_an_engine_written_before_check_own_copy_checks_every_convert(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A third-party engine that subclasses a built-in one and overrides ``check_tables``
    with the 0.1 signature: the own copy it inherits (``native_copy``) is checked by
    ``Engine.check_own_copy``, whose default is ``check_tables``, so its check runs
    there as in the batch loop, and nothing calls it with arguments it does not take."""
    (tmp_path / "old_plugin.py").write_text(_OLD_PLUGIN)
    monkeypatch.syspath_prepend(str(tmp_path))
    points = {**registry._entry_points(), "oldsqlite": "old_plugin:OldSqlite"}
    registry.get_engine.cache_clear()
    monkeypatch.setattr(registry, "_entry_points", lambda: points)
    try:
        engine = get_engine("oldsqlite")
        src = write_store(engine, tmp_path / "src.oldsqlite", {TableInfo("t"): [(b"k", b"v")]})
        own, progress = tmp_path / "own.oldsqlite", Phases()
        assert convert(str(src), str(own), progress=progress).verified
        assert progress.native()  # SQLite's backup, inherited
        batch = tmp_path / "batch.oldsqlite"
        assert convert(str(src), str(batch), tables=["t"]).verified
        assert engine.calls == [["t"], ["t"]]  # type: ignore[attr-defined]
    finally:
        registry.get_engine.cache_clear()
