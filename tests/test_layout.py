"""An app's own layout (``--source-layout``/``--dest-layout``): SQLite one-table mode.

The "app" here is plain apsw writing ``kv(tbl, k, v, ver)`` the way an app's own
state-store code would, knowing nothing of statemigrate; what comes back is read with
plain SQL too, so the expectations never come from the code under test.
"""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import pytest
from click.testing import CliRunner

from statemigrate import api
from statemigrate.cli import main
from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.cli import run_cli
from statemigrate.testing.conformance import CASES as CONFORMANCE_CASES
from statemigrate.testing.conformance import in_layout

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE_LAYOUT = ROOT / "schemas" / "layouts" / "one-table.sqlite.toml"

# What the app stores: plain events, versioned settings (a negative version is a
# u64 above 2^63 in the state model, as in the default layout), odd keys.
EVENTS = [(i.to_bytes(4, "big")[::-1], b"event %d" % i) for i in range(300)]
SETTINGS = [(b"\x00", b"zero key", 7), (b"theme", b"dark", -1), (b"\xff\x00", b"x", 0)]


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def app_store(path: Path, *, extra_sql: str = "") -> Path:
    """An app's SQLite file in the one-table layout, written with plain SQL."""
    conn = apsw.Connection(str(path))
    conn.execute(
        "CREATE TABLE kv (tbl TEXT NOT NULL, k BLOB NOT NULL, v BLOB NOT NULL, ver INTEGER, "
        "PRIMARY KEY (tbl, k))"
    )
    with conn:
        conn.executemany("INSERT INTO kv VALUES ('events', ?, ?, NULL)", EVENTS)
        conn.executemany("INSERT INTO kv VALUES ('settings', ?, ?, ?)", SETTINGS)
        if extra_sql:
            conn.execute(extra_sql)
    conn.close()
    return path


def app_rows(path: Path) -> list[tuple]:
    """Every row of the layout's table, read with plain SQL (as the app reads it)."""
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        rows = conn.execute("SELECT tbl, k, v, ver FROM kv ORDER BY tbl, k").fetchall()
    finally:
        conn.close()
    return [tuple(r) for r in rows]


def expected_rows() -> list[tuple]:
    rows = [("events", k, v, None) for k, v in EVENTS]
    rows += [("settings", k, v, ver) for k, v, ver in SETTINGS]
    return sorted(rows, key=lambda r: (r[0], r[1]))


