"""SQLite files written by other programs, read by every SQL engine (sqlite, libsql, turso)
(issue 27: C5, C7 and the findings on SQLite).

The files are made with apsw (SQLite itself), never by statemigrate's writers, and the
expectations come from apsw and rocksdict reading them:

- SQLite's dynamic typing lets an app put a REAL, a TEXT or a NULL where the layout has
  BLOB keys and values and INTEGER versions: every verb (and an upgrade) refuses such a
  record with exit 4 and one line naming the table and the record's key; what the
  layout holds (negative versions included) is read exactly;
- a cleanly closed WAL-mode file on read-only media is read exactly, its bytes unchanged;
- tables ``a`` and ``A`` of a one-table layout stay two tables, whatever the name
  column's collation;
- a full disk says so.
"""

from __future__ import annotations

import hashlib
import shutil
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from statemigrate.errors import StoreBusyError
from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.cli import describe, one_line_error, run_cli
from statemigrate.testing.filesystems import small_filesystem
from statemigrate.testing.stores import build_store, read_store, spec, store_file, write_store

# The engines that read a SQLite file, by their declared capabilities.
SQL_ENGINES = [n for n in engine_names() if get_engine(n).capabilities.sql]
# Engines with an app's own one-table layout (the `layout` option).
LAYOUT_ENGINES = [
    n for n in SQL_ENGINES if any(s.name == "layout" for s in get_engine(n).options.specs())
]
VERBS = ["convert", "checksum", "verify"]
GOOD = [(b"k-a", b"1", 1), (b"k-c", b"3", -3)]

# (column, SQL literal put there, how the bad record's key shows in the line)
VERSION_CASES = {
    "version-real": ("version", "1.5", "k-bad"),
    "version-text": ("version", "'twelve'", "k-bad"),  # not a number: no affinity cast
    "version-blob": ("version", "x'01'", "k-bad"),
    "version-null": ("version", "NULL", "k-bad"),
    "version-beyond-i64": ("version", "18446744073709551615", "k-bad"),  # SQLite: a REAL
}
RECORD_CASES = {
    "key-text": ("key", "'k-bad'", "k-bad"),
    "key-integer": ("key", "777", "777"),
    "key-real": ("key", "7.5", "7.5"),
    "key-null": ("key", "NULL", "NULL"),
    "value-text": ("value", "'v'", "k-bad"),
    "value-integer": ("value", "5", "k-bad"),
    "value-real": ("value", "2.5", "k-bad"),
    "value-null": ("value", "NULL", "k-bad"),
}


def _default_layout(path: Path, column: str, literal: str, table: str = "s") -> None:
    """A versioned table in the default layout (a rowid table without NOT NULL, which the
    layout's readers accept), one record of which holds ``literal`` in ``column``."""
    con = apsw.Connection(str(path))
    con.execute(f'CREATE TABLE "{table}" (key BLOB PRIMARY KEY, value BLOB, version INTEGER)')
    con.executemany(f'INSERT INTO "{table}" VALUES (?, ?, ?)', GOOD)
    bad = {"key": "x'6b2d626164'", "value": "x'32'", "version": "2", column: literal}
    con.execute(f'INSERT INTO "{table}" VALUES ({bad["key"]}, {bad["value"]}, {bad["version"]})')
    con.close()


def _one_table_layout(
    tmp_path: Path, literal: str, column: str = "ver", engine: str = "sqlite"
) -> tuple[Path, Path]:
    """A one-table layout file (for ``engine``) and a store whose versioned table ``s``
    has one record holding ``literal`` in ``column``."""
    layout = tmp_path / "one.toml"
    layout.write_text(
        f'engine = "{engine}"\nversioned = ["s"]\n\n[sqlite]\nmode = "one-table"\n'
        'table = "kv"\nname_column = "tbl"\nkey = "k"\nvalue = "v"\nversion = "ver"\n'
    )
    path = tmp_path / "one.sqlite"
    con = apsw.Connection(str(path))
    con.execute("CREATE TABLE kv (tbl TEXT, k BLOB, v BLOB, ver INTEGER, PRIMARY KEY (tbl, k))")
    con.executemany("INSERT INTO kv VALUES ('s', ?, ?, ?)", GOOD)
    bad = {"k": "x'6b2d626164'", "v": "x'32'", "ver": "2", column: literal}
    con.execute(f"INSERT INTO kv VALUES ('s', {bad['k']}, {bad['v']}, {bad['ver']})")
    con.close()
    return path, layout


