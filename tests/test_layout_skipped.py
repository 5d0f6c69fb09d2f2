"""``--skip-foreign-tables`` names what it left out, and never copies nothing silently.

The stores are made with the engines' own drivers (plain rocksdict, py-lmdb, apsw), so
what is "foreign" and how many records it holds comes from the store, not from
statemigrate. Issue 28: a sqlitedict file converted with ``--skip-foreign-tables``
exited 0 with "converted 0 records in 0 tables … verified", naming nothing it skipped.
"""

from __future__ import annotations

import json
from pathlib import Path

import apsw
import lmdb
import rocksdict
from click.testing import CliRunner

from statemigrate.cli import main


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _layout(path: Path, text: str) -> Path:
    path.write_text(text)
    return path


def _lmdb_app(path: Path) -> Path:
    """py-lmdb: 40 records in the unnamed database, 7 in a named database 'cache'."""
    env = lmdb.open(str(path), max_dbs=4)
    cache = env.open_db(b"cache")
    with env.begin(write=True) as txn:
        for i in range(40):
            txn.put(b"user%02d" % i, b"alias %d" % i)
        for i in range(7):
            txn.put(b"c%d" % i, b"v", db=cache)
    env.close()
    return path


MAIN_ONLY = (
    'engine = "lmdb"\nmetadata = "none"\n[kv]\nmode = "namespaces"\ntables = { users = "" }\n'
)


def test_the_summary_and_the_report_list_what_was_left_out_with_its_records(
    tmp_path: Path,
) -> None:
    src = _lmdb_app(tmp_path / "app.lmdb")
    layout = _layout(tmp_path / "l.toml", MAIN_ONLY)
    r = run(
        "convert", "--source-layout", layout, "--skip-foreign-tables", src, tmp_path / "o.sqlite"
    )
    assert r.exit_code == 0, r.output
    assert "converted 40 records in 1 tables" in r.stdout
    assert (
        "left out (not in the layout, --skip-foreign-tables): namespace 'cache' (7 records)"
        in r.stdout
    )
    r = run(
        "convert",
        "-q",
        "--json",
        "--source-layout",
        layout,
        "--skip-foreign-tables",
        src,
        tmp_path / "o2.sqlite",
    )
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["skipped"] == [{"what": "namespace 'cache'", "records": 7}]
    assert report["records"] == 40


def test_without_the_flag_the_foreign_part_is_refused_naming_it(tmp_path: Path) -> None:
    src = _lmdb_app(tmp_path / "app.lmdb")
    layout = _layout(tmp_path / "l.toml", MAIN_ONLY)
    out = tmp_path / "o.sqlite"
    r = run("convert", "--source-layout", layout, src, out)
    assert r.exit_code == 4, r.output
    assert "namespace 'cache'" in r.stderr.splitlines()[0]
    assert not out.exists() and not Path(str(out) + ".partial").exists()


def test_a_convert_that_would_copy_nothing_is_exit_4_unless_asked(tmp_path: Path) -> None:
    src = _lmdb_app(tmp_path / "app.lmdb")
    layout = _layout(
        tmp_path / "l.toml",
        'engine = "lmdb"\nmetadata = "none"\n[kv]\nmode = "namespaces"\ntables = { t = "nothere" }\n',
    )
    out = tmp_path / "o.sqlite"
    r = run("convert", "--source-layout", layout, "--skip-foreign-tables", src, out)
    assert r.exit_code == 4, r.output
    first = r.stderr.splitlines()[0]
    assert "nothing to convert" in first and "the main namespace (40 records)" in first
    assert "namespace 'cache' (7 records)" in first
    assert not out.exists() and not Path(str(out) + ".partial").exists()
    r = run(
        "convert", "--source-layout", layout, "--skip-foreign-tables", "--allow-empty", src, out
    )
    assert r.exit_code == 0, r.output
    assert "converted 0 records in 0 tables" in r.stdout


def test_rocksdb_column_families_outside_the_layout_are_listed(tmp_path: Path) -> None:
    src = tmp_path / "app.rocksdb"
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    db = rocksdict.Rdict(str(src), opts)
    db.create_column_family("other", opts)
    for i in range(5):
        db[b"k%d" % i] = b"v"
    db.get_column_family("other")[b"x"] = b"y"
    db.close()
    layout = _layout(
        tmp_path / "l.toml",
        'engine = "rocksdb"\nmetadata = "none"\n[kv]\nmode = "namespaces"\ntables = { data = "default" }\n',
    )
    r = run(
        "convert",
        "-q",
        "--json",
        "--source-layout",
        layout,
        "--skip-foreign-tables",
        src,
        tmp_path / "o.lmdb",
    )
    assert r.exit_code == 0, r.output
    report = json.loads(r.stdout)
    assert report["skipped"] == [{"what": "namespace 'other'", "records": 1}]
    assert [t["name"] for t in report["tables"]] == ["data"] and report["records"] == 5


def test_a_sql_files_foreign_tables_are_named_in_the_summary(tmp_path: Path) -> None:
    src = tmp_path / "app.sqlite"
    conn = apsw.Connection(str(src))
    conn.execute(
        "CREATE TABLE t (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL) WITHOUT ROWID;"
        "INSERT INTO t VALUES (x'01', x'02');"
        "CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT);"
        "INSERT INTO users (name) VALUES ('a'), ('b');"
    )
    conn.close()
    r = run("convert", "--skip-foreign-tables", src, tmp_path / "o.lmdb")
    assert r.exit_code == 0, r.output
    assert "left out (not in the layout, --skip-foreign-tables): table 'users'" in r.stdout