def write_layout(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def test_the_app_store_reads_as_the_state_model(tmp_path: Path) -> None:
    src = app_store(tmp_path / "app.sqlite")
    with get_engine("sqlite").open_reader(src, {"layout": str(EXAMPLE_LAYOUT)}) as reader:
        tables = {t.name: (t.kind.value, list(reader.iter_records(t))) for t in reader.tables()}
    assert tables == {
        "events": ("plain", sorted(EVENTS)),
        "settings": ("versioned", sorted((k, v, ver % 2**64) for k, v, ver in SETTINGS)),
    }


@pytest.mark.parametrize("via", engine_names())
def test_app_layout_to_every_engine_and_back_is_exact(via: str, tmp_path: Path) -> None:
    eng = get_engine(via)
    eng.require_driver()
    src = app_store(tmp_path / "app.sqlite")
    mid = tmp_path / f"mid{eng.suffixes[0] if eng.suffixes else ''}"
    back = tmp_path / "back.sqlite"
    r = run("convert", "-q", "--source-layout", EXAMPLE_LAYOUT, src, f"{via}:{mid}")
    assert r.exit_code == 0, r.output
    r = run("convert", "-q", "--dest-layout", EXAMPLE_LAYOUT, f"{via}:{mid}", back)
    assert r.exit_code == 0, r.output
    assert app_rows(back) == expected_rows() == app_rows(src)
    digest = api.checksum(src, options={"layout": str(EXAMPLE_LAYOUT)}).digest
    assert api.checksum(f"{via}:{mid}").digest == digest


def test_verify_checksum_and_inspect_take_a_layout(tmp_path: Path) -> None:
    src = app_store(tmp_path / "app.sqlite")
    plain = tmp_path / "plain.sqlite"
    assert run("convert", "-q", "--source-layout", EXAMPLE_LAYOUT, src, plain).exit_code == 0
    r = run("verify", "-q", "--layout-a", EXAMPLE_LAYOUT, src, plain)
    assert r.exit_code == 0 and r.stdout.splitlines()[-1] == "equal", r.output
    a = run("checksum", "--layout", EXAMPLE_LAYOUT, src)
    b = run("checksum", plain)
    assert a.exit_code == b.exit_code == 0 and a.stdout == b.stdout
    r = run("inspect", "--json", "--layout", EXAMPLE_LAYOUT, src)
    assert r.exit_code == 0, r.output
    tables = {t["table"]: t["records"] for t in json.loads(r.stdout)["tables"]}
    assert tables == {"events": len(EVENTS), "settings": len(SETTINGS)}
    # Without the layout the app's table is foreign: refused, naming it.
    r = run("checksum", src)
    assert r.exit_code == 4 and "'kv'" in r.stderr


def test_the_written_table_is_the_layouts_and_nothing_else_of_the_app(tmp_path: Path) -> None:
    src = app_store(tmp_path / "app.sqlite")
    out = tmp_path / "out.sqlite"
    r = run("convert", "-q", "--source-layout", EXAMPLE_LAYOUT, "--dest-layout", EXAMPLE_LAYOUT,
            src, out)  # fmt: skip
    assert r.exit_code == 0, r.output
    conn = apsw.Connection(str(out), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        names = sorted(
            n for (n,) in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")
        )
        sql = conn.execute("SELECT sql FROM sqlite_schema WHERE name = 'kv'").fetchall()[0][0]
    finally:
        conn.close()
    assert names == ["__statemigrate__", "kv"]
    assert "PRIMARY KEY" in sql and sql.rstrip().endswith("WITHOUT ROWID")
    assert app_rows(out) == expected_rows()


def test_foreign_tables_beside_the_layout_are_refused_or_skipped(tmp_path: Path) -> None:
    src = app_store(tmp_path / "app.sqlite", extra_sql="CREATE TABLE log (line TEXT)")
    out = tmp_path / "out.sqlite"
    r = run("convert", "-q", "--source-layout", EXAMPLE_LAYOUT, src, out)
    assert r.exit_code == 4 and "'log'" in r.stderr
    assert not out.exists() and not Path(str(out) + ".partial").exists()
    r = run("convert", "-q", "--source-layout", EXAMPLE_LAYOUT, "--skip-foreign-tables", src, out)
    assert r.exit_code == 0, r.output


GOOD = """engine = "sqlite"
versioned = ["settings"]
[sqlite]
mode = "one-table"
table = "kv"
name_column = "tbl"
key = "k"
value = "v"
version = "ver"
"""


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (GOOD + "colour = 1\n", "unknown field sqlite.colour"),
        (GOOD.replace('key = "k"\n', ""), "sqlite.key must be a non-empty string"),
        (GOOD.replace('"kv"', '"kv; DROP TABLE x"'), "not a plain SQL identifier"),
        (GOOD.replace('engine = "sqlite"', 'engine = "rocksdb"'), "describes engine 'rocksdb'"),
        (
            GOOD.replace('"one-table"', '"table-per-table"'),
            "is not a field of mode 'table-per-table'",
        ),
        (GOOD + '[kv]\nmode = "prefix"\n', "a [kv] section describes a key-value engine"),
        (GOOD.replace('version = "ver"\n', ""), "versioned tables need a version column"),
        (GOOD.replace('value = "v"', 'value = "k"'), "are not all different"),
        ("engine = [", "is not a TOML file"),
    ],
    ids=["unknown", "missing", "injection", "engine", "per-table", "kv", "version", "same", "toml"],
)
def test_a_bad_layout_is_one_line_exit_2_before_anything_is_written(
    text: str, says: str, tmp_path: Path
) -> None:
    src = app_store(tmp_path / "app.sqlite")
    layout = write_layout(tmp_path / "bad.toml", text)
    out = tmp_path / "out.sqlite"
    for args in (
        ["convert", "-q", "--source-layout", layout, src, out],
        ["convert", "-q", "--source-layout", EXAMPLE_LAYOUT, "--dest-layout", layout, src, out],
    ):
        r = run(*args)
        assert r.exit_code == 2, r.output
        lines = r.stderr.splitlines()
        assert lines[0].startswith(f"statemigrate: error: layout {layout}: ") and says in lines[0]
        assert not out.exists() and not Path(str(out) + ".partial").exists()


def test_a_missing_layout_file_and_an_engine_without_layouts_are_exit_2(tmp_path: Path) -> None:
    src = app_store(tmp_path / "app.sqlite")
    r = run("checksum", "--layout", tmp_path / "nope.toml", src)
    assert r.exit_code == 2 and "cannot be read" in r.stderr
    r = run("checksum", "--layout", EXAMPLE_LAYOUT, f"redb:{src}")
    assert r.exit_code == 2 and "has no option 'layout'" in r.stderr


