"""SQL layouts (issue 28): every mode and codec there and back through LMDB, exactly.

The "app" is plain SQL (the standard library's sqlite3) writing its own tables, DDL and
header pragmas, knowing nothing of statemigrate; what comes back is read with plain SQL
too (``sqlite_schema``, ``PRAGMA``, ``typeof``), and the LMDB store in between with
py-lmdb, so the expectations never come from the code under test.
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import lmdb
import pytest
from click.testing import CliRunner

from statemigrate.cli import main
from statemigrate.testing.cli import run_cli
from statemigrate.testing.conformance import CASES as CONFORMANCE_CASES
from statemigrate.testing.conformance import in_layout

I64_MIN, I64_MAX = -(2**63), 2**63 - 1


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def make_app(path: Path, statements: list[str], rows: dict[str, list[tuple[Any, ...]]]) -> Path:
    """The app's file: its statements (DDL, pragmas), then its rows, in its own order."""
    db = sqlite3.connect(path, isolation_level=None)
    try:
        for s in statements:
            db.execute(s)
        for table, table_rows in rows.items():
            for row in table_rows:
                marks = ", ".join("?" for _ in row)
                db.execute(f'INSERT INTO "{table}" VALUES ({marks})', row)
    finally:
        db.close()
    return path


def file_shape(path: Path) -> dict[str, Any]:
    """What an app sees of the file besides its rows: schema rows and header pragmas."""
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return {
            "schema": sorted(db.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema")),
            "user_version": db.execute("PRAGMA user_version").fetchone()[0],
            "application_id": db.execute("PRAGMA application_id").fetchone()[0],
        }
    finally:
        db.close()


def table_rows(path: Path, table: str, columns: str = "key, value") -> list[tuple[Any, ...]]:
    """Every row with each column's storage class, in the app's key order."""
    cols = [c.strip() for c in columns.split(",")]
    typed = ", ".join(f"{c}, typeof({c})" for c in cols)
    db = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
    try:
        return db.execute(f'SELECT {typed} FROM "{table}" ORDER BY {cols[0]}').fetchall()
    finally:
        db.close()


def there_and_back(src: Path, layout_text: str, tmp_path: Path) -> tuple[Path, Path]:
    layout = tmp_path / "layout.toml"
    layout.write_text(layout_text)
    mid = tmp_path / "mid.lmdb"
    r = run("convert", "-q", "--source-layout", layout, src, f"lmdb:{mid}")
    assert r.exit_code == 0, r.output
    back = tmp_path / "back" / src.name
    back.parent.mkdir()
    r = run("convert", "-q", "--dest-layout", layout, f"lmdb:{mid}", f"sqlite:{back}")
    assert r.exit_code == 0, r.output
    assert sorted(p.name for p in back.parent.iterdir()) == [src.name]  # no side file left
    return mid, back


def lmdb_pairs(path: Path, name: str) -> list[tuple[bytes, bytes]]:
    env = lmdb.open(str(path), subdir=True, max_dbs=16, readonly=True, lock=False)
    try:
        with env.begin(db=env.open_db(name.encode(), create=False)) as txn:
            return [(bytes(k), bytes(v)) for k, v in txn.cursor()]
    finally:
        env.close()


def lmdb_names(path: Path) -> list[str]:
    env = lmdb.open(str(path), subdir=True, max_dbs=16, readonly=True, lock=False)
    try:
        with env.begin() as txn:
            return sorted(bytes(k).decode() for k, _ in txn.cursor())
    finally:
        env.close()


# --- each mode and codec there and back ---------------------------------------------

TEXT_KEYS = ["a", "ab", "b", "é", "z\x00nul", "日本", "😀", "Zürich"]


def test_table_per_table_text_keys_app_ddl_indexes_triggers_and_pragmas(tmp_path: Path) -> None:
    """sqlitedict's shape plus the app's index, trigger and header values, all kept."""
    ddl = 'CREATE TABLE "{t}" (key TEXT PRIMARY KEY, value BLOB, hits INTEGER DEFAULT 0)'
    statements = [
        "PRAGMA user_version = 42",
        "PRAGMA application_id = 1397048659",
        ddl.format(t="mail"),
        ddl.format(t="contacts"),
        'CREATE INDEX "mail_by_value" ON "mail" (value)',
        "CREATE TABLE audit (what TEXT)",
    ]
    rows = {
        "mail": [(k, f"v{i}".encode() * i, 0) for i, k in enumerate(TEXT_KEYS)],
        "contacts": [("solo", b"", 0)],
    }
    src = make_app(tmp_path / "app.sqlite", statements, rows)
    layout = f"""\
engine = "sqlite"
metadata = "none"
[sql]
mode = "table-per-table"
tables = {{ mail = "mail", contacts = "contacts" }}
key = "key"
value = "value"
key_codec = "text"
rowid = true
create = '{ddl.format(t="{table}").replace('"{table}"', "{table}")}'
extra_sql = {{ mail = ['CREATE INDEX "mail_by_value" ON "mail" (value)'] }}
user_version = 42
application_id = 1397048659
"""
    # The app's other table is refused by name, then left out when asked (and listed).
    lay = tmp_path / "l.toml"
    lay.write_text(layout)
    r = run("convert", "-q", "--source-layout", lay, src, f"lmdb:{tmp_path / 'x.lmdb'}")
    assert r.exit_code == 4 and "'audit'" in r.stderr.splitlines()[0], r.output
    db = sqlite3.connect(src)
    db.execute("DROP TABLE audit")
    db.close()
    mid, back = there_and_back(src, layout, tmp_path)
    # In LMDB: the text keys' UTF-8 bytes, in byte order; the app's tables only.
    assert lmdb_names(mid) == ["__statemigrate__", "contacts", "mail"]
    assert [k for k, _ in lmdb_pairs(mid, "mail")] == sorted(k.encode() for k in TEXT_KEYS)
    assert file_shape(back) == file_shape(src)
    for t in ("mail", "contacts"):
        assert table_rows(back, t) == table_rows(src, t)
        assert {r[1] for r in table_rows(back, t)} == {"text"}


def test_template_integer_keys_text_values_versioned_without_rowid(tmp_path: Path) -> None:
    """Integer keys in numeric order (negative ones first), TEXT values in a column the
    app declared BLOB come back TEXT, a versioned table's versions, WITHOUT ROWID."""
    keys = [I64_MIN, -5, -1, 0, 1, 2, 10, 2**40, I64_MAX]
    ddl = "CREATE TABLE {t} (id INTEGER PRIMARY KEY, doc BLOB NOT NULL, ver INTEGER) WITHOUT ROWID"
    quoted = {"state_events": '"state_events"', "state_settings": '"state_settings"'}
    statements = [ddl.format(t=quoted["state_events"]), ddl.format(t=quoted["state_settings"])]
    rows = {
        "state_events": [(k, f"event {k} ✓", None) for k in keys],
        "state_settings": [(k, '{"on": true}', -1 if k < 0 else k) for k in keys[:4]],
    }
    src = make_app(tmp_path / "app.sqlite", statements, rows)
    layout = f"""\
engine = "sqlite"
versioned = ["settings"]
metadata = "none"
[sql]
mode = "table-per-table"
template = "state_{{name}}"
key = "id"
value = "doc"
version = "ver"
key_codec = "integer"
value_codec = "text"
create = '{ddl.format(t="{table}")}'
"""
    mid, back = there_and_back(src, layout, tmp_path)
    # The documented integer encoding: 8 bytes big-endian with the sign bit flipped.
    stored = [k for k, _ in lmdb_pairs(mid, "events")]
    assert stored == [(k + 2**63).to_bytes(8, "big") for k in keys]
    assert stored == sorted(stored)
    assert file_shape(back)["schema"] == file_shape(src)["schema"]
    cols = "id, doc, ver"
    for t in ("state_events", "state_settings"):
        assert table_rows(back, t, cols) == table_rows(src, t, cols)
    assert {r[3] for r in table_rows(back, "state_events", cols)} == {"text"}  # typeof(doc)


def test_single_table_unique_key_in_a_rowid_table_keeps_rowids(tmp_path: Path) -> None:
    """dbm.sqlite3's shape (key BLOB UNIQUE in a rowid table), rows written out of key
    order: with keep_rowid the app's ORDER BY rowid comes back as it was."""
    ddl = "CREATE TABLE Dict (key BLOB UNIQUE NOT NULL, value BLOB NOT NULL)"
    keys = [b"\xff", b"\x00", b"m", b"a\x00b", b"zz", b"\x00\x00"]
    src = make_app(tmp_path / "app.sqlite", [ddl], {"Dict": [(k, k * 3) for k in keys]})
    layout = f"""\
engine = "sqlite"
metadata = "none"
[sql]
mode = "single-table"
table = "Dict"
name = "dict"
key = "key"
value = "value"
rowid = true
keep_rowid = true
create = "{ddl}"
"""
    mid, back = there_and_back(src, layout, tmp_path)
    assert lmdb_names(mid) == ["__statemigrate__", "dict"]
    # keep_rowid's documented value: the rowid's 8 bytes (integer codec), then the value.
    pairs = lmdb_pairs(mid, "dict")
    by_key = {k: v for k, v in pairs}
    assert by_key[b"\xff"] == (1 + 2**63).to_bytes(8, "big") + b"\xff" * 3
    assert file_shape(back) == file_shape(src)
    cols = "rowid, key, value"
    assert table_rows(back, "Dict", cols) == table_rows(src, "Dict", cols)


@pytest.mark.parametrize(
    ("codec", "declared", "values"),
    [
        ("integer", "INTEGER", [I64_MIN, -1, 0, 7, I64_MAX]),
        ("real", "REAL", [-1.5, 0.0, 3.25, 1e300, -2.5e-300]),
        ("blob", "BLOB", [b"", b"\x00", b"\xff" * 40, "ü".encode(), b"x"]),
    ],
)
def test_one_table_value_codecs(
    codec: str, declared: str, values: list[Any], tmp_path: Path
) -> None:
    ddl = (
        f"CREATE TABLE kv (tbl TEXT NOT NULL, k TEXT NOT NULL, v {declared}, PRIMARY KEY (tbl, k))"
    )
    rows = [("a", f"k{i}", v) for i, v in enumerate(values)] + [("b", "only", values[0])]
    src = make_app(tmp_path / "app.sqlite", [ddl], {"kv": rows})
    layout = f"""\
engine = "sqlite"
[sql]
mode = "one-table"
table = "kv"
name_column = "tbl"
key = "k"
value = "v"
key_codec = "text"
value_codec = "{codec}"
create = "{ddl}"
"""
    _, back = there_and_back(src, layout, tmp_path)
    cols = "tbl, k, v"
    db = sqlite3.connect(back)
    got = db.execute("SELECT tbl, k, v, typeof(v) FROM kv ORDER BY tbl, k").fetchall()
    db.close()
    db = sqlite3.connect(src)
    want = db.execute("SELECT tbl, k, v, typeof(v) FROM kv ORDER BY tbl, k").fetchall()
    db.close()
    assert got == want
    assert cols  # the columns compared above


def test_a_plain_table_is_created_when_the_layout_has_no_create(tmp_path: Path) -> None:
    """Without `create`, the writer makes what sqlitedict itself makes for a dict."""
    from sqlitedict import SqliteDict

    src = tmp_path / "app.sqlite"
    with SqliteDict(str(src), tablename="mail", autocommit=True) as d:
        d["b"] = 1
        d["a"] = 2
    layout = """\
engine = "sqlite"
metadata = "none"
[sql]
mode = "table-per-table"
tables = { mail = "mail" }
key = "key"
value = "value"
key_codec = "text"
rowid = true
"""
    _, back = there_and_back(src, layout, tmp_path)
    assert file_shape(back) == file_shape(src)
    with SqliteDict(str(back), tablename="mail", flag="r") as d:
        assert dict(d.items()) == {"a": 2, "b": 1}


# --- what the reader refuses ----------------------------------------------------------


@pytest.mark.parametrize(
    ("row", "says"),
    [
        ("(x'01', x'00')", "the key X'01' is a BLOB (X'01'), not a TEXT"),
        ("('k', 'text value')", "is a TEXT ('text value'), not a BLOB"),
        ("('k', NULL)", "is NULL, not a BLOB"),
    ],
    ids=["blob-key", "text-value", "null-value"],
)
def test_a_row_of_another_storage_class_is_exit_4_naming_it(
    row: str, says: str, tmp_path: Path
) -> None:
    src = make_app(
        tmp_path / "app.sqlite",
        ["CREATE TABLE t (key TEXT PRIMARY KEY, value BLOB)", f"INSERT INTO t VALUES {row}"],
        {"t": [("a", b"1")]},
    )
    layout = tmp_path / "l.toml"
    layout.write_text(
        'engine = "sqlite"\nmetadata = "none"\n[sql]\nmode = "single-table"\ntable = "t"\n'
        'key = "key"\nvalue = "value"\nkey_codec = "text"\n'
    )
    r = run("checksum", "--layout", layout, src)
    assert r.exit_code == 4, r.output
    first = r.stderr.splitlines()[0]
    assert "'t'" in first and says in first, r.stderr


def test_a_text_key_read_as_blob_names_the_codec_that_reads_it(tmp_path: Path) -> None:
    src = make_app(
        tmp_path / "app.sqlite",
        ["CREATE TABLE t (key TEXT PRIMARY KEY, value BLOB)"],
        {"t": [("a", b"1")]},
    )
    layout = tmp_path / "l.toml"
    layout.write_text(
        'engine = "sqlite"\n[sql]\nmode = "single-table"\ntable = "t"\nkey = "key"\nvalue = "value"\n'
    )
    r = run("checksum", "--layout", layout, src)
    assert r.exit_code == 4 and 'key_codec = "text"' in r.stderr, r.output


def test_a_value_whose_storage_class_changed_is_refused_not_equal(tmp_path: Path) -> None:
    """One value turned TEXT in a blob-codec column: the store is no longer in its
    layout, and verify refuses it (exit 4, naming the key), never "equal"."""
    ddl = "CREATE TABLE Dict (key BLOB UNIQUE NOT NULL, value BLOB NOT NULL)"
    a = make_app(tmp_path / "a.sqlite", [ddl], {"Dict": [(b"k", b"v"), (b"l", b"w")]})
    b = make_app(tmp_path / "b.sqlite", [ddl], {"Dict": [(b"k", "v"), (b"l", b"w")]})
    layout = tmp_path / "l.toml"
    layout.write_text(
        'engine = "sqlite"\nmetadata = "none"\n[sql]\nmode = "single-table"\ntable = "Dict"\n'
        'key = "key"\nvalue = "value"\nrowid = true\n'
    )
    r = run("verify", "--layout-a", layout, "--layout-b", layout, a, b)
    assert r.exit_code == 4, r.output
    assert "TEXT ('v')" in r.stderr and 'value_codec = "text"' in r.stderr, r.stderr


# --- hostile layouts: one line, exit 2, before anything is read or written -------------

GOOD = """\
engine = "sqlite"
[sql]
mode = "table-per-table"
template = "state_{name}"
key = "key"
value = "value"
"""


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (GOOD.replace("state_{name}", "state"), "must hold {name} exactly once"),
        (GOOD.replace("state_{name}", "{name}_{name}"), "must hold {name} exactly once"),
        (GOOD.replace("state_{name}", "s_{name}_{x}"), "and no other braces"),
        (GOOD.replace("state_{name}", "sqlite_{name}"), "a name SQLite or statemigrate keeps"),
        (
            GOOD.replace('template = "state_{name}"', 'tables = { a = "t", b = "t" }'),
            "two state tables name the same place",
        ),
        (
            GOOD.replace('template = "state_{name}"', 'tables = { a = "t", b = "T" }'),
            "two state tables name the same SQL table (case ignored)",
        ),
        (GOOD.replace('template = "state_{name}"\n', ""), "needs sql.tables or sql.template"),
        (GOOD + 'key_codec = "utf16"\n', "key_codec must be one of blob, text, integer"),
        (GOOD + 'value_codec = "json"\n', "value_codec must be one of blob, text, integer, real"),
        (GOOD + "keep_rowid = true\n", "keep_rowid needs rowid tables"),
        (GOOD + 'create = "DROP TABLE x"\n', "create must be a CREATE TABLE statement"),
        (GOOD + 'create = "CREATE TABLE t (k, v)"\n', "must name its table as {table}"),
        (GOOD + "extra_sql = ['DELETE FROM x']\n", "CREATE INDEX, TRIGGER or VIEW"),
        (GOOD + 'table = "x"\n', "sql.table is not a field of mode 'table-per-table'"),
        (GOOD + "user_version = 4294967296\n", "user_version must be a signed 32-bit integer"),
        (GOOD.replace("table-per-table", "two-tables"), "mode must be one of"),
        (GOOD.replace('engine = "sqlite"', 'engine = "sqlite"\nmetadata = "inline"'), "'inline'"),
        (GOOD + 'columns = ["a b"]\n', "is not a plain SQL identifier"),
        (GOOD + 'columns = ["key"]\n', "are not all different"),
        (GOOD + 'columns = ["ROWID"]\n', "the rowid is keep_rowid = true"),
    ],
    ids=[
        "no-placeholder",
        "two-placeholders",
        "other-braces",
        "reserved",
        "duplicate-mapping",
        "duplicate-folded",
        "neither",
        "key-codec",
        "value-codec",
        "keep-rowid",
        "create-drop",
        "create-unnamed",
        "extra-insert",
        "other-mode-field",
        "user-version",
        "mode",
        "inline",
        "column-name",
        "column-twice",
        "column-rowid",
    ],
)
def test_a_hostile_layout_is_one_line_exit_2(text: str, says: str, tmp_path: Path) -> None:
    src = make_app(
        tmp_path / "app.sqlite", ["CREATE TABLE state_a (key BLOB PRIMARY KEY, value BLOB)"], {}
    )
    layout = tmp_path / "bad.toml"
    layout.write_text(text)
    out = tmp_path / "out.sqlite"
    for args in (
        ["convert", "-q", "--source-layout", layout, src, f"lmdb:{tmp_path / 'o.lmdb'}"],
        ["convert", "-q", "--dest-layout", layout, src, out],
    ):
        r = run(*args)
        assert r.exit_code == 2, r.output
        lines = r.stderr.splitlines()
        assert len(lines) <= 2 and lines[0].startswith(f"statemigrate: error: layout {layout}: ")
        assert says in lines[0], lines[0]
    assert not out.exists() and not (tmp_path / "o.lmdb").exists()


