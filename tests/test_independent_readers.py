"""Converted stores read exactly by the engines' own drivers, with none of our code."""

from __future__ import annotations

from pathlib import Path

import apsw
import rocksdict

from statemigrate import convert

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def _apsw_content(path: Path) -> dict:
    con = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    out = {}
    tables = [r[0] for r in con.execute("SELECT name FROM sqlite_schema WHERE type='table'")]
    for name in tables:
        if name in ("__statemigrate__", "alembic_version"):
            continue
        cols = [r[1] for r in con.execute(f'PRAGMA table_info("{name}")')]
        if "version" in cols:
            rows = [
                (k, v, ver % 2**64)
                for k, v, ver in con.execute(
                    f'SELECT key, value, version FROM "{name}" ORDER BY key'
                )
            ]
        else:
            rows = list(con.execute(f'SELECT key, value FROM "{name}" ORDER BY key'))
        out[name] = rows
    con.close()
    return out


def _rocksdict_content(path: Path, versioned: set[str]) -> dict:
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
        if name in ("default", "__statemigrate__"):
            continue
        cf = db.get_column_family(name)
        rows = list(cf.items())
        if name in versioned:
            rows = [(k, v[8:], int.from_bytes(v[:8], "big")) for k, v in rows]
        out[name] = rows
        del cf
    db.close()
    return out


def test_sqlite_to_rocksdb_and_back_read_by_the_drivers_themselves(tmp_path):
    src = FIXTURES / "sqlite" / "app.sqlite"
    want = _apsw_content(src)
    assert sum(len(v) for v in want.values()) == 2208
    convert(str(src), str(tmp_path / "a.rocksdb"))
    assert _rocksdict_content(tmp_path / "a.rocksdb", {"settings"}) == want
    convert(str(tmp_path / "a.rocksdb"), str(tmp_path / "b.sqlite"))
    assert _apsw_content(tmp_path / "b.sqlite") == want
    assert (tmp_path / "b.sqlite").read_bytes()[:16] == b"SQLite format 3\x00"