def _args(verb: str, engine: str, path: Path, tmp_path: Path, layout: Path | None) -> list[str]:
    src = f"{engine}:{path}"
    if verb == "convert":
        flags = ["--source-layout", str(layout)] if layout else []
        return ["convert", src, str(tmp_path / "out.jsonl"), *flags]
    if verb == "checksum":
        return ["checksum", src, *(["--layout", str(layout)] if layout else [])]
    other = write_store(get_engine("jsonl"), tmp_path / "other.jsonl", {})
    return ["verify", src, str(other), *(["--layout-a", str(layout)] if layout else [])]


def _assert_refused(run, table: str, shown: str, tmp_path: Path) -> None:
    assert run.returncode == 4, (run.returncode, run.stderr)
    errors = [line for line in run.lines() if line.startswith("statemigrate: error:")]
    assert len(errors) == 1, run.stderr
    assert f"table {table!r}" in errors[0] and shown in errors[0], errors[0]
    assert "internal error" not in run.stderr
    assert not (tmp_path / "out.jsonl").exists()


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("engine", SQL_ENGINES)
@pytest.mark.parametrize("case", ["version-real", "version-text"])
def test_a_version_that_is_not_an_integer_is_exit_4_naming_table_and_key(
    tmp_path, engine, verb, case
):
    column, literal, shown = VERSION_CASES[case]
    path = tmp_path / "bad.sqlite"
    _default_layout(path, column, literal)
    run = run_cli(_args(verb, engine, path, tmp_path, None))
    _assert_refused(run, "s", shown, tmp_path)


@pytest.mark.parametrize("engine", SQL_ENGINES)
@pytest.mark.parametrize("case", sorted({**VERSION_CASES, **RECORD_CASES}))
def test_every_value_outside_the_model_is_exit_4_naming_table_and_key(tmp_path, engine, case):
    column, literal, shown = {**VERSION_CASES, **RECORD_CASES}[case]
    path = tmp_path / "bad.sqlite"
    _default_layout(path, column, literal, table="odd table")
    run = run_cli(["checksum", f"{engine}:{path}"])
    _assert_refused(run, "odd table", shown, tmp_path)


@pytest.mark.parametrize("verb", VERBS)
@pytest.mark.parametrize("engine", LAYOUT_ENGINES)
@pytest.mark.parametrize("literal", ["1.5", "'twelve'", "x'01'"])
def test_a_one_table_layout_version_that_is_not_an_integer_is_exit_4(
    tmp_path, engine, verb, literal
):
    path, layout = _one_table_layout(tmp_path, literal, engine=engine)
    run = run_cli(_args(verb, engine, path, tmp_path, layout))
    _assert_refused(run, "s", "k-bad", tmp_path)


@pytest.mark.parametrize("engine", LAYOUT_ENGINES)
@pytest.mark.parametrize(
    ("column", "literal"),
    [("k", "'k-bad'"), ("k", "NULL"), ("v", "'v'"), ("v", "NULL"), ("v", "4")],
)
def test_a_one_table_layout_key_or_value_that_is_not_a_blob_is_exit_4(
    tmp_path, engine, column, literal
):
    path, layout = _one_table_layout(tmp_path, literal, column, engine=engine)
    run = run_cli(_args("checksum", engine, path, tmp_path, layout))
    _assert_refused(run, "s", "NULL" if column == "k" and literal == "NULL" else "k-bad", tmp_path)