def test_a_table_the_layout_cannot_place_is_refused_before_writing(tmp_path: Path) -> None:
    """A state table missing from an explicit map: exit 5 before the destination exists."""
    src = make_app(
        tmp_path / "app.sqlite",
        ["CREATE TABLE a (key BLOB PRIMARY KEY, value BLOB)"],
        {"a": [(b"k", b"v")]},
    )
    mid = tmp_path / "mid.lmdb"
    layout_a = tmp_path / "a.toml"
    layout_a.write_text(
        'engine = "sqlite"\n[sql]\nmode = "table-per-table"\ntables = { a = "a", b = "b" }\n'
        'key = "key"\nvalue = "value"\n'
    )
    assert run("convert", "-q", "--source-layout", layout_a, src, f"lmdb:{mid}").exit_code == 0
    only_b = tmp_path / "b.toml"
    only_b.write_text(layout_a.read_text().replace('a = "a", ', ""))
    out = tmp_path / "out.sqlite"
    r = run("convert", "-q", "--dest-layout", only_b, f"lmdb:{mid}", out)
    assert r.exit_code == 5 and "'a' (has no SQL table in the layout)" in r.stderr, r.output
    assert not out.exists() and not Path(f"{out}.partial").exists()


def test_layout_init_names_what_no_layout_can_read(tmp_path: Path) -> None:
    src = make_app(tmp_path / "app.sqlite", ["CREATE TABLE log (at INTEGER, what TEXT)"], {})
    r = run("layout", "init", src)
    assert r.exit_code == 4, r.output
    assert "table 'log' has no PRIMARY KEY or UNIQUE column to be the key" in r.stderr
    assert "by hand" not in r.stderr


