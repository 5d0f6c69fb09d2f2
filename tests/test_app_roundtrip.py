"""The app's own store, both ways (issue 28): real software writes it, reads it back.

Each test: the software (tests/apps.py) writes a store in its own shape; ``statemigrate
convert`` (the CLI, in a subprocess) moves it to another engine (one SQL, one key-value)
and back into the software's engine in the software's layout; the software then reads
every record and must answer exactly what it answered from the original. The store
written back must also have the app's shape and nothing else: the same SQL schema rows
and header pragmas, column families, LMDB databases with their flags, and files.

A missing tool is a failure, not a skip: ``make test`` installs them (``make
system-deps`` for the Debian packages, the test extra for the Python ones).
"""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parent))
import apps  # tests/ is not a package: its folder is on sys.path

# The intermediate engines: one SQL, one (or two) key-value, each in statemigrate's
# default layout.
VIA_SQL = "sqlite"
SUFFIX = {"sqlite": "mid.sqlite", "lmdb": "mid.lmdb", "rocksdb": "mid.rocksdb"}


def require(app: Any) -> None:
    reason = app.available()
    if reason is not None:
        pytest.fail(f"{app.name}: {reason}", pytrace=False)


def statemigrate(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statemigrate", *args],
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard, not a timing assertion
        check=False,
    )


def convert(
    src: Path,
    dst: Path,
    *,
    source_engine: str,
    dest_engine: str,
    source_layout: Path | None = None,
    dest_layout: Path | None = None,
) -> None:
    args = ["convert", "--from", source_engine, "--to", dest_engine]
    if source_layout is not None:
        args += ["--source-layout", str(source_layout)]
    if dest_layout is not None:
        args += ["--dest-layout", str(dest_layout)]
    res = statemigrate(*args, str(src), str(dst))
    assert res.returncode == 0, (
        f"statemigrate {' '.join(args)} {src.name} {dst.name}: exit {res.returncode}\n"
        f"{res.stderr[-3000:]}"
    )


def there_and_back(
    app: Any, store: Path, via: str, tmp_path: Path, layout_text: str | None = None
) -> Path:
    """Converts the app's store to ``via`` and back; the path of the store written back.

    The app's side is read and written in ``layout_text`` (default: the app's layout).
    """
    layout_text = app.layout if layout_text is None else layout_text
    layout = None
    if layout_text is not None:
        layout = tmp_path / "app-layout.toml"
        layout.write_text(layout_text)
    mid = tmp_path / SUFFIX[via]
    convert(store, mid, source_engine=app.engine, dest_engine=via, source_layout=layout)
    back = tmp_path / "back" / store.name
    back.parent.mkdir()
    convert(mid, back, source_engine=via, dest_engine=app.engine, dest_layout=layout)
    return back


def made_by(app: Any, tmp_path: Path) -> tuple[Path, Any, Any]:
    """The app's store, its shape (taken before any read), and what the app reads."""
    require(app)
    (tmp_path / "app").mkdir()
    store = tmp_path / "app" / app.store_name
    app.write(store, app.records())
    shape = app.shape(store)
    # The software reads a copy: its own reads may add files beside its store (a
    # WAL-mode SQLite file's -wal/-shm, RocksDB's LOG.old), and the original must stay
    # as it made it, to show that statemigrate's reads change nothing.
    oracle = tmp_path / "app-oracle"
    shutil.copytree(tmp_path / "app", oracle, symlinks=True)
    answers = app.read(oracle / app.store_name)
    return store, shape, answers


def assert_same_answers(before: Any, after: Any) -> None:
    """Equality of what the software answered, with a short message where it differs."""
    if before == after:
        return
    if isinstance(before, dict) and isinstance(after, dict):
        for name in sorted(set(before) | set(after), key=str):
            b, a = before.get(name), after.get(name)
            if b != a:
                size = (
                    len(b) if hasattr(b, "__len__") else b,
                    len(a) if hasattr(a, "__len__") else a,
                )
                pytest.fail(
                    f"{name!r}: the software answers differently (sizes before/after {size})"
                )
    pytest.fail("the software answers differently")