@pytest.mark.parametrize(
    ("sql", "says"),
    [
        (
            (
                "UPDATE kv SET ver = 3 WHERE tbl = 'events' "
                "AND k = (SELECT min(k) FROM kv WHERE tbl = 'events')"
            ),
            "has a ver",
        ),
        ("UPDATE kv SET ver = NULL WHERE tbl = 'settings' AND k = x'7468656d65'", "has no ver"),
        ("INSERT INTO kv VALUES (x'07', x'01', x'02', NULL)", "not a table name"),
        ("INSERT INTO kv VALUES ('events', 'text key', x'02', NULL)", "outside the model"),
    ],
    ids=["version-in-plain", "no-version-in-versioned", "name-not-text", "text-key"],
)
def test_a_store_that_contradicts_its_layout_is_exit_4(sql: str, says: str, tmp_path: Path) -> None:
    src = app_store(tmp_path / "app.sqlite", extra_sql=sql)
    r = run("checksum", "--layout", EXAMPLE_LAYOUT, src)
    assert r.exit_code == 4, r.output
    assert says in r.stderr.splitlines()[0], r.stderr


def test_a_store_without_the_layouts_column_is_exit_4(tmp_path: Path) -> None:
    src = tmp_path / "app.sqlite"
    conn = apsw.Connection(str(src))
    conn.execute("CREATE TABLE kv (tbl TEXT, k BLOB, v BLOB)")
    conn.close()
    r = run("checksum", "--layout", EXAMPLE_LAYOUT, src)
    assert r.exit_code == 4 and "no column 'ver'" in r.stderr, r.output


@pytest.mark.parametrize("at_head", [False, True], ids=["example", "versioned-at-head"])
def test_upgrades_in_place_run_on_a_store_in_a_layout(at_head: bool, tmp_path: Path) -> None:
    """The example schema's revisions, up and back, on a store in the one-table layout: at
    every revision the same digest as the same revision in the default layout.

    ``versioned-at-head``: the layout lists ``prefs`` too, versioned from revision 0004
    on; before that the kind recorded in the metadata (plain) wins.
    """
    from statemigrate.testing.upgrade_conformance import EXAMPLE, seeded

    lay = EXAMPLE_LAYOUT
    if at_head:
        lay = tmp_path / "at-head.toml"
        text = EXAMPLE_LAYOUT.read_text()
        assert 'versioned = ["settings"]' in text
        lay.write_text(
            text.replace('versioned = ["settings"]', 'versioned = ["settings", "prefs"]')
        )
    default = seeded(get_engine("sqlite"), tmp_path, events=400)
    app = tmp_path / "app.sqlite"
    assert run("convert", "-q", "--dest-layout", lay, default, app).exit_code == 0
    layout = {"layout": str(lay)}
    start = api.checksum(app, options=layout).digest
    for rev in ("0002", "0003", "0004", "0005"):
        r = run("upgrade", "-q", "--layout", lay, app, "--schema", EXAMPLE, "--to", rev)
        assert r.exit_code == 0, r.output
        api.upgrade(default, EXAMPLE, to=rev, digests=False)
        assert api.checksum(app, options=layout).digest == api.checksum(default).digest, rev
    r = run("check", "--layout", lay, app, "--schema", EXAMPLE)
    assert r.exit_code == 0 and "at head" in r.stdout, r.output
    r = run("current", "--json", "--layout", lay, app)
    assert json.loads(r.stdout)["current"] == ["0005"]
    r = run("downgrade", "-q", "--layout", lay, app, "--schema", EXAMPLE, "--to", "0001")
    assert r.exit_code == 0, r.output
    assert api.checksum(app, options=layout).digest == start
    # Only the layout's table, the metadata and Alembic's stamp are in the file.
    conn = apsw.Connection(str(app), flags=apsw.SQLITE_OPEN_READONLY)
    try:
        names = sorted(
            n for (n,) in conn.execute("SELECT name FROM sqlite_schema WHERE type='table'")
        )
        left = conn.execute("SELECT count(*) FROM kv WHERE tbl LIKE '__sm_tmp__%'").fetchall()
    finally:
        conn.close()
    assert names == ["__statemigrate__", "alembic_version", "kv"] and left == [(0,)]


def test_layout_init_guesses_the_app_layout_and_says_what_it_cannot_see(tmp_path: Path) -> None:
    src = app_store(tmp_path / "app.sqlite")
    r = run("layout", "init", "sqlite", src)
    assert r.exit_code == 0, r.output
    guessed = write_layout(tmp_path / "guessed.toml", r.stdout)
    assert "cannot be told from here" in r.stdout  # which tables are versioned
    assert 'versioned = ["settings"]' in r.stdout
    # The guess is a layout file that reads the store exactly as the example does.
    a = run("checksum", "--layout", guessed, src)
    b = run("checksum", "--layout", EXAMPLE_LAYOUT, src)
    assert a.exit_code == b.exit_code == 0 and a.stdout == b.stdout


