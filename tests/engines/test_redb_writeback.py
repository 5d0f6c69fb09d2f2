"""redb back to the app that wrote it (issue 11): a redb destination gets the file format
and the exact stored type names the source had, composites holding user-defined types are
written in every format, refusals come before anything exists, batches are bounded.

Every file written here is opened and dumped by the redb crate that wrote the source
(the fixture maker's ``dump``/``dump-custom`` modes: redb 2.6, 3.x or 4.x), never only by
statemigrate's own reader.
"""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from statemigrate import convert
from statemigrate.cli import main
from statemigrate.engines.redb import RedbEngine, read_header
from statemigrate.engines.sqlite import SqliteEngine
from statemigrate.errors import DestinationError
from statemigrate.model import TableInfo, TableKind
from statemigrate.testing.phases import Phases
from statemigrate.testing.stores import write_store

ROOT = Path(__file__).resolve().parents[2]
FIXTURES = ROOT / "fixtures" / "redb"
# Fixture -> the redb that wrote it, as the fixture maker's dump modes name it.
WRITTEN_BY = {
    "redb2-format2": "2",  # redb 2.6, file format 2
    "redb2-format3": "2",  # redb 2.6 with its format-3 option (old type names and tuples)
    "redb3-format3": "3.x",  # redb 3.x: variable-width tuples classified Internal2
    "redb4-format3": "4",  # redb 4.x: composites classified Internal3 / UserDefined
}
# The plain fixtures' user-defined key types (not bytewise in truth: their tables are
# compared in byte order); the composite fixtures' ones are bytewise (compared as stored).
CUSTOM_TYPES = ["fixture::RevId", "fixture::ShortLex"]
COMPOSITE_TYPES = ["fixture::TxNo", "fixture::Name"]
# Composite-fixture tables whose tuple layout differs between redb 2.x and 3.0: an
# explicit format change cannot re-lay them (see the refusal test).
RELAID = {"name_last", "tx_values"}
COMPOSITE_TABLES = {
    "tx_keys",
    "option_keys",
    "array_keys",
    "name_last",
    "tx_values",
    "multimap_custom",
}


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def _json(path: Path) -> dict[str, list[list[str]]]:
    return json.loads(Path(str(path) + ".json").read_text())


def _byte_order(dump: dict[str, list[list[str]]]) -> dict[str, list[list[str]]]:
    """The plain fixtures' custom-order tables were written in byte order (as asserted)."""
    return {t: sorted(rows) if t.startswith("custom") else rows for t, rows in dump.items()}


def _metas(path: Path) -> dict[str, tuple[TableKind, dict]]:
    with RedbEngine.open_reader(path) as reader:
        return {t.name: (t.kind, t.meta) for t in reader.tables()}


@pytest.fixture(scope="session")
def redb_dump(fixture_maker):
    """What the real redb of a version reads from a file, with the apps' own types."""

    def dump(version: str, path: Path, custom: bool = False) -> dict[str, list[list[str]]]:
        return json.loads(fixture_maker("dump-custom" if custom else "dump", version, path))

    return dump


def _listing(directory: Path) -> list[str]:
    return sorted(p.name for p in directory.iterdir())


# --- 1. written back in the format and with the type names it was read from ------------


@pytest.mark.parametrize("via", ["sqlite", "jsonl"])
@pytest.mark.parametrize("name", sorted(WRITTEN_BY))
def test_written_back_as_the_redb_that_wrote_it_reads_it(tmp_path, name, via, redb_dump):
    """No format option: redb 2.6's format-2 and format-3 files, redb 3.x's and redb 4.x's
    come back in their own format with their own type names, and the redb that wrote each
    opens the result and finds every table equal."""
    src = FIXTURES / f"{name}.redb"
    before = sha256(src)
    mid = tmp_path / f"mid.{via}"
    back = tmp_path / "back.redb"
    convert(str(src), str(mid))
    convert(str(mid), str(back), destination_options={"bytewise_key_types": CUSTOM_TYPES})
    assert sha256(src) == before
    assert read_header(back)["format"] == read_header(src)["format"]
    assert _byte_order(redb_dump(WRITTEN_BY[name], back)) == _byte_order(_json(src))
    # Every table's stored types, classification byte and tuple layout included.
    assert _metas(back) == _metas(src)


