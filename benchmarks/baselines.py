"""The ceilings: each engine's own fastest bulk load and full scan, through its driver.

These do the same work the tool does (every table, every record) with nothing of the
tool in between: no batching, digests, checkpoints or verification.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from pathlib import Path

Tables = dict[str, tuple[bool, list]]  # unused alias kept for readers of the signatures


# --- SQLite (apsw) -------------------------------------------------------------------


def sqlite_tables(path: Path) -> list[tuple[str, bool]]:
    import apsw

    con = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    out = []
    for (name,) in con.execute(
        "SELECT name FROM sqlite_schema WHERE type='table' AND name NOT IN "
        "('__statemigrate__','alembic_version')"
    ):
        cols = [r[1] for r in con.execute(f'PRAGMA table_info("{name}")')]
        out.append((name, "version" in cols))
    con.close()
    return out


def sqlite_scan(path: Path) -> Iterator[tuple[str, bool, Iterator]]:
    """Yield (table, versioned, rows) for a full ordered scan of every table."""
    import apsw

    con = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    for name, versioned in sqlite_tables(path):
        cols = "key, value, version" if versioned else "key, value"
        yield name, versioned, con.execute(f'SELECT {cols} FROM "{name}" ORDER BY key')
    con.close()


def sqlite_scan_count(path: Path) -> int:
    n = 0
    for _name, _v, rows in sqlite_scan(path):
        for _ in rows:
            n += 1
    return n


def sqlite_load(path: Path, source: Iterator[tuple[str, bool, Iterator]]) -> int:
    """executemany per table in one transaction, journal off: SQLite's fastest bulk path."""
    import apsw

    con = apsw.Connection(str(path))
    con.execute("PRAGMA journal_mode=OFF; PRAGMA synchronous=OFF; PRAGMA cache_size=-65536")
    n = 0
    con.execute("BEGIN")
    for name, versioned, rows in source:
        extra = ", version INTEGER NOT NULL" if versioned else ""
        con.execute(
            f'CREATE TABLE "{name}" (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL{extra}) WITHOUT ROWID'
        )
        q = "?, ?, ?" if versioned else "?, ?"
        rows = list(rows) if not isinstance(rows, list) else rows
        con.executemany(f'INSERT INTO "{name}" VALUES ({q})', rows)
        n += len(rows)
    con.execute("COMMIT")
    con.close()
    return n


# --- RocksDB (rocksdict) -------------------------------------------------------------


def _rd_opts():
    import rocksdict as rd

    o = rd.Options(raw_mode=True)
    o.create_if_missing(True)
    t = rd.BlockBasedOptions()
    t.set_format_version(5)
    o.set_block_based_table_factory(t)
    return o


def rocksdb_scan(path: Path) -> Iterator[tuple[str, bool, Iterator]]:
    import rocksdict as rd

    o = _rd_opts()
    names = [n for n in rd.Rdict.list_cf(str(path), o) if n not in ("default", "__statemigrate__")]
    db = rd.Rdict(
        str(path),
        o,
        column_families={n: o for n in rd.Rdict.list_cf(str(path), o) if n != "default"},
        access_type=rd.AccessType.read_only(),
    )
    meta = db.get_column_family("__statemigrate__")
    versioned = {k[5:].decode() for k in meta.keys() if k.startswith(b"kind:")}
    del meta
    for name in names:
        cf = db.get_column_family(name)
        yield name, name in versioned, cf.items()
        del cf
    db.close()


def rocksdb_scan_count(path: Path) -> int:
    n = 0
    for _name, _v, rows in rocksdb_scan(path):
        for _ in rows:
            n += 1
    return n


def rocksdb_load(
    path: Path, source: Iterator[tuple[str, bool, Iterator]], chunk: int = 100_000
) -> int:
    """Large WriteBatches with the WAL off, then a flush: RocksDB's fast bulk path here."""
    import rocksdict as rd

    o = _rd_opts()
    db = rd.Rdict(str(path), o)
    wo = rd.WriteOptions()
    wo.disable_wal = True
    n = 0
    cfs = []
    for name, versioned, rows in source:
        cf = db.create_column_family(name, o)
        h = db.get_column_family_handle(name)
        wb = rd.WriteBatch(raw_mode=True)
        for row in rows:
            if versioned:
                wb.put(row[0], (row[2] % 2**64).to_bytes(8, "big") + row[1], h)
            else:
                wb.put(row[0], row[1], h)
            n += 1
            if n % chunk == 0:
                db.write(wb, wo)
                wb = rd.WriteBatch(raw_mode=True)
        db.write(wb, wo)
        cf.flush(True)
        cfs.append(cf)
        del h
    del cfs
    db.close()
    return n


# --- the JSON-lines dump -------------------------------------------------------------


def jsonl_write(path: Path, source: Iterator[tuple[str, bool, Iterator]]) -> int:
    """The dump's encoding done directly: a line per record, base64 keys and values."""
    b64 = base64.b64encode
    n = 0
    with open(path, "w") as f:
        for name, versioned, rows in source:
            f.write(
                json.dumps({"table": name, "kind": "versioned" if versioned else "plain"}) + "\n"
            )
            if versioned:
                lines = (
                    f'{{"k":"{b64(r[0]).decode()}","v":"{b64(r[1]).decode()}","ver":{r[2]}}}\n'
                    for r in rows
                )
            else:
                lines = (
                    f'{{"k":"{b64(r[0]).decode()}","v":"{b64(r[1]).decode()}"}}\n' for r in rows
                )
            for line in lines:
                f.write(line)
                n += 1
    return n


def jsonl_read_count(path: Path) -> int:
    b64d = base64.b64decode
    n = 0
    with open(path, "rb") as f:
        for line in f:
            obj = json.loads(line)
            if "k" in obj:
                b64d(obj["k"]), b64d(obj["v"])
                n += 1
    return n