def test_layout_init_refuses_what_it_cannot_guess(tmp_path: Path) -> None:
    plain = tmp_path / "plain.sqlite"
    src = app_store(tmp_path / "app.sqlite")
    assert run("convert", "-q", "--source-layout", EXAMPLE_LAYOUT, src, plain).exit_code == 0
    r = run("layout", "init", "sqlite", plain)  # the default layout: nothing to guess
    assert r.exit_code == 0 and "statemigrate's own SQL layout" in r.stderr, r.output
    assert r.stdout == "" and "no layout file is needed" in r.stderr
    r = run("layout", "init", "fjall3", src)
    assert r.exit_code == 2 and "sqlite, rocksdb and lmdb only so far" in r.stderr
    r = run("layout", "init", "rocksdb", src)  # a SQLite file is no RocksDB store
    assert r.exit_code == 4 and "not a RocksDB store" in r.stderr


# --- the conformance suite over the one-table layout ------------------------------------


def _one_table_engine(tmp: Path) -> type:
    """SQLite with the example one-table layout given to every reader and writer, as the
    CLI's ``--source-layout``/``--dest-layout`` do."""
    from statemigrate.engines.sqlite import SqliteEngine

    return in_layout(SqliteEngine, EXAMPLE_LAYOUT)


@pytest.mark.parametrize("case_name", sorted(CONFORMANCE_CASES))
def test_conformance_over_the_one_table_layout(case_name: str, tmp_path: Path) -> None:
    CONFORMANCE_CASES[case_name](_one_table_engine(tmp_path), tmp_path)


@pytest.mark.parametrize("dst", ["sqlite", "lmdb", "rocksdb"])
def test_a_killed_convert_from_the_one_table_layout_resumes_exactly(
    dst: str, tmp_path: Path
) -> None:
    """Killed after its first batch, then resumed: the destination holds exactly the app's
    state (the source read on from after the last key committed), read by the driver."""
    import signal

    src = app_store(tmp_path / "app.sqlite")
    out = tmp_path / f"out.{dst}"
    args = ["convert", "-q", "--source-layout", str(EXAMPLE_LAYOUT), "--batch-records", "50",
            str(src), f"{dst}:{out}"]  # fmt: skip
    killed = run_cli(args, env={"STATEMIGRATE_CRASH_AT": "batch"}, timeout=120)  # a hang guard
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    assert Path(f"{out}.partial").exists() and not out.exists()
    r = run(*args, "--resume")
    assert r.exit_code == 0, r.output
    assert not Path(f"{out}.partial").exists()
    assert own_tables(dst, out) == {
        "events": sorted(EVENTS),
        "settings": sorted((k, v, ver % 2**64) for k, v, ver in SETTINGS),
    }


def own_tables(engine: str, path: Path) -> dict[str, list[tuple]]:
    """The tables of a store in the engine's default layout (DESIGN.md), read with its own
    driver: SQL tables with a ``version`` column, or LMDB's named databases and RocksDB's
    column families with the 8-byte big-endian version before a versioned value."""
    if engine == "sqlite":
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            got = {}
            for name in ("events", "settings"):
                cols = "key, value, version" if name == "settings" else "key, value"
                rows = conn.execute(f"SELECT {cols} FROM {name} ORDER BY key").fetchall()
                got[name] = [(*r[:2], r[2] % 2**64) if len(r) == 3 else tuple(r) for r in rows]
            return got
        finally:
            conn.close()
    pairs: dict[str, list[tuple[bytes, bytes]]] = {}
    if engine == "lmdb":
        import lmdb

        env = lmdb.open(str(path), subdir=True, max_dbs=8, readonly=True, lock=False)
        try:
            for name in ("events", "settings"):
                with env.begin(db=env.open_db(name.encode(), create=False)) as txn:
                    pairs[name] = [(bytes(k), bytes(v)) for k, v in txn.cursor()]
        finally:
            env.close()
    else:
        import gc

        import rocksdict

        opts = rocksdict.Options(raw_mode=True)
        names = rocksdict.Rdict.list_cf(str(path), opts)
        db = rocksdict.Rdict(str(path), opts, column_families={n: opts for n in names if n != "default"},
                             access_type=rocksdict.AccessType.read_only())  # fmt: skip
        try:
            for name in ("events", "settings"):
                cf = db.get_column_family(name)
                pairs[name] = list(cf.items())
                del cf
        finally:
            gc.collect()
            db.close()
    return {
        "events": pairs["events"],
        "settings": [(k, v[8:], int.from_bytes(v[:8], "big")) for k, v in pairs["settings"]],
    }