@pytest.mark.parametrize("engine", SQL_ENGINES)
def test_negative_and_extreme_integer_versions_are_read_modulo_2_64(tmp_path, engine):
    path = tmp_path / "ok.sqlite"
    _default_layout(path, "version", str(-(2**63)))
    got = read_store(get_engine(engine), path)["tables"]["s"]
    # The expectation is SQLite's own answer, each signed INTEGER taken modulo 2^64.
    con = apsw.Connection(str(path))
    rows = con.execute("SELECT key, value, version FROM s ORDER BY key").fetchall()
    con.close()
    assert got == ("versioned", [(k, v, ver % 2**64) for k, v, ver in rows])


# C7: read-only media. A cleanly closed WAL-mode file has no -wal or -shm beside it;
# SQLite must create the -shm to read it unless it is opened `immutable=1`, which SQLite
# documents for read-only media (https://www.sqlite.org/wal.html, "Read-Only Databases").


def _wal_file(path: Path, open_app: bool = False) -> apsw.Connection | None:
    """A WAL-mode file in the default layout (a plain and a versioned table), written by
    apsw; closed cleanly (no -wal, no -shm left) unless ``open_app``: then the app's
    connection is returned with its last commit still only in the -wal."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = apsw.Connection(str(path))
    con.execute("PRAGMA journal_mode=WAL")
    con.execute("PRAGMA wal_autocheckpoint=0")
    con.execute("CREATE TABLE p (key BLOB PRIMARY KEY, value BLOB) WITHOUT ROWID")
    con.execute("CREATE TABLE v (key BLOB PRIMARY KEY, value BLOB, version INTEGER) WITHOUT ROWID")
    con.executemany(
        "INSERT INTO p VALUES (?, ?)", [(b"p%04d" % i, bytes([i % 256]) * i) for i in range(300)]
    )
    con.executemany(
        "INSERT INTO v VALUES (?, ?, ?)", [(b"v%03d" % i, b"x" * i, i - 50) for i in range(100)]
    )
    con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    if open_app:
        con.execute("INSERT INTO p VALUES (x'ff', x'01')")  # only in the -wal
        return con
    con.close()
    assert not Path(f"{path}-wal").exists() and not Path(f"{path}-shm").exists()
    return None


def _records(path: Path) -> dict[str, list[tuple]]:
    """Every table's rows as SQLite itself reads them, from a copy in a writable place."""
    copy = path.parent.parent / f"apsw-copy-{path.name}"
    shutil.copyfile(path, copy)
    wal = Path(f"{path}-wal")
    if wal.exists():
        shutil.copyfile(wal, Path(f"{copy}-wal"))
    con = apsw.Connection(str(copy))
    out = {t: con.execute(f"SELECT * FROM {t} ORDER BY key").fetchall() for t in ("p", "v")}
    con.close()
    return out


def _tree(directory: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(directory.iterdir())}


@pytest.fixture
def read_only_mount(tmp_path):
    """``mount(src)``: ``src`` bind-mounted read-only at a new directory (unmounted after)."""
    mounted: list[Path] = []

    def mount(src: Path) -> Path:
        target = tmp_path / "ro"
        target.mkdir()
        subprocess.run(["mount", "--bind", str(src), str(target)], check=True)
        mounted.append(target)
        subprocess.run(["mount", "-o", "remount,ro,bind", str(target)], check=True)
        return target

    yield mount
    for target in mounted:
        subprocess.run(["umount", str(target)], check=True)


def _unwritable_dir(directory: Path) -> Path:
    """``directory`` made unwritable; the CLI then runs without root's DAC override."""
    directory.chmod(0o555)
    return directory


MEDIA = ["read-only mount", "unwritable directory"]


def _media(kind: str, tmp_path: Path, mount) -> tuple[Path, bool]:
    if kind == "read-only mount":
        return mount(tmp_path / "media"), False
    return _unwritable_dir(tmp_path / "media"), True


