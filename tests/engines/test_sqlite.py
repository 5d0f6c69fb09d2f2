"""SQLite quirks: the sqlite3 shell reads our files, foreign tables, signed versions, WAL sources."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import apsw
import pytest

from statemigrate import convert, verify
from statemigrate.engines.sqlite import SqliteEngine
from statemigrate.errors import SourceError
from statemigrate.model import MAX_VERSION, TableInfo, TableKind
from statemigrate.testing.stores import read_store, write_store

FIXTURES = Path(__file__).resolve().parents[2] / "fixtures"


def _shell(db: Path, sql: str) -> str:
    exe = shutil.which("sqlite3")
    assert exe, "the sqlite3 shell is needed (apt-get install sqlite3; `make test` installs it)"
    return subprocess.run([exe, str(db), sql], capture_output=True, text=True, check=True).stdout


def test_sqlite3_shell_reads_a_converted_store(tmp_path):
    out = tmp_path / "app.sqlite"
    convert(str(FIXTURES / "rocksdb" / "app.rocksdb"), str(out))
    assert _shell(out, "PRAGMA integrity_check;").strip() == "ok"
    assert _shell(out, "PRAGMA journal_mode;").strip() == "delete"
    assert not Path(str(out) + "-wal").exists()
    count = _shell(out, "SELECT count(*) FROM events;").strip()
    assert count == "2000"
    first = _shell(out, "SELECT hex(key) FROM events ORDER BY key LIMIT 1;").strip()
    assert first == (b"folder-000/" + bytes(8)).hex().upper()
    # The app can switch the file to WAL and keep using it.
    assert _shell(out, "PRAGMA journal_mode=WAL; SELECT count(*) FROM settings;").split() == [
        "wal",
        "200",
    ]


def test_versions_above_2_63_are_stored_signed(tmp_path):
    path = write_store(
        SqliteEngine,
        tmp_path / "v.sqlite",
        {TableInfo("s", TableKind.VERSIONED): [(b"a", b"", MAX_VERSION), (b"b", b"", 2**63)]},
    )
    assert _shell(path, "SELECT version FROM s ORDER BY key;").split() == [
        "-1",
        "-9223372036854775808",
    ]
    assert read_store(SqliteEngine, path)["tables"]["s"][1] == [
        (b"a", b"", MAX_VERSION),
        (b"b", b"", 2**63),
    ]


def test_alembic_version_mirrors_the_stamp(tmp_path):
    path = write_store(
        SqliteEngine, tmp_path / "r.sqlite", {}, metadata={"revision": b'["ae1027a6acf"]'}
    )
    assert _shell(path, "SELECT version_num FROM alembic_version;").strip() == "ae1027a6acf"


def test_foreign_tables_are_refused_by_name_or_skipped(tmp_path):
    path = write_store(SqliteEngine, tmp_path / "f.sqlite", {TableInfo("ok"): [(b"k", b"v")]})
    con = apsw.Connection(str(path))
    con.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT)")
    con.close()
    with pytest.raises(SourceError, match="'users'"):
        SqliteEngine.open_reader(path)
    got = read_store(SqliteEngine, path, {"skip_foreign_tables": True})
    assert list(got["tables"]) == ["ok"]
    report = convert(
        str(path), str(tmp_path / "o.jsonl"), source_options={"skip_foreign_tables": True}
    )
    assert [t.name for t in report.tables] == ["ok"]


def test_a_wal_source_is_read_at_one_snapshot_while_the_app_writes(tmp_path):
    path = write_store(
        SqliteEngine,
        tmp_path / "w.sqlite",
        {TableInfo("t"): [(b"%05d" % i, b"v") for i in range(100)]},
    )
    app = apsw.Connection(str(path))
    app.execute("PRAGMA journal_mode=WAL")
    app.execute("INSERT INTO t VALUES (x'00', x'01')")  # committed before the reader opens
    assert SqliteEngine.format_info(path)["journal"] == "WAL"
    with SqliteEngine.open_reader(path) as reader:
        (t,) = reader.tables()
        first = next(reader.read_batches(t, max_records=10))
        app.execute("INSERT INTO t VALUES (x'ff', x'02')")  # the app keeps writing
        rest = [r for b in reader.read_batches(t, first[-1][0]) for r in b]
    keys = [r[0] for r in first + rest]
    assert b"\x00" in keys and b"\xff" not in keys and len(keys) == 101
    app.close()


def test_text_keys_written_by_another_program_are_refused(tmp_path):
    path = write_store(SqliteEngine, tmp_path / "t.sqlite", {TableInfo("t"): [(b"b", b"v")]})
    con = apsw.Connection(str(path))
    con.execute("INSERT INTO t VALUES ('a-text-key', x'00')")
    con.close()
    from statemigrate.errors import StateMigrateError

    with pytest.raises(StateMigrateError, match="outside the model"):
        convert(str(path), str(tmp_path / "o.jsonl"))
    assert not (tmp_path / "o.jsonl").exists()


def test_fixture_equals_the_other_engines_fixtures():
    assert verify(
        str(FIXTURES / "sqlite" / "app.sqlite"), str(FIXTURES / "rocksdb" / "app.rocksdb")
    ).equal
    assert verify(
        str(FIXTURES / "sqlite" / "app.sqlite"), str(FIXTURES / "jsonl" / "app.jsonl")
    ).equal


def _digest_by_hand(path: Path) -> str:
    """DESIGN.md's store digest computed with apsw and plain xxhash, no statemigrate code."""
    import struct

    import xxhash

    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    parts = []
    for (name,) in conn.execute("SELECT name FROM sqlite_schema WHERE type = 'table'").fetchall():
        if name in ("__statemigrate__", "alembic_version") or name.startswith("sqlite_"):
            continue
        quoted = '"' + name.replace('"', '""') + '"'
        versioned = "version" in [r[1] for r in conn.execute(f"PRAGMA table_info({quoted})")]
        columns = "key, value, version" if versioned else "key, value"
        total = count = 0
        for row in conn.execute(f"SELECT {columns} FROM {quoted}"):
            key, value = bytes(row[0]), bytes(row[1])
            data = struct.pack("<Q", len(key)) + key + struct.pack("<Q", len(value)) + value
            if versioned:
                data += struct.pack("<Q", row[2] % 2**64)  # SQLite's INTEGER is signed
            total += xxhash.xxh3_128_intdigest(data)
            count += 1
        parts.append((name.encode(), versioned, count, total % 2**128))
    conn.close()
    h = xxhash.xxh3_128()
    for raw, versioned, count, total in sorted(parts):
        h.update(struct.pack("<Q", len(raw)) + raw + bytes([versioned]))
        h.update(struct.pack("<Q", count) + total.to_bytes(16, "little"))
    return h.hexdigest()


def test_the_example_digests_are_the_contracts(tmp_path):
    """testing.example.EXPECTED (what every engine must reach at each revision of the
    example schema) equals the digest computed by hand from the records SQLite holds."""
    from statemigrate.api import upgrade
    from statemigrate.testing.upgrade_conformance import EXAMPLE, EXPECTED, seeded

    spec = seeded(SqliteEngine, tmp_path)
    path = Path(spec.split(":", 1)[1])
    got = {"0001": _digest_by_hand(path)}
    for rev in ("0002", "0003", "0004", "0005"):
        upgrade(spec, EXAMPLE, to=rev, digests=False)
        got[rev] = _digest_by_hand(path)
    assert got == EXPECTED