@pytest.mark.parametrize("name", [*sorted(WRITTEN_BY), *(f"{n}-custom" for n in WRITTEN_BY)])
def test_a_same_engine_copy_is_read_by_the_redb_that_wrote_it(tmp_path, name, redb_dump):
    """redb -> redb takes redb's own file copy (tests/test_native_copy_redb.py), with no
    --bytewise-key: the copy keeps the app's own key order. The redb that wrote each
    fixture opens the copy with the app's types and finds every table in its own order,
    also the custom-order tables whose order is not bytewise."""
    src = tmp_path / "src.redb"
    shutil.copyfile(FIXTURES / f"{name}.redb", src)
    dst, progress = tmp_path / "dst.redb", Phases()
    assert convert(str(src), str(dst), progress=progress).verified
    assert progress.native()
    version = WRITTEN_BY[name.removesuffix("-custom")]
    want = _json(FIXTURES / f"{name}.redb")
    assert redb_dump(version, dst, custom=name.endswith("-custom")) == want
    assert _metas(dst) == _metas(src)


def test_the_batch_loop_still_asks_for_bytewise_key_in_a_redb_to_redb_convert(tmp_path):
    """Where redb's own copy is declined (--redb-format with tuple tables, which the batch
    loop spells anew), the custom-order tables are refused before writing, as from any
    other engine: the batch loop writes keys in byte order."""
    src = tmp_path / "src.redb"
    shutil.copyfile(FIXTURES / "redb2-format2.redb", src)
    msg = _refused(tmp_path, src, "--redb-format", "3")
    for ty in CUSTOM_TYPES:
        assert f"--bytewise-key '{ty}'" in msg, msg


@pytest.mark.parametrize("name", sorted(WRITTEN_BY))
def test_a_same_engine_copy_leaves_the_apps_persistent_savepoints_behind(
    tmp_path, name, fixture_maker, redb_dump
):
    """A persistent savepoint the app kept (made by the redb that wrote the file) does not
    come along, as no convert carries one: the copy holds none, and the redb that wrote it
    reads every table of it; the source keeps its savepoint and its bytes (the upgrade
    2 -> 3: tests/test_native_copy_redb.py)."""
    src = tmp_path / "src.redb"
    shutil.copyfile(FIXTURES / f"{name}.redb", src)
    version = WRITTEN_BY[name]
    fixture_maker("savepoint", version, src)
    assert fixture_maker("savepoints", version, src) == "1"
    before = sha256(src)
    dst, progress = tmp_path / "dst.redb", Phases()
    assert convert(str(src), str(dst), progress=progress).verified
    assert progress.native()
    assert sha256(src) == before
    assert fixture_maker("savepoints", version, src) == "1"
    assert read_header(dst)["format"] == read_header(src)["format"]
    assert fixture_maker("savepoints", version, dst) == "0"
    assert redb_dump(version, dst) == _json(FIXTURES / f"{name}.redb")