def round_trip(app: Any, via: str, tmp_path: Path, *, layout_init: bool = False) -> None:
    """The software's store there and back; it must answer as before, in the same shape.

    With ``layout_init``, the app's side is read and written in the layout that
    ``statemigrate layout init`` prints for the app's store, unedited.
    """
    store, shape, answers = made_by(app, tmp_path)
    layout_text = None
    if layout_init:
        res = statemigrate("layout", "init", app.engine, str(store))
        assert res.returncode == 0, (res.returncode, res.stderr[-2000:])
        layout_text = res.stdout
        assert app.shape(store) == shape  # layout init only looks
    back = there_and_back(app, store, via, tmp_path, layout_text=layout_text)
    back_shape = app.shape(back)  # before the app's reads, which may add files (LOG.old)
    assert_same_answers(answers, app.read(back))
    assert back_shape == shape
    # The source is opened read-only and left as the app made it: no file added beside it
    # (a read-only open of a WAL-mode SQLite file, as dbm.sqlite3 makes, leaves -wal/-shm).
    assert app.shape(store) == shape, "the app's own store was changed by reading it"


def xfail(reason: str) -> pytest.MarkDecorator:
    return pytest.mark.xfail(strict=True, reason=f"issue 28: {reason}")


@pytest.mark.parametrize("via", [VIA_SQL, "lmdb"])
def test_sqlitedict(via, tmp_path):
    """sqlitedict's items() and keys() in rowid order, two dicts, schema and pragmas."""
    round_trip(apps.SqliteDictApp, via, tmp_path)


@pytest.mark.parametrize("via", [VIA_SQL, "rocksdb"])
def test_dbm_sqlite3(via, tmp_path):
    """dbm.sqlite3's keys(), each lookup and len; its Dict table exactly as it made it."""
    round_trip(apps.DbmSqlite3App, via, tmp_path)


@pytest.mark.parametrize("via", [VIA_SQL, "rocksdb"])
def test_postmap_lmdb_map(via, tmp_path):
    """postmap -s and -q answer as before; one .lmdb file, no lock file, no named database."""
    round_trip(apps.PostmapApp, via, tmp_path)


@pytest.mark.parametrize("via", [VIA_SQL, "lmdb"])
def test_ldb_default_column_family(via, tmp_path):
    """ldb scan and DB::Open (default column family only) read every record as before."""
    round_trip(apps.LdbApp, via, tmp_path)


@pytest.mark.parametrize("via", [VIA_SQL, "rocksdb"])
def test_pylmdb_dupsort_with_duplicates(via, tmp_path):
    round_trip(apps.PyLmdbApp("dupsort"), via, tmp_path)


@pytest.mark.parametrize("via", [VIA_SQL, "rocksdb"])
def test_pylmdb_dupsort_unique_keys(via, tmp_path):
    round_trip(apps.PyLmdbApp("dupsort-unique"), via, tmp_path)


@pytest.mark.parametrize("via", [VIA_SQL, "rocksdb"])
def test_pylmdb_integerkey(via, tmp_path):
    round_trip(apps.PyLmdbApp("integerkey"), via, tmp_path)


@pytest.mark.parametrize("via", [VIA_SQL, "lmdb"])
def test_rocksdict_column_families_records(via, tmp_path):
    """rocksdict (raw mode) reads every family's items as before (in statemigrate's default
    layout, whose __statemigrate__ family rocksdict opens like any other)."""
    app = apps.RocksdictApp
    store, shape, answers = made_by(app, tmp_path)
    back = there_and_back(app, store, via, tmp_path)
    assert_same_answers(answers, app.read(back))
    assert app.shape(store) == shape, "the app's own store was changed by reading it"


def test_rocksdict_column_families_shape(tmp_path):
    """In a layout without in-store metadata, the store written back has rocksdict's five
    families and its own side file only (no __statemigrate__ family)."""
    app = apps.RocksdictApp
    store, shape, _ = made_by(app, tmp_path)
    back = there_and_back(app, store, VIA_SQL, tmp_path, layout_text=app.exact_layout)
    assert app.shape(back) == shape


def test_rocksdict_default_mode_is_refused_for_its_comparator(tmp_path):
    """rocksdict's default mode orders keys with its own comparator ("rocksdict"): the
    store cannot be read in byte order, and the refusal names the comparator, not damage."""
    require(apps.RocksdictApp)
    store = tmp_path / "objects.rocksdb"
    apps.RocksdictApp.default_mode_store(store)
    res = statemigrate(
        "convert", "--from", "rocksdb", "--to", "sqlite", str(store), str(tmp_path / "o.sqlite")
    )
    assert res.returncode != 0
    assert "comparator" in res.stderr and "rocksdict" in res.stderr, res.stderr
    assert "damaged" not in res.stderr, res.stderr
    assert not (tmp_path / "o.sqlite").exists()


