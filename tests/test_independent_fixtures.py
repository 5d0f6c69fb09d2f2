"""Independent fixtures (issue 17): stores the engines' own drivers wrote, expectations without us.

``fixtures/independent/`` holds, for every engine but redb, a store written in DESIGN.md's
default layout by the engine's own driver (``layout.py``, ``make.py``; no statemigrate
code) and ``<engine>.expected.json`` computed from the records written, with plain
``xxhash``. Checked here:

(a) statemigrate's reader of each engine yields exactly those tables, kinds, counts,
    digests, records and metadata;
(b) the independent SQLite fixture converted by ``statemigrate convert`` to each engine
    reads back, through that engine's own driver and the documented layout, as expected;
(c) each fixture converted to SQLite reads back through apsw as expected.

redb is out of scope here: its fixtures are written by the real redb crates and its
converted files are read back by them (``rust/fixture-maker``, ``tests/engines/test_redb.py``).
"""

from __future__ import annotations

import importlib.util
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from builtin_engines import builtin_engines  # tests/ is on sys.path, not a package

import statemigrate
from statemigrate.errors import SourceError
from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.stores import read_store, tree_sha256

HERE = Path(__file__).resolve().parent.parent / "fixtures" / "independent"
# Engines with a fixture written by fixtures/independent/make.py (the drivers only).
ENGINES = tuple(n for n in engine_names() if (HERE / f"app.{n}").exists())
# Engines written by statemigrate and read back by their crates here (crate_read), with
# fjall's major version: no driver of theirs writes fixtures in fixtures/independent.
CRATE_READ = {"fjall2": 2, "fjall3": 3, "turbokv": 0}
WRITTEN = (*ENGINES, *CRATE_READ)
NO_EMPTY_KEYS = ("lmdb", "fjall2", "fjall3")  # DESIGN.md: keys of 1 byte or more
CONVERT_TIMEOUT = 300  # seconds: a hang guard only; a conversion here takes about a second
SQL = ("sqlite", "libsql", "turso")