@pytest.mark.parametrize("fmt", [None, 2, 3])
@pytest.mark.parametrize("name", [*sorted(WRITTEN_BY), *(f"{n}-custom" for n in WRITTEN_BY)])
def test_redb_to_redb_gives_what_the_batch_path_gives(tmp_path, name, fmt):
    """redb -> redb, with or without --redb-format: redb's own copy (or upgrade) where it
    is taken, the batch loop where the types would be spelt anew; either way what the
    batch loop (every table named) writes, or the same refusal."""
    src = FIXTURES / f"{name}.redb"
    opts = {"bytewise_key_types": [*CUSTOM_TYPES, *COMPOSITE_TYPES]}
    if fmt is not None:
        opts["redb_format"] = fmt
    tables = sorted(_metas(src))
    outs = []
    for path, named in ((tmp_path / "own.redb", None), (tmp_path / "batch.redb", tables)):
        try:
            convert(str(src), str(path), tables=named, destination_options=opts)
        except DestinationError as exc:
            outs.append(("refused", exc.message))
        else:
            outs.append((read_header(path)["format"], _metas(path), _dump(path)))
    assert outs[0] == outs[1]


def _dump(path: Path) -> dict:
    with RedbEngine.open_reader(path) as reader:
        return {t.name: [r for b in reader.read_batches(t) for r in b] for t in reader.tables()}


@pytest.mark.parametrize("via", ["sqlite", "jsonl"])
@pytest.mark.parametrize("name", sorted(WRITTEN_BY))
def test_composites_holding_user_defined_types_are_written_back(tmp_path, name, via, redb_dump):
    """Tuples, Option and arrays holding user-defined types, as keys, values and multimap
    values, in formats 2 and 3 and both tuple layouts: the app's redb finds them in its own
    order (its dump looks every key up and checks every key's values are in order)."""
    src = FIXTURES / f"{name}-custom.redb"
    mid = tmp_path / f"mid.{via}"
    back = tmp_path / "back.redb"
    convert(str(src), str(mid))
    convert(str(mid), str(back), destination_options={"bytewise_key_types": COMPOSITE_TYPES})
    assert read_header(back)["format"] == read_header(src)["format"]
    assert redb_dump(WRITTEN_BY[name], back, custom=True) == _json(src)
    assert _metas(back) == _metas(src)


def test_the_u32_after_a_user_defined_type_is_ordered_as_a_number(tmp_path, redb_dump):
    """(TxNo, u32) keys 1 < 256 < 65536 whose little-endian bytes sort otherwise come back
    in the number's order; the dump looks each key up, which fails if they do not."""
    rows = _json(FIXTURES / "redb2-format2-custom.redb")["tx_keys"]
    keys = [bytes.fromhex(k) for k, _ in rows]
    assert keys != sorted(keys)  # redb's order is not the bytes' order here
    mid = tmp_path / "mid.sqlite"
    back = tmp_path / "back.redb"
    convert(str(FIXTURES / "redb2-format2-custom.redb"), str(mid))
    convert(str(mid), str(back), destination_options={"bytewise_key_types": COMPOSITE_TYPES})
    assert redb_dump("2", back, custom=True)["tx_keys"] == rows


def test_data_not_from_redb_gets_the_newest_format(tmp_path):
    src = write_store(SqliteEngine, tmp_path / "a.sqlite", {TableInfo("t"): [(b"k", b"v")]})
    out = tmp_path / "out.redb"
    convert(str(src), str(out))
    assert read_header(out)["format"] == 3


def test_a_writer_that_writes_nothing_creates_nothing(tmp_path):
    w = RedbEngine.create_writer(tmp_path / "x.redb")
    w.close()
    assert _listing(tmp_path) == []


# --- an explicit --redb-format converts on purpose ---------------------------------------


def test_an_explicit_format_respells_redb3_names_for_redb4(tmp_path, redb_dump):
    mid = tmp_path / "mid.sqlite"
    out = tmp_path / "out.redb"
    convert(str(FIXTURES / "redb3-format3.redb"), str(mid))
    convert(
        str(mid),
        str(out),
        destination_options={"redb_format": 3, "bytewise_key_types": CUSTOM_TYPES},
    )
    redb4 = FIXTURES / "redb4-format3.redb"
    assert _byte_order(redb_dump("4", out)) == _byte_order(_json(redb4))
    assert _metas(out) == _metas(redb4)