# --- the conformance suite over a table-per-table layout of each SQL engine -----------

TEMPLATE_LAYOUT = """\
engine = "ENGINE"
[sql]
mode = "table-per-table"
template = "app_{name}"
key = "k"
value = "v"
version = "ver"
rowid = ROWID
"""


def _in_layout(name: str, tmp: Path) -> type:
    """The engine with a table-per-table layout given to every reader and writer, as the
    CLI's ``--source-layout``/``--dest-layout`` do."""
    from statemigrate.registry import get_engine

    layout = tmp / f"{name}-layout.toml"
    # Turso's WITHOUT ROWID tables are experimental: its layout has rowid tables.
    rowid = "true" if name == "turso" else "false"
    layout.write_text(TEMPLATE_LAYOUT.replace("ENGINE", name).replace("ROWID", rowid))
    base = get_engine(name)

    return in_layout(base, layout)


@pytest.mark.parametrize("engine", ["sqlite", "libsql", "turso"])
@pytest.mark.parametrize("case_name", sorted(CONFORMANCE_CASES))
def test_conformance_over_a_table_per_table_layout(
    engine: str, case_name: str, tmp_path: Path
) -> None:
    CONFORMANCE_CASES[case_name](_in_layout(engine, tmp_path), tmp_path)


def test_turso_refuses_to_create_without_rowid_tables_before_writing(tmp_path: Path) -> None:
    src = make_app(
        tmp_path / "app.sqlite",
        ["CREATE TABLE a (key BLOB PRIMARY KEY, value BLOB)"],
        {"a": [(b"k", b"v")]},
    )
    layout = tmp_path / "l.toml"
    layout.write_text(
        'engine = "turso"\n[sql]\nmode = "table-per-table"\ntables = { a = "a" }\n'
        'key = "key"\nvalue = "value"\n'
    )
    out = tmp_path / "out.turso"
    r = run("convert", "-q", "--dest-layout", layout, src, f"turso:{out}")
    assert r.exit_code == 5 and "WITHOUT ROWID" in r.stderr and "rowid = true" in r.stderr
    assert not out.exists() and not Path(f"{out}.partial").exists()
    layout.write_text(layout.read_text() + "rowid = true\n")
    r = run("convert", "-q", "--dest-layout", layout, src, f"turso:{out}")
    assert r.exit_code == 0, r.output
    db = sqlite3.connect(out)
    assert db.execute("SELECT key, value FROM a").fetchall() == [(b"k", b"v")]
    db.close()