@pytest.mark.parametrize("kind", MEDIA)
@pytest.mark.parametrize("engine", SQL_ENGINES)
def test_a_cleanly_closed_wal_file_on_read_only_media_is_read_exactly(
    tmp_path, engine, kind, read_only_mount
):
    _wal_file(tmp_path / "media" / "w.sqlite")
    media, honour = _media(kind, tmp_path, read_only_mount)
    store = media / "w.sqlite"
    before = _tree(media)
    expected = _records(store)
    out = tmp_path / "out" / "o.sqlite"
    out.parent.mkdir()
    for args in (
        ["checksum", f"{engine}:{store}"],
        ["convert", f"{engine}:{store}", f"sqlite:{out}"],
    ):
        run = run_cli(args, honour_permissions=honour)
        assert run.returncode == 0, (args, run.stderr)
    assert _records(out) == expected
    assert _tree(media) == before  # the same bytes, nothing created beside them


@pytest.mark.parametrize("kind", MEDIA)
@pytest.mark.parametrize("engine", SQL_ENGINES)
def test_a_wal_file_with_commits_in_its_wal_on_read_only_media(
    tmp_path, engine, kind, read_only_mount
):
    """The -wal's commits need a -shm to be read in place: an engine reading in place
    refuses (exit 4, the reason in one line); one reading a private copy reads them."""
    live = tmp_path / "live" / "w.sqlite"
    app = _wal_file(live, open_app=True)
    (tmp_path / "media").mkdir()
    for suffix in ("", "-wal"):  # a snapshot of the file and its WAL, without the -shm
        shutil.copyfile(f"{live}{suffix}", tmp_path / "media" / f"w.sqlite{suffix}")
    app.close()
    media, honour = _media(kind, tmp_path, read_only_mount)
    store = media / "w.sqlite"
    before = _tree(media)
    expected = _records(store)
    assert (b"\xff", b"\x01") in expected["p"]
    out = tmp_path / "out" / "o.sqlite"
    out.parent.mkdir()
    run = run_cli(["convert", f"{engine}:{store}", f"sqlite:{out}"], honour_permissions=honour)
    if get_engine(engine).capabilities.read_only_open:
        assert run.returncode == 4, run.stderr
        errors = [line for line in run.lines() if line.startswith("statemigrate: error:")]
        assert len(errors) == 1 and "w.sqlite-wal" in errors[0] and "-shm" in errors[0], run.stderr
        assert not out.exists()
    else:
        assert run.returncode == 0, run.stderr
        assert _records(out) == expected
    assert _tree(media) == before


@pytest.mark.parametrize(
    "engine", [n for n in SQL_ENGINES if get_engine(n).capabilities.read_only_open]
)
def test_a_file_written_meanwhile_through_another_mount_is_refused_not_read_torn(
    tmp_path, engine, read_only_mount
):
    """An immutable read takes no lock: a writer through a writable path to the same file
    (here the bind mount's source) is caught by the file's changed state (exit 3)."""
    _wal_file(tmp_path / "media" / "w.sqlite")
    expected = _records(tmp_path / "media" / "w.sqlite")
    store = read_only_mount(tmp_path / "media") / "w.sqlite"
    with get_engine(engine).open_reader(store) as reader:
        p, v = reader.tables()
        first = [r for b in reader.read_batches(p) for r in b]
        app = apsw.Connection(str(tmp_path / "media" / "w.sqlite"))
        app.execute("INSERT INTO v VALUES (x'00', x'00', 1)")
        app.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        app.close()
        with pytest.raises(StoreBusyError, match="written while it was read"):
            list(reader.read_batches(v))
    assert first == expected["p"]


# Table names differing only in case in a one-table layout: names are data there, compared
# as bytes (a name column declared COLLATE NOCASE would make `a` and `A` one table).
ONE_TABLE_PLAIN = (
    'engine = "sqlite"\nversioned = []\n\n[sqlite]\nmode = "one-table"\n'
    'table = "kv"\nname_column = "tbl"\nkey = "k"\nvalue = "v"\n'
)
CASE_ROWS = [("a", b"1", b"x"), ("A", b"2", b"y"), ("a", b"3", b"z"), ("A", b"3", b"w")]