@pytest.mark.parametrize(
    ("source", "fmt", "dumper", "native"),
    [
        ("redb2-format2-custom", 3, "4", "redb4-format3-custom"),
        ("redb4-format3-custom", 2, "2", "redb2-format2-custom"),
    ],
)
def test_an_explicit_format_respells_composites_of_user_defined_types(
    tmp_path, source, fmt, dumper, native, redb_dump
):
    """redb 2.6 spells (TxNo, u32) Internal, redb 4.x UserDefined. The tables whose tuple
    layout changes are left out here and refused in the test below."""
    mid = tmp_path / "mid.sqlite"
    out = tmp_path / "out.redb"
    convert(str(FIXTURES / f"{source}.redb"), str(mid))
    kept = sorted(COMPOSITE_TABLES - RELAID)
    convert(
        str(mid),
        str(out),
        tables=kept,
        destination_options={"redb_format": fmt, "bytewise_key_types": COMPOSITE_TYPES},
    )
    assert read_header(out)["format"] == fmt
    want = _json(FIXTURES / f"{native}.redb")
    assert redb_dump(dumper, out, custom=True) == {t: want[t] for t in kept}
    native_metas = _metas(FIXTURES / f"{native}.redb")
    assert _metas(out) == {t: native_metas[t] for t in kept}


# --- 3. refusals before anything exists ------------------------------------------------


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _sqlite_of(tmp_path: Path, fixture: str) -> Path:
    mid = tmp_path / "src" / "mid.sqlite"
    mid.parent.mkdir()
    convert(str(FIXTURES / f"{fixture}.redb"), str(mid))
    return mid


def _refused(tmp_path: Path, src: Path, *options: str) -> str:
    """Convert ``src`` to tmp_path/out/back.redb expecting exit 5 and nothing left there."""
    out = tmp_path / "out"
    out.mkdir()
    before = sha256(src)
    res = run("convert", src, out / "back.redb", *options)
    assert res.exit_code == 5, res.output
    assert _listing(out) == []  # no DST, DST.partial, DST.lock
    assert sha256(src) == before
    return " ".join(res.output.split())


def test_every_custom_key_without_bytewise_key_is_listed_at_once(tmp_path):
    msg = _refused(tmp_path, _sqlite_of(tmp_path, "redb4-format3"))
    for table, ty in [("custom_fixed", "fixture::RevId"), ("custom_var", "fixture::ShortLex")]:
        assert f"table '{table}': key type '{ty}'" in msg, msg
        assert f"--bytewise-key '{ty}'" in msg, msg


@pytest.mark.parametrize("name", ["redb2-format2", "redb3-format3", "redb4-format3"])
def test_every_composite_of_user_defined_types_is_listed_at_once(tmp_path, name):
    msg = _refused(tmp_path, _sqlite_of(tmp_path, f"{name}-custom"))
    for table in COMPOSITE_TABLES - {"tx_values"}:  # tx_values' key is a u32
        assert f"table '{table}'" in msg, (table, msg)
    assert "table 'tx_values'" not in msg
    assert "multimap_custom': value type '(fixture::TxNo,u32)'" in msg, msg
    assert "--bytewise-key 'fixture::TxNo'" in msg and "--bytewise-key 'fixture::Name'" in msg


def test_asserting_one_user_defined_type_leaves_the_others_listed(tmp_path):
    src = _sqlite_of(tmp_path, "redb4-format3-custom")
    msg = _refused(tmp_path, src, "--bytewise-key", "fixture::TxNo")
    assert "table 'name_last'" in msg and "--bytewise-key 'fixture::Name'" in msg
    assert "table 'tx_keys'" not in msg and "table 'option_keys'" not in msg