def test_a_killed_convert_into_a_layout_without_metadata_resumes_exactly(tmp_path: Path) -> None:
    """metadata = "none": the checkpoint lives in a side file beside the .partial; a
    convert killed after its first batch resumes (records written again are replaced)
    and the store placed holds the app's tables only, no side file beside it."""
    import signal
    import subprocess
    import sys

    ddl = 'CREATE TABLE "{t}" (key TEXT PRIMARY KEY, value BLOB)'
    rows = {"mail": [(f"m{i:04d}", b"x" * (i % 7)) for i in range(400)], "contacts": [("c", b"")]}
    src = make_app(tmp_path / "app.sqlite", [ddl.format(t=t) for t in rows], rows)
    layout = tmp_path / "l.toml"
    layout.write_text(
        'engine = "sqlite"\nmetadata = "none"\n[sql]\nmode = "table-per-table"\n'
        'tables = { mail = "mail", contacts = "contacts" }\nkey = "key"\nvalue = "value"\n'
        'key_codec = "text"\nrowid = true\n'
    )
    # Through SQLite's default layout (a resume from an LMDB source is exit 4 today:
    # "The environment ... is already open in this process").
    mid = tmp_path / "mid.sqlite"
    assert run("convert", "-q", "--source-layout", layout, src, f"sqlite:{mid}").exit_code == 0
    out = tmp_path / "back" / "app.sqlite"
    out.parent.mkdir()
    args = ["convert", "-q", "--dest-layout", str(layout), "--batch-records", "50",
            f"sqlite:{mid}", f"sqlite:{out}"]  # fmt: skip
    killed = run_cli(args, env={"STATEMIGRATE_CRASH_AT": "batch"}, timeout=120)  # a hang guard
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    partial = Path(f"{out}.partial")
    assert partial.exists() and not out.exists()
    db = sqlite3.connect(partial)
    names = {r[0] for r in db.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")}
    db.close()
    assert names <= {"mail", "contacts"}  # nothing of statemigrate's in the store itself
    assert Path(f"{partial}.sm-meta.json").exists()  # the checkpoint, beside it
    resumed = subprocess.run(
        [sys.executable, "-m", "statemigrate", *args, "--resume"],
        capture_output=True,
        timeout=120,  # a guard against a hung child, never a measurement
        check=False,
    )
    assert resumed.returncode == 0, resumed.stderr
    assert sorted(p.name for p in out.parent.iterdir()) == ["app.sqlite"]
    assert file_shape(out) == file_shape(src)
    for t in rows:
        assert table_rows(out, t) == table_rows(src, t)


def test_value_codec_any_keeps_each_values_class_and_verify_tells_a_change(
    tmp_path: Path,
) -> None:
    """A column whose rows mix storage classes: each value's class travels in its
    bytes (one tag byte), comes back as it was, and a value whose class changed is a
    different value to verify (exit 1)."""
    ddl = "CREATE TABLE Dict (key BLOB UNIQUE NOT NULL, value)"
    rows = [
        (b"a", b"\x00bytes"),
        (b"b", "text ✓"),
        (b"c", -(2**63)),
        (b"d", 2.5),
        (b"e", None),
        (b"f", ""),
        (b"g", b""),
    ]
    src = make_app(tmp_path / "app.sqlite", [ddl], {"Dict": rows})
    layout = f"""\
engine = "sqlite"
metadata = "none"
[sql]
mode = "single-table"
table = "Dict"
key = "key"
value = "value"
value_codec = "any"
rowid = true
create = "{ddl}"
"""
    mid, back = there_and_back(src, layout, tmp_path)
    assert dict(lmdb_pairs(mid, "Dict")) == {
        b"a": b"b\x00bytes",
        b"b": "ttext ✓".encode(),
        b"c": b"i" + bytes(8),
        b"d": b"r" + bytes.fromhex("4004000000000000"),  # 2.5, IEEE 754 big-endian
        b"e": b"n",
        b"f": b"t",
        b"g": b"b",
    }
    assert file_shape(back) == file_shape(src)
    assert table_rows(back, "Dict") == table_rows(src, "Dict")
    changed = make_app(
        tmp_path / "changed.sqlite", [ddl], {"Dict": [(b"a", "\x00bytes"), *rows[1:]]}
    )
    lay = tmp_path / "layout.toml"
    r = run("verify", "--layout-a", lay, "--layout-b", lay, src, changed)
    assert r.exit_code == 1, r.output
    r = run("verify", "--layout-a", lay, "--layout-b", lay, src, back)
    assert r.exit_code == 0, r.output


def test_extra_columns_beside_the_value_come_back(tmp_path: Path) -> None:
    """An app's expiry and flags columns beside key and value, through LMDB: the value
    there is framed as documented (lengths, then the tagged columns), and every column
    and storage class comes back."""
    ddl = 'CREATE TABLE "cache" (key TEXT PRIMARY KEY, value BLOB NOT NULL, expires INTEGER, flags)'
    rows = [
        ("a", b"\x01\x02", 1_700_000_000, "hot"),
        ("b", b"", None, 2.5),
        ("c", b"x" * 300, -(2**63), b"\x00"),
    ]
    src = make_app(tmp_path / "app.sqlite", [ddl], {"cache": rows})
    layout = f"""\
engine = "sqlite"
metadata = "none"
[sql]
mode = "table-per-table"
tables = {{ cache = "cache" }}
key = "key"
value = "value"
key_codec = "text"
columns = ["expires", "flags"]
rowid = true
create = '{ddl}'
"""
    mid, back = there_and_back(src, layout, tmp_path)
    framed = dict(lmdb_pairs(mid, "cache"))[b"a"]

    def field(b: bytes) -> bytes:
        return len(b).to_bytes(4, "big") + b

    expires = b"i" + (1_700_000_000 + 2**63).to_bytes(8, "big")
    assert framed == field(b"\x01\x02") + field(expires) + field(b"thot")
    assert file_shape(back) == file_shape(src)
    cols = "key, value, expires, flags"
    assert table_rows(back, "cache", cols) == table_rows(src, "cache", cols)


def test_layout_init_reads_a_mixed_value_column_as_any(tmp_path: Path) -> None:
    """A value column with BLOB, TEXT and INTEGER rows: the printed layout (value_codec
    "any") reads it, and the store comes back with every value in its class."""
    ddl = "CREATE TABLE kv (k BLOB PRIMARY KEY, v)"
    rows = [(b"a", b"\x00"), (b"b", "text"), (b"c", 7)]
    src = make_app(tmp_path / "app.sqlite", [ddl], {"kv": rows})
    r = run("layout", "init", src)
    assert r.exit_code == 0, r.output
    assert 'value_codec = "any"' in r.stdout
    _, back = there_and_back(src, r.stdout, tmp_path)
    assert table_rows(back, "kv", "k, v") == table_rows(src, "kv", "k, v")
    assert file_shape(back) == file_shape(src)


@pytest.mark.parametrize("engine", ["libsql", "turso"])
def test_64_bit_integers_through_the_dbapi_engines(engine: str, tmp_path: Path) -> None:
    """libSQL's driver binds integers beyond 32 bits as REAL, Turso's exactly: integer
    keys, integer values and kept rowids beyond 32 bits come back exact through both."""
    ddl = "CREATE TABLE t (id INTEGER UNIQUE NOT NULL, n INTEGER NOT NULL)"
    big = [I64_MIN, -(2**40) - 3, -1, 0, 2**33 + 1, I64_MAX - 1, I64_MAX]
    src = tmp_path / "app.db"
    db = sqlite3.connect(src, isolation_level=None)
    db.execute(ddl)
    for i, k in enumerate(big):  # rowids beyond 32 bits, out of key order
        db.execute(
            "INSERT INTO t (rowid, id, n) VALUES (?, ?, ?)", (2**40 - i, k, -k - 1 if k < 0 else k)
        )
    db.close()
    layout = tmp_path / "l.toml"
    layout.write_text(
        f'engine = "{engine}"\nmetadata = "none"\n[sql]\nmode = "single-table"\ntable = "t"\n'
        'key = "id"\nvalue = "n"\nkey_codec = "integer"\nvalue_codec = "integer"\n'
        f'rowid = true\nkeep_rowid = true\ncreate = "{ddl}"\n'
    )
    mid = tmp_path / "mid.sqlite"
    r = run("convert", "-q", "--source-layout", layout, f"{engine}:{src}", f"sqlite:{mid}")
    assert r.exit_code == 0, r.output
    back = tmp_path / "back" / "app.db"
    back.parent.mkdir()
    r = run("convert", "-q", "--dest-layout", layout, f"sqlite:{mid}", f"{engine}:{back}")
    assert r.exit_code == 0, r.output
    cols = "rowid, id, n"
    assert table_rows(back, "t", cols) == table_rows(src, "t", cols)