# `verify` on stores that lost a flag or a type: both stores are made by the software
# itself (py-lmdb, SQLite), so the difference is known without statemigrate.


def test_verify_tells_a_lost_dupsort_flag(tmp_path):
    app = apps.PyLmdbApp("dupsort-unique")
    require(app)
    records = app.records()
    with_flag, without = tmp_path / "dupsort.lmdb", tmp_path / "plain.lmdb"
    app.write(with_flag, records)
    plain = apps.PyLmdbApp("dupsort-unique")
    plain.flags = {}  # the same records, the database opened without dupsort=True
    plain.write(without, records)
    assert app.shape(with_flag)["databases"]["threads"]["md_flags"] == 4
    assert app.shape(without)["databases"]["threads"]["md_flags"] == 0
    res = statemigrate("verify", str(with_flag), str(without))
    assert res.returncode == 1, (res.returncode, res.stdout[-1500:], res.stderr[-1500:])


def test_verify_tells_a_lost_value_storage_class(tmp_path):
    """dbm.sqlite3 answers bytes for a BLOB value and str for a TEXT one: a copy whose
    values became TEXT breaks the app, and verify never says equal. In the app's layout
    (one storage class per value column, BLOB) the TEXT value is outside the layout:
    exit 4, naming the key and the codec; with value_codec = "any" (each value's class
    carried in its bytes) it is a difference: exit 1."""
    app = apps.DbmSqlite3App
    require(app)
    store = tmp_path / "a" / app.store_name
    store.parent.mkdir()
    app.write(store, app.records())
    copy = tmp_path / "b" / app.store_name
    copy.parent.mkdir()
    copy.write_bytes(store.read_bytes())
    with apps.sqlite3.connect(copy) as db:
        changed = db.execute(
            "UPDATE Dict SET value = CAST(value AS TEXT) WHERE key = CAST(? AS BLOB)",
            ("user:1:名前",),
        ).rowcount
    assert changed == 1
    before, after = app.read(store), app.read(copy)
    assert before["items"]["user:1:名前".encode()] == "Jürgen 1 ✓".encode()
    assert after["items"]["user:1:名前".encode()] == "Jürgen 1 ✓"  # the app now gets a str
    layout = tmp_path / "dbm.toml"
    layout.write_text(app.layout)
    res = statemigrate(
        "verify", "--layout-a", str(layout), "--layout-b", str(layout), str(store), str(copy)
    )
    assert res.returncode == 4, (res.returncode, res.stdout[-1500:], res.stderr[-1500:])
    assert "TEXT" in res.stderr and "value_codec" in res.stderr, res.stderr
    assert "equal" not in res.stdout
    mixed = tmp_path / "dbm-any.toml"
    mixed.write_text(app.layout.replace("rowid = true", 'rowid = true\nvalue_codec = "any"'))
    res = statemigrate(
        "verify", "--layout-a", str(mixed), "--layout-b", str(mixed), str(store), str(copy)
    )
    assert res.returncode == 1, (res.returncode, res.stdout[-1500:], res.stderr[-1500:])


# `statemigrate layout init ENGINE STORE` on each software's store prints a layout that
# works as is: the same round trip (through SQLite) in the printed layout.
LAYOUT_INIT_MISSING: dict[str, str] = {}
LAYOUT_INIT_APPS = [
    apps.SqliteDictApp,
    apps.DbmSqlite3App,
    apps.PostmapApp,
    apps.LdbApp,
    apps.PyLmdbApp("dupsort"),
    apps.PyLmdbApp("dupsort-unique"),
    apps.PyLmdbApp("integerkey"),
    apps.RocksdictApp,
]


@pytest.mark.parametrize(
    "app",
    [
        pytest.param(app, id=app.name, marks=[xfail(LAYOUT_INIT_MISSING[app.name])])
        if app.name in LAYOUT_INIT_MISSING
        else pytest.param(app, id=app.name)
        for app in LAYOUT_INIT_APPS
    ],
)
def test_layout_init_works_as_is(app, tmp_path):
    round_trip(app, VIA_SQL, tmp_path, layout_init=True)