def test_a_format_1_source_is_refused_without_a_format_and_listed_with_its_tables(tmp_path):
    """redb 1.x opens none of the formats written here: written back by default it would
    be a file its app cannot open. The refusal names the way out and the other offenders."""
    src = _sqlite_of(tmp_path, "redb1-format1")
    msg = _refused(tmp_path, src)
    assert "format 1 (redb 1.x)" in msg and "--redb-format 2" in msg, msg
    assert "table 'custom_fixed'" in msg and "table 'custom_var'" in msg, msg
    out = tmp_path / "ok.redb"
    args = ["--redb-format", "3", "--bytewise-key", CUSTOM_TYPES[0]]
    res = run("convert", src, out, *args, "--bytewise-key", CUSTOM_TYPES[1])
    assert res.exit_code == 0, res.output
    assert read_header(out)["format"] == 3


@pytest.mark.parametrize(
    ("source", "fmt"), [("redb2-format2-custom", 3), ("redb4-format3-custom", 2)]
)
def test_an_explicit_format_refuses_tables_whose_layout_would_change(tmp_path, source, fmt):
    keys = ["--bytewise-key", "fixture::TxNo", "--bytewise-key", "fixture::Name"]
    msg = _refused(tmp_path, _sqlite_of(tmp_path, source), "--redb-format", fmt, *keys)
    assert "table 'name_last': key type '(u64,fixture::Name)' changes its tuple layout" in msg
    assert "table 'tx_values': value type '(fixture::TxNo,&str)' cannot have its tuples" in msg
    assert "no --redb-format" in msg
    for table in COMPOSITE_TABLES - RELAID:
        assert f"table '{table}'" not in msg, msg


_NICHE = {"name": "niche::Option<u8>", "class": "Internal3", "width": 1, "legacy": False}
_U8 = {"name": "u8", "class": "Internal", "width": 1, "legacy": False}


def _typed(name: str, key: dict, fmt: int = 3, multimap: bool = False) -> TableInfo:
    meta = {"multimap": multimap, "key": key, "value": _U8, "order": "redb", "format": fmt}
    return TableInfo(name, TableKind.PLAIN, {"redb": meta})


def _sqlite_with_facts(path: Path, content: dict[TableInfo, list]) -> Path:
    """A SQLite store whose tables carry redb facts (``table:<name>`` metadata)."""
    facts = {f"table:{t.name}": json.dumps(t.meta).encode() for t in content}
    return write_store(SqliteEngine, path, content, metadata=facts)


def test_types_the_writer_cannot_produce_are_listed_with_the_rest(tmp_path):
    src = _sqlite_with_facts(
        tmp_path / "src.sqlite",
        {
            _typed("niche_a", _NICHE): [],
            _typed("niche_b", dict(_NICHE, name="niche::Option<u16>", width=2)): [],
            _typed("custom", {"name": "app::Id", "class": "UserDefined", "width": 4}): [],
            _typed("fine", _U8): [(b"\x01", b"\x02")],
        },
    )
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(DestinationError) as exc:
        convert(str(src), str(out / "back.redb"))
    msg = exc.value.message
    assert "table 'niche_a': key type 'niche::Option<u8>'" in msg, msg
    assert "table 'niche_b': key type 'niche::Option<u16>'" in msg, msg
    assert "table 'custom': key type 'app::Id'" in msg and "--bytewise-key 'app::Id'" in msg
    assert "'fine'" not in msg
    assert _listing(out) == []


def test_redb_4_names_cannot_be_written_by_redb_2_6(tmp_path):
    """A table recorded from a redb 4.x file, written into a format-2 file without
    re-spelling, would need redb 4.x's Internal3: the check says which option allows it."""
    src = _sqlite_with_facts(
        tmp_path / "src.sqlite",
        {
            _typed("old", {**_U8, "name": "(u8,u8)", "width": 2, "legacy": True}, fmt=2): [],
            _typed("new", {**_U8, "name": "(u8,u16)", "class": "Internal3", "width": 3}, fmt=2): [],
        },
    )
    out = tmp_path / "out"
    out.mkdir()
    with pytest.raises(DestinationError, match=r"'new'.*Internal3.*redb 2\.6") as exc:
        convert(str(src), str(out / "back.redb"))
    assert "'old'" not in exc.value.message
    assert _listing(out) == []