def _by_table(path: Path) -> dict[str, list[tuple[bytes, bytes]]]:
    """The one-table layout's rows grouped by name as bytes, read by apsw."""
    con = apsw.Connection(
        f"file:{path}?mode=ro", flags=apsw.SQLITE_OPEN_READONLY | apsw.SQLITE_OPEN_URI
    )
    out: dict[str, list[tuple[bytes, bytes]]] = {}
    for name, k, v in con.execute("SELECT tbl, k, v FROM kv ORDER BY tbl COLLATE BINARY, k"):
        out.setdefault(name, []).append((k, v))
    con.close()
    return out


def _rocksdb_tables(path: Path) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every column family but RocksDB's and statemigrate's own, read by rocksdict."""
    import rocksdict

    opts = rocksdict.Options(raw_mode=True)
    names = rocksdict.Rdict.list_cf(str(path), opts)
    db = rocksdict.Rdict(
        str(path),
        opts,
        column_families={n: opts for n in names if n != "default"},
        access_type=rocksdict.AccessType.read_only(),
    )
    out = {}
    for name in names:
        if name not in ("default", "__statemigrate__"):
            cf = db.get_column_family(name)
            out[name] = list(cf.items())
            del cf
    db.close()
    return out


@pytest.mark.parametrize("collation", ["BINARY", "NOCASE"])
def test_tables_differing_in_case_in_a_one_table_layout_stay_two_tables(tmp_path, collation):
    layout = tmp_path / "one.toml"
    layout.write_text(ONE_TABLE_PLAIN)
    src = tmp_path / "src.sqlite"
    con = apsw.Connection(str(src))
    con.execute(
        f"CREATE TABLE kv (tbl TEXT NOT NULL COLLATE {collation}, k BLOB NOT NULL, "
        "v BLOB NOT NULL, PRIMARY KEY (tbl, k))"
    )
    rows = CASE_ROWS if collation == "BINARY" else CASE_ROWS[:3]  # NOCASE: ('A', 3) is ('a', 3)
    con.executemany("INSERT INTO kv VALUES (?, ?, ?)", rows)
    con.close()
    expected = _by_table(src)
    assert sorted(expected) == ["A", "a"]
    mid, back = tmp_path / "mid.rocksdb", tmp_path / "back.sqlite"
    run = run_cli(["convert", f"sqlite:{src}", f"rocksdb:{mid}", "--source-layout", str(layout)])
    assert run.returncode == 0, run.stderr
    assert _rocksdb_tables(mid) == expected
    run = run_cli(["convert", f"rocksdb:{mid}", f"sqlite:{back}", "--dest-layout", str(layout)])
    assert run.returncode == 0, run.stderr
    assert _by_table(back) == expected


def test_a_table_a_nocase_name_column_would_merge_is_refused_in_place(tmp_path):
    layout = tmp_path / "one.toml"
    layout.write_text(ONE_TABLE_PLAIN)
    path = tmp_path / "app.sqlite"
    con = apsw.Connection(str(path))
    con.execute(
        "CREATE TABLE kv (tbl TEXT NOT NULL COLLATE NOCASE, k BLOB NOT NULL, "
        "v BLOB NOT NULL, PRIMARY KEY (tbl, k))"
    )
    con.execute("INSERT INTO kv VALUES ('a', x'01', x'02')")
    con.close()
    from statemigrate.errors import DestinationError
    from statemigrate.model import TableInfo

    with get_engine("sqlite").open_writer(path, {"layout": str(layout)}) as writer:
        with pytest.raises(
            DestinationError, match="'tbl' is COLLATE NOCASE: tables 'a' and 'A' would merge"
        ):
            writer.create_table(TableInfo("A"))
        writer.create_table(TableInfo("b"))  # another name is no trouble
    assert _by_table(path) == {"a": [(b"\x01", b"\x02")]}


@pytest.fixture(scope="module")
def disk_source(tmp_path_factory):
    """A SQLite store larger than the small file system (as test_safety_disk's source)."""
    path = store_file("sqlite", tmp_path_factory.mktemp("full-source"), "source")
    build_store("sqlite", path, 120_000, seed=11)
    return path


@pytest.mark.parametrize("engine", SQL_ENGINES)
def test_a_full_disk_says_disk_full(engine, disk_source):
    """SQLite's own text for SQLITE_FULL, never SQLITE_OK's "not an error" (the same-engine
    copy's backup API reports its error on the backup, not the connection)."""
    with small_filesystem("2m") as fs:
        final = store_file(engine, fs, "out")
        run = run_cli(
            ["convert", "--quiet", "--force", spec("sqlite", disk_source), spec(engine, final)],
            timeout=120,
        )
        assert run.returncode == 5, describe(run)
        line = one_line_error(run)
        assert "disk full" in line and "not an error" not in line, line


@pytest.mark.parametrize("engine", SQL_ENGINES)
def test_an_upgrade_reading_a_record_outside_the_model_is_exit_4_and_changes_nothing(
    tmp_path, engine
):
    """An in-place upgrade reads through its writer: the same refusal, the store as it was."""
    from statemigrate.testing.example_schema.seed import HERE, seed

    path = tmp_path / "app.sqlite"
    seed(f"sqlite:{path}", 200)
    con = apsw.Connection(str(path))
    (key,) = con.execute("SELECT key FROM events ORDER BY key LIMIT 1 OFFSET 50").fetchall()[0]
    con.execute("UPDATE events SET value = 1.5 WHERE key = ?", (key,))
    con.close()
    before = _dump(path)
    run = run_cli(["upgrade", "--quiet", f"{engine}:{path}", "--schema", str(HERE), "--to", "0002"])
    assert run.returncode == 4, run.stderr
    line = one_line_error(run)
    assert "table 'events'" in line and repr(key) in line, line
    assert _dump(path) == before  # every table's rows, and the stamp, as they were


def _dump(path: Path) -> dict[str, list[tuple]]:
    """Every SQL table's rows, read by apsw."""
    con = apsw.Connection(str(path))
    names = [r[0] for r in con.execute("SELECT name FROM sqlite_schema WHERE type = 'table'")]
    out = {n: con.execute(f'SELECT * FROM "{n}" ORDER BY 1').fetchall() for n in names}
    con.close()
    return out


def test_reading_a_sqlite_files_header_keeps_this_processs_locks_on_it(tmp_path: Path) -> None:
    """A reader's SHARED lock is what keeps an app's commit out of a rollback-mode read.
    Every look at the file's header (a second reader's WAL check, detection, inspect)
    goes through SQLite's VFS: a plain open() and close() dropped the lock (POSIX locks
    go with any descriptor's close), and an app then committed under the read."""
    import apsw

    from statemigrate.engines._sql import file_head, is_sqlite_file, read_only_open
    from statemigrate.registry import get_engine as engine_of

    src = tmp_path / "app.sqlite"
    conn = apsw.Connection(str(src))
    conn.execute(
        "CREATE TABLE t (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL) WITHOUT ROWID"
    )
    conn.execute("INSERT INTO t VALUES (x'01', x'02')")
    conn.close()
    reader = engine_of("sqlite").open_reader(src)
    try:
        assert file_head(src, 16) == b"SQLite format 3\x00"
        assert is_sqlite_file(src)
        read_only_open(src)
        # The app is another process: in this one SQLite shares its lock state between
        # connections, whatever the POSIX locks say.
        app = (
            "import apsw, sys\n"
            "c = apsw.Connection(sys.argv[1]); c.set_busy_timeout(100)\n"
            "try:\n"
            "    c.execute(\"INSERT INTO t VALUES (x'03', x'04')\")\n"
            "except apsw.BusyError:\n"
            "    sys.exit(3)\n"
        )
        run = subprocess.run([sys.executable, "-c", app, str(src)], timeout=60, check=False)
        assert run.returncode == 3, "the app committed while the file was being read"
    finally:
        reader.close()