def _load_layout() -> Any:
    spec = importlib.util.spec_from_file_location("independent_layout", HERE / "layout.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


layout = _load_layout()


def expected(engine: str) -> dict[str, Any]:
    """The expectation file of an engine's fixture."""
    return json.loads((HERE / f"{engine}.expected.json").read_text())


def expected_tables(engine: str) -> dict[str, tuple[str, list[tuple]]]:
    """``{name: (kind, records)}`` as bytes, from the expectation file."""
    out = {}
    for name, t in expected(engine)["tables"].items():
        records = [(bytes.fromhex(r[0]), bytes.fromhex(r[1]), *r[2:]) for r in t["records"]]
        out[name] = (t["kind"], records)
    return out


def expected_metadata(engine: str) -> dict[str, bytes]:
    """The documented metadata entries as the readers report them (bytes values)."""
    meta = expected(engine)["metadata"]
    return {"schema": meta["schema"].encode(), "revision": json.dumps(meta["revision"]).encode()}


def copy_store(src: Path, dst: Path) -> Path:
    """A copy of a store (file or directory) at ``dst``."""
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copyfile(src, dst)
    return dst


def fixture_copy(engine: str, tmp: Path) -> Path:
    """A private copy of an engine's fixture (nothing here may change the committed one)."""
    return copy_store(HERE / f"app.{engine}", tmp / f"app.{engine}")


def convert_cli(
    src_engine: str, src: Path, dst_engine: str, dst: Path
) -> subprocess.CompletedProcess:
    """``statemigrate convert --from A --to B SRC DST`` in a child process."""
    return subprocess.run(
        [sys.executable, "-m", "statemigrate", "convert", "--quiet"]
        + ["--from", src_engine, "--to", dst_engine, str(src), str(dst)],
        check=False,
        capture_output=True,
        text=True,
        timeout=CONVERT_TIMEOUT,
    )


def converted(src_engine: str, src: Path, dst_engine: str, dst: Path) -> Path:
    """Convert, asserting success and that the source did not change."""
    before = tree_sha256(src)
    done = convert_cli(src_engine, src, dst_engine, dst)
    assert done.returncode == 0, done.stderr
    assert tree_sha256(src) == before
    return dst


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("independent")


@pytest.fixture(scope="module")
def from_sqlite(work: Path) -> Callable[[str], Path]:
    """The independent SQLite fixture converted to an engine (once per engine and module).

    LMDB cannot hold empty keys, so its source is the fixture with those rows deleted
    by apsw (the refusal of the whole fixture is tested on its own).
    """
    import apsw

    src = fixture_copy("sqlite", work)
    trimmed = copy_store(src, work / "no-empty-keys.sqlite")
    con = apsw.Connection(str(trimmed))
    for name in expected("sqlite")["tables"]:
        con.execute(f"DELETE FROM {layout.quote(name)} WHERE key = x''")
    con.close()
    done: dict[str, Path] = {}

    def get(engine: str) -> Path:
        if engine not in done:
            source = trimmed if engine in NO_EMPTY_KEYS else src
            done[engine] = converted("sqlite", source, engine, work / f"from-sqlite.{engine}")
        return done[engine]

    return get


@pytest.fixture(scope="module")
def to_sqlite(work: Path) -> Callable[[str], Path]:
    """An independent fixture converted to SQLite (once per engine and module)."""
    done: dict[str, Path] = {}

    def get(engine: str) -> Path:
        if engine not in done:
            src = copy_store(HERE / f"app.{engine}", work / f"source.{engine}")
            done[engine] = converted(engine, src, "sqlite", work / f"to-sqlite-{engine}.sqlite")
        return done[engine]

    return get


def own_read(engine: str, path: Path, tmp: Path) -> dict[str, Any]:
    """Read a store with the engine's own driver (layout.py, or the crates: crate_read), on
    a copy."""
    copy = copy_store(path, tmp / f"own-read.{engine}")
    return crate_read(engine, copy) if engine in CRATE_READ else layout.READERS[engine](copy)


def crate_read(engine: str, path: Path) -> dict[str, Any]:
    """A fjall 2, fjall 3 or TurboKV store read through the real crates' bindings (the
    extension's ``FjallReader``, the plugin's ``TurbokvReader``), raw: the names as the
    crate lists them, fjall 2's unescaped as the README says (test_names), versions split
    off the values and kinds taken from the ``kind:`` entries as DESIGN.md's default
    layouts say (8 bytes big-endian before a versioned value). TurboKV's flat key space
    shows no empty table: its ``kind:`` entry names it."""
    from test_names import documented_read_back

    if engine == "turbokv":
        from statemigrate_turbokv import _native as turbokv

        reader: Any = turbokv.TurbokvReader(str(path))
    else:
        from statemigrate import _native

        reader = _native.FjallReader(str(path), CRATE_READ[engine])
    try:
        meta = dict(reader.metadata())
        kinds = {k[len("kind:") :]: v.decode() for k, v in meta.items() if k.startswith("kind:")}
        rows: dict[str, list[tuple[bytes, bytes]]] = {}
        for stored in reader.names():
            if stored == layout.METADATA:
                continue
            name = documented_read_back(stored) if engine == "fjall2" else stored
            rows[name] = []
            after = None
            while batch := reader.read_batch(stored, after, 1000, 1 << 22, False):
                rows[name] += [(bytes(r[0]), bytes(r[1])) for r in batch]
                after = rows[name][-1][0]
        for name in kinds:
            rows.setdefault(name, [])
    finally:
        reader.close()
    tables: dict[str, tuple[str, list[tuple]]] = {}
    for name, pairs in rows.items():
        if kinds.get(name, "plain") == "versioned":
            tables[name] = (
                "versioned",
                [(k, v[8:], int.from_bytes(v[:8], "big")) for k, v in pairs],
            )
        else:
            tables[name] = ("plain", pairs)
    return {"tables": tables, "metadata": meta}


def crate_fixtures(engine: str) -> list[Path]:
    """Stores of ``engine`` written by its own crate, each with its expectation beside it
    (``X.json`` or ``X.expected.json``): redb's and fjall's, read in their quirk tests."""
    names = {f".{engine}", *get_engine(engine).suffixes}
    return [
        p
        for p in sorted(HERE.parent.glob("*/*"))
        if p.parent != HERE
        and p.suffix in names
        and (Path(f"{p}.json").exists() or Path(f"{p}.expected.json").exists())
    ]


@pytest.mark.parametrize("engine", builtin_engines())
def test_every_engine_has_fixtures_with_independent_expectations(engine):
    """Made by the engine's driver with fixtures/independent/make.py, or by its crate (a
    plugin's engine keeps its fixtures in its own tests: plugins/turbokv/tests/fixtures)."""
    if engine in ENGINES:
        assert expected(engine)["engine"] == engine
    else:
        assert crate_fixtures(engine), f"no fixture of {engine} with an expectation beside it"
    readme = (HERE.parent / "README.md").read_text()
    assert engine in readme, "fixtures/README.md does not say how it was made"


def test_independent_digest_code_reproduces_the_contract_vectors():
    vectors = json.loads((Path(__file__).parent / "data" / "digest_vectors.json").read_text())
    import base64

    for vec in vectors["records"]:
        rec = (base64.b64decode(vec["key_b64"]), base64.b64decode(vec["value_b64"]), vec["version"])
        assert layout.record_hash(rec, vec["version"] is not None) == int(vec["record_hash"], 16)
    digests = {}
    for name, t in vectors["tables"].items():
        versioned = t["kind"] == "versioned"
        recs = [
            (base64.b64decode(r["key_b64"]), base64.b64decode(r["value_b64"]), r.get("version"))
            for r in t["records"]
        ]
        count, total = layout.table_digest(recs, versioned)
        assert (count, f"{total:032x}") == (t["count"], t["sum"]), name
        digests[name] = (t["kind"], count, total)
    assert layout.store_digest(digests) == vectors["store_digest"]


@pytest.mark.parametrize("engine", ENGINES)
def test_expectations_are_consistent_with_their_records(engine):
    exp = expected(engine)
    digests = {}
    for name, (kind, records) in expected_tables(engine).items():
        count, total = layout.table_digest(records, kind == "versioned")
        t = exp["tables"][name]
        assert (count, f"{total:032x}") == (t["count"], t["sum"]), name
        assert [r[0] for r in records] == sorted({r[0] for r in records}), name
        digests[name] = (kind, count, total)
    assert layout.store_digest(digests) == exp["store_digest"]
    assert exp["tables"]['a "quoted" name']["count"] > 0
    assert exp["tables"]["empty"] == {
        "kind": "versioned",
        "count": 0,
        "sum": "0" * 32,
        "records": [],
    }
    versions = {r[2] for r in expected_tables(engine)["versioned"][1]}
    assert {0, 1, 2**63 - 1, 2**63, 2**64 - 1} <= versions
    keys = {r[0] for r in expected_tables(engine)["plain"][1]}
    assert {b"\x00", b"\xff", b"a", b"ab", b"abc"} <= keys
    assert (b"" in keys) == (engine != "lmdb")


# (a) statemigrate's readers against the independent fixtures.


@pytest.mark.parametrize("engine", ENGINES)
def test_reader_digests_match_the_independent_expectation(engine, tmp_path):
    exp = expected(engine)
    report = statemigrate.checksum(f"{engine}:{fixture_copy(engine, tmp_path)}").to_json()
    got = {t["table"]: (t["kind"], t["count"], t["sum"]) for t in report["tables"]}
    want = {n: (t["kind"], t["count"], t["sum"]) for n, t in exp["tables"].items()}
    assert got == want
    assert report["digest"] == exp["store_digest"]


@pytest.mark.parametrize("engine", ENGINES)
def test_reader_records_match_and_the_fixture_is_left_alone(engine, tmp_path):
    path = fixture_copy(engine, tmp_path)
    before = tree_sha256(path)
    data = read_store(get_engine(engine), path)
    assert data["tables"] == expected_tables(engine)
    with statemigrate.open_store(str(path), engine=engine) as reader:  # detection too
        assert {t.name for t in reader.tables()} == set(expected(engine)["tables"])
    assert tree_sha256(path) == before


@pytest.mark.parametrize("engine", ENGINES)
def test_reader_metadata_is_the_documented_stamp(engine, tmp_path):
    data = read_store(get_engine(engine), fixture_copy(engine, tmp_path))
    got = {k: data["metadata"].get(k) for k in ("schema", "revision")}
    assert got == expected_metadata(engine)


# (b) statemigrate's writers, read back by each engine's own driver.


@pytest.mark.parametrize("engine", WRITTEN)
def test_written_store_read_by_the_engines_own_driver(engine, from_sqlite, tmp_path):
    got = own_read(engine, from_sqlite(engine), tmp_path)
    want = expected_tables("lmdb" if engine in NO_EMPTY_KEYS else "sqlite")
    assert got["tables"] == want
    if engine in SQL:
        tail = "WITHOUT ROWID" if engine != "turso" else ")"
        assert all(sql.endswith(tail) for sql in got["ddl"].values()), got["ddl"]
        for name, (kind, records) in want.items():
            cols = ("blob", "blob", "integer") if kind == "versioned" else ("blob", "blob")
            assert got["types"][name] == ([cols] if records else []), name
    kinds = {k for k, v in got["metadata"].items() if k.startswith("kind:")}
    if engine in ("rocksdb", "lmdb", "fjall2", "fjall3"):
        assert kinds == {f"kind:{n}" for n, (kind, _r) in want.items() if kind == "versioned"}
    if engine == "turbokv":  # README: a kind: entry for every table statemigrate creates
        assert kinds == {f"kind:{n}" for n in want}


@pytest.mark.parametrize("engine", WRITTEN)
def test_written_store_carries_the_stamp_in_the_documented_places(engine, from_sqlite, tmp_path):
    got = own_read(engine, from_sqlite(engine), tmp_path)
    stamp = expected_metadata("sqlite" if engine in CRATE_READ else engine)
    assert {k: got["metadata"].get(k) for k in ("schema", "revision")} == stamp
    if engine in SQL:
        assert got["alembic"] == expected("sqlite")["metadata"]["revision"]
    if engine == "jsonl":
        assert got["header"]["schema"] == expected("sqlite")["metadata"]["schema"]
        assert got["header"]["revision"] == expected("sqlite")["metadata"]["revision"]


def test_helixdb_store_without_the_private_registry_is_read(tmp_path):
    content = {
        "plain": ("plain", [(b"", b"empty key"), (b"a", b""), (b"b", b"\xff")]),
        "versioned": ("versioned", [(b"k", b"v", 2**64 - 1)]),
    }
    path = tmp_path / "app.helixdb"
    meta = {"schema": b"independent-app", "revision": b'["0001_independent"]'}
    layout.write_helixdb(path, content, meta, lambda recs: recs, registry=False)
    try:
        data = read_store(get_engine("helixdb"), path)
    except SourceError as exc:  # it reads such a store today: a refusal is a regression
        pytest.fail(f"a HelixDB store without the private registry was refused: {exc.message}")
    assert data["tables"] == content
    assert {k: data["metadata"].get(k) for k in meta} == meta


def test_lmdb_refuses_the_empty_key_before_creating_anything(tmp_path):
    src = fixture_copy("sqlite", tmp_path)
    done = convert_cli("sqlite", src, "lmdb", tmp_path / "out.lmdb")
    assert done.returncode == 5, done.stderr
    lines = done.stderr.strip().splitlines()  # one line, and the hint with the way out
    assert len(lines) == 2 and lines[1].startswith("hint:"), done.stderr
    assert "empty" in lines[0] and "plain" in lines[0] and "--tables" in lines[1]
    assert sorted(p.name for p in tmp_path.iterdir()) == ["app.sqlite"]


# (c) each independent fixture converted to SQLite, read by apsw.


@pytest.mark.parametrize("engine", ENGINES)
def test_fixture_converted_to_sqlite_reads_as_expected_in_apsw(engine, to_sqlite):
    got = layout.read_sqlite(to_sqlite(engine))
    assert got["tables"] == expected_tables(engine)


@pytest.mark.parametrize("engine", ENGINES)
def test_fixture_converted_to_sqlite_keeps_the_stamp(engine, to_sqlite):
    got = layout.read_sqlite(to_sqlite(engine))
    assert {k: got["metadata"].get(k) for k in ("schema", "revision")} == expected_metadata(engine)
    assert got["alembic"] == expected(engine)["metadata"]["revision"]