def test_niche_options_are_typed_tables_in_redbs_order(tmp_path):
    """redb 4.x's niche::Option<T> (behind its experimental-niches feature): None stored as
    T's niche, Some(x) as x; None sorts first. Written back and read again as typed."""
    key = {"name": "niche::Option<bool>", "class": "Internal3", "width": 1, "legacy": False}
    value = {"name": "niche::Option<&str>", "class": "Internal3", "width": None, "legacy": False}
    meta = {"multimap": False, "key": key, "value": value, "order": "redb", "format": 3}
    table = TableInfo("flags", TableKind.PLAIN, {"redb": meta})
    # Record keys are the order-preserving encoding: 00 = None, 01 then the bool.
    records = [(b"\x00", b"\xff"), (b"\x01\x00", b""), (b"\x01\x01", b"yes")]
    src = _sqlite_with_facts(tmp_path / "src.sqlite", {table: records})
    out = tmp_path / "out.redb"
    convert(str(src), str(out))
    assert _metas(out)["flags"][1]["redb"] == meta
    with RedbEngine.open_reader(out) as reader:
        (flags,) = reader.tables()
        assert [r for b in reader.read_batches(flags) for r in b] == records
    back = tmp_path / "back.sqlite"
    convert(str(out), str(back))
    with SqliteEngine.open_reader(back) as reader:
        (flags,) = reader.tables()
        assert [r for b in reader.read_batches(flags) for r in b] == records


# --- resumed and in-place writes keep the source's redb -------------------------------


def test_a_redb_2_6_format_3_file_reopened_for_writing_stays_readable_by_redb_2_6(
    tmp_path, redb_dump
):
    """Written again through redb 2.6 (redb 4.x would rewrite its allocator state in a way
    redb 2.6 no longer opens)."""
    path = tmp_path / "s.redb"
    shutil.copy(FIXTURES / "redb2-format3.redb", path)
    writer = RedbEngine.open_writer(path)
    try:
        with RedbEngine.open_reader(FIXTURES / "redb2-format3.redb") as reader:
            plain = {t.name: t for t in reader.tables()}["plain"]
        writer.write_batch(plain, [(b"zz-new", b"added")])
        writer.finish()
    finally:
        writer.close()
    got = redb_dump("2", path)
    want = _json(FIXTURES / "redb2-format3.redb")
    assert ["7a7a2d6e6577", b"added".hex()] in got["plain"]
    got["plain"].remove(["7a7a2d6e6577", b"added".hex()])
    assert _byte_order(got) == _byte_order(want)


# --- 5. batches bounded exactly ---------------------------------------------------------


@pytest.mark.parametrize("name", sorted(WRITTEN_BY))
@pytest.mark.parametrize("size", [1, 2])
def test_multimap_batches_hold_at_most_max_records(name, size):
    """The fixture's multimap holds a key with three values: a batch still ends at
    exactly ``max_records``, and the batches together are every record once, in order."""
    with RedbEngine.open_reader(FIXTURES / f"{name}.redb") as reader:
        table = {t.name: t for t in reader.tables()}["multimap"]
        whole = [r for b in reader.read_batches(table) for r in b]
        batches = list(reader.read_batches(table, max_records=size))
    assert len(whole) == len(_json(FIXTURES / f"{name}.redb")["multimap"]) == 5
    assert all(len(b) <= size for b in batches)
    assert [r for b in batches for r in b] == whole


def test_the_cache_bound_is_read_from_the_environment_in_a_child(tmp_path):
    """The page-cache bound can be changed for a measurement (STATEMIGRATE_REDB_CACHE_BYTES);
    a tiny cache still converts correctly."""
    env = dict(os.environ, STATEMIGRATE_REDB_CACHE_BYTES="65536")
    script = (
        "import sys; from statemigrate import convert, verify;"
        "convert(sys.argv[1], sys.argv[2]); assert verify(sys.argv[1], sys.argv[2]).equal"
    )
    res = subprocess.run(
        [
            sys.executable,
            "-c",
            script,
            str(FIXTURES / "redb4-format3.redb"),
            str(tmp_path / "o.sqlite"),
        ],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,  # hang guard
        check=False,
    )
    assert res.returncode == 0, res.stderr[-2000:]


# --- 4. the type names are facts of the table --------------------------------------------

# Tables of the plain fixtures and their types, as the fixture maker defines them.
TYPED = {"str_keys": "&str → u32", "u64_keys": "u64 → &str"}


def test_verify_tells_a_table_that_lost_its_type_names(tmp_path):
    """DESIGN.md: a store that lost a redb type name does not verify as equal, even where
    its records do. B's tables hold A's records as `&[u8]` tables: the SQLite copy's
    recorded types deleted by hand, then written back to redb."""
    import sqlite3

    a, mid, b = tmp_path / "a.redb", tmp_path / "mid.sqlite", tmp_path / "b.redb"
    convert(str(FIXTURES / "redb4-format3.redb"), str(a), tables=sorted(TYPED))
    convert(str(a), str(mid))
    assert run("verify", a, mid).exit_code == 0  # the types recorded in its metadata
    with sqlite3.connect(mid) as db:
        db.execute("DELETE FROM __statemigrate__ WHERE key LIKE 'table:%'")
    for other in (mid, None):
        if other is None:
            convert(str(mid), str(b))
            other = b
        r = run("verify", a, other)
        assert r.exit_code == 1, r.output
        for table, types in TYPED.items():
            want = f"{table}: table facts differ (redb types {types} in A, &[u8] → &[u8] in B)"
            assert want in r.output, r.output
    assert all("redb" not in meta for _, meta in _metas(b).values())


def test_typed_tables_into_a_layout_without_metadata_are_refused_and_kept_with_it(
    tmp_path, redb_dump
):
    """A layout with metadata 'none' has nowhere to keep the type names once the store is
    placed: refused before writing (exit 5), a `&[u8]` table not named. With its metadata
    in the store the whole file goes there and back, and redb 4.x opens every table with
    the app's own types."""
    src = FIXTURES / "redb4-format3.redb"
    text = 'engine = "sqlite"\nmetadata = "{}"\nversioned = ["versioned"]\n[sql]\n'
    text += 'mode = "table-per-table"\ntemplate = "app_{{name}}"\nkey = "k"\nvalue = "v"\n'
    text += 'version = "ver"\n'
    none, store = tmp_path / "none.toml", tmp_path / "store.toml"
    none.write_text(text.format("none"))
    store.write_text(text.format("store"))
    out = tmp_path / "out"
    out.mkdir()
    tables = ",".join(sorted([*TYPED, "plain"]))
    r = run("convert", "--tables", tables, "--dest-layout", none, src, out / "app.sqlite")
    assert r.exit_code == 5, r.output
    assert "keeps no metadata" in r.output, r.output
    for table, types in TYPED.items():
        assert f"'{table}' (redb types {types})" in r.output, r.output
    assert "'plain'" not in r.output, r.output
    assert _listing(out) == []
    r = run("convert", "-q", "--dest-layout", store, src, out / "app.sqlite")
    assert r.exit_code == 0, r.output
    back = tmp_path / "back.redb"
    bytewise = [a for t in CUSTOM_TYPES for a in ("--bytewise-key", t)]
    r = run("convert", "-q", "--source-layout", store, *bytewise, out / "app.sqlite", back)
    assert r.exit_code == 0, r.output
    assert _byte_order(redb_dump("4", back)) == _byte_order(_json(src))
