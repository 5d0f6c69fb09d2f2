"""Baselines of the driver engines: each driver's own fastest bulk load and full scan.

Same shape as ``baselines.py``: ``<engine>_load(path, source)`` takes what
``baselines.sqlite_scan`` yields (``(table, versioned, rows)``) and returns the number
of records written; ``<engine>_scan_count(path)`` reads every record of a store in key
order and returns the count. ``EXTRA`` maps each engine to the two.

Run alone to measure each baseline against ``statemigrate convert`` from SQLite, in
the same run:  python benchmarks/engines_extra.py --n 100000 [--engines lmdb,libsql]
[--runs 3] [--json FILE] (also ``jsonl``, through ``baselines.py``)
"""

from __future__ import annotations

import argparse
import base64
import json
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import results as R

Source = Iterator[tuple[str, bool, Any]]
U64 = 2**64


def _versions(rows: Any, versioned: bool) -> Any:
    """Rows with versions as unsigned (SQLite's scan gives them signed)."""
    return ((k, v, ver % U64) for k, v, ver in rows) if versioned else rows


# --- LMDB: putmulti(append=True), one write transaction per table ---------------------


def lmdb_load(path: Path, source: Source) -> int:
    import lmdb

    env = lmdb.open(
        str(path), subdir=True, max_dbs=64, map_size=1 << 36, sync=False, metasync=False
    )
    n = 0
    for name, versioned, rows in source:
        db = env.open_db(name.encode())
        pairs = (
            ((k, ver.to_bytes(8, "big") + v) for k, v, ver in _versions(rows, True))
            if versioned
            else rows
        )
        with env.begin(write=True) as txn:
            n += txn.cursor(db).putmulti(pairs, append=True)[1]
    env.sync(True)
    env.close()
    return n


def lmdb_scan_count(path: Path) -> int:
    import lmdb

    env = lmdb.open(str(path), subdir=True, readonly=True, lock=False, max_dbs=64)
    n = 0
    with env.begin() as txn:
        for name, _ in txn.cursor():
            for _rec in txn.cursor(env.open_db(name, txn=txn, create=False)):
                n += 1
    env.close()
    return n


# --- libSQL and Turso: executemany in one transaction, journal off --------------------


def _counted(rows: Any, count: list[int]) -> Iterator:
    for r in rows:
        count[0] += 1
        yield r


def _sql_load(conn: Any, source: Source, without_rowid: bool, as_list: bool) -> int:
    conn.execute("PRAGMA synchronous=OFF")
    n = 0
    conn.execute("BEGIN")
    for name, versioned, rows in source:
        extra = ", version INTEGER NOT NULL" if versioned else ""
        tail = " WITHOUT ROWID" if without_rowid else ""
        conn.execute(
            f'CREATE TABLE "{name}" (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL{extra}){tail}'
        )
        q = (
            "?, ?, CAST(? AS INTEGER)"
            if versioned and as_list
            else ("?, ?, ?" if versioned else "?, ?")
        )
        rows = [(k, v, str(ver)) for k, v, ver in rows] if versioned and as_list else rows
        if as_list:  # libSQL's executemany wants a list
            rows = list(rows)
            n += len(rows)
        else:
            rows = _counted(rows, count := [0])
        conn.executemany(f'INSERT INTO "{name}" VALUES ({q})', rows)
        n += 0 if as_list else count[0]
    conn.execute("COMMIT")
    return n


def _sql_scan_count(conn: Any) -> int:
    names = [
        r[0]
        for r in conn.execute(
            "SELECT name FROM sqlite_schema WHERE type='table' AND name NOT IN "
            "('__statemigrate__','alembic_version')"
        ).fetchall()
    ]
    n = 0
    for name in names:
        cur = conn.execute(f'SELECT * FROM "{name}" ORDER BY key')
        while True:
            rows = cur.fetchmany(10_000)
            if not rows:
                break
            n += len(rows)
    return n


def libsql_load(path: Path, source: Source) -> int:
    import libsql_experimental as libsql

    conn = libsql.connect(str(path), isolation_level=None)
    conn.execute("PRAGMA journal_mode=OFF")
    n = _sql_load(conn, source, True, True)
    conn.close()
    return n


def libsql_scan_count(path: Path) -> int:
    import libsql_experimental as libsql

    conn = libsql.connect("file:" + str(path.absolute()) + "?mode=ro", isolation_level=None)
    n = _sql_scan_count(conn)
    conn.close()
    return n


def turso_load(path: Path, source: Source) -> int:
    import turso

    conn = turso.connect(str(path), isolation_level=None)
    n = _sql_load(conn, source, False, False)
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    conn.close()
    return n


def turso_scan_count(path: Path) -> int:
    import turso

    conn = turso.connect(str(path), isolation_level=None)  # no read-only open in pyturso
    n = _sql_scan_count(conn)
    conn.close()
    return n


# --- HelixDB: write_batch().for_each_param in pages, ordered range reads ---------------


def helixdb_load(path: Path, source: Source, page: int = 2_000) -> int:
    from helixdb import Client, Disk, IndexSpec, PropertyInput, g, write_batch

    b64 = base64.b64encode
    path.mkdir()  # the engine's layout: the database is PATH/db
    client = Client.embedded(Disk(str(path.absolute()), "db"))
    n = 0
    for name, versioned, rows in source:
        label = "t" + name.encode().hex()
        client.query(
            write_batch()
            .var_as("ix", g().create_index_if_not_exists(IndexSpec.node_range(label, "k")))
            .to_query_request()
        )
        entry = base64.b64encode(
            json.dumps({"name": name, "kind": "versioned" if versioned else "plain"}).encode()
        )
        client.query(
            write_batch()
            .var_as(
                "m",
                g().add_n(
                    "__statemigrate__",
                    [
                        ("key", PropertyInput.value("helixdb.table:" + label)),
                        ("value", PropertyInput.value(entry.decode())),
                    ],
                ),
            )
            .to_query_request()
        )
        props = [("k", PropertyInput.param("k")), ("v", PropertyInput.param("v"))]
        if versioned:
            props.append(("ver", PropertyInput.param("ver")))
        query = write_batch().for_each_param(
            "rows", write_batch().var_as("n", g().add_n(label, props))
        )
        chunk: list = []

        def flush(query: Any = query, chunk: list = chunk) -> None:
            client.query(query.to_query_request().with_untyped_parameter("rows", chunk))

        for r in rows:
            row = {"k": r[0].hex(), "v": b64(r[1]).decode()}
            if versioned:
                row["ver"] = r[2]
            chunk.append(row)
            if len(chunk) == page:
                flush(query, chunk)
                n += len(chunk)
                chunk = []
        if chunk:
            flush(query, chunk)
            n += len(chunk)
    client.close()
    return n


def helixdb_scan_count(path: Path, page: int = 1_000) -> int:
    from helixdb import Client, Disk, SourcePredicate, g, read_batch

    client = Client.embedded_reader(Disk(str(path.absolute()), "db"))
    labels = set()
    rows = client.query(
        read_batch()
        .var_as("m", g().n_with_label("__statemigrate__").value_map(["key"]))
        .returning(["m"])
        .to_query_request()
    )["m"]
    for r in rows:
        if r["key"].startswith("helixdb.table:"):
            labels.add(r["key"][len("helixdb.table:") :])
    n = 0
    for label in sorted(labels):
        last = None
        while True:
            where = SourcePredicate.gte("k", "") if last is None else SourcePredicate.gt("k", last)
            got = client.query(
                read_batch()
                .var_as(
                    "o",
                    g().n_with_label_where(label, where).limit(page).value_map(["k", "v", "ver"]),
                )
                .returning(["o"])
                .to_query_request()
            )["o"]
            for r in got:
                base64.b64decode(r["v"])
            n += len(got)
            if len(got) < page:
                break
            last = got[-1]["k"]
    client.close()
    return n


EXTRA: dict[str, tuple[Callable[[Path, Source], int], Callable[[Path], int]]] = {
    "lmdb": (lmdb_load, lmdb_scan_count),
    "libsql": (libsql_load, libsql_scan_count),
    "turso": (turso_load, turso_scan_count),
    "helixdb": (helixdb_load, helixdb_scan_count),
}


def _baseline(name: str) -> tuple[Callable[[Path, Source], int], Callable[[Path], int]]:
    """The load and scan of ``name``: this module's, or ``baselines.py``'s (jsonl)."""
    if name != "jsonl":
        return EXTRA[name]
    import baselines as B

    return B.jsonl_write, B.jsonl_read_count


def _remove(path: Path) -> None:
    shutil.rmtree(path, ignore_errors=True) if path.is_dir() else path.unlink(missing_ok=True)


def main() -> None:
    sys.path.insert(0, str(Path(__file__).parent))
    import baselines as B

    from statemigrate import convert
    from statemigrate.fsutil import store_size
    from statemigrate.registry import get_engine
    from statemigrate.testing.workload import write_workload

    ap = argparse.ArgumentParser()
    R.add_argument(ap)
    ap.add_argument("--n", type=int, default=100_000)
    ap.add_argument("--engines", default=",".join(EXTRA), help=f"of {', '.join([*EXTRA, 'jsonl'])}")
    ap.add_argument("--runs", type=int, default=1, help="runs of each job (medians are shown)")
    ap.add_argument("--json", default=None, help="also write the results here")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sm-bench-extra-"))
    results: dict[str, dict[str, float]] = {}
    try:
        src = write_workload(get_engine("sqlite"), tmp / "src.sqlite", args.n)
        # The workload's ``odd`` table holds keys LMDB refuses: measure the other two.
        tables = ["events", "settings"]

        def source() -> Source:
            return ((t, v, list(rows)) for t, v, rows in B.sqlite_scan(src) if t in tables)

        total: int = sum(len(rows) for _t, _v, rows in source())
        payload = store_size(src)
        print(f"records {total:,} (sqlite source {payload:,} bytes), medians of {args.runs}")
        for name in args.engines.split(","):
            load, scan = _baseline(name)
            base, out = tmp / f"base.{name}", tmp / f"out.{name}"
            times: dict[str, list[float]] = {"load": [], "scan": [], "convert": []}
            size = 0
            for _ in range(args.runs):
                t0 = time.perf_counter()
                n = load(base, source())
                times["load"].append(time.perf_counter() - t0)
                assert n == total, (name, n, total)
                t0 = time.perf_counter()
                assert scan(base) == total, name
                times["scan"].append(time.perf_counter() - t0)
                t0 = time.perf_counter()
                convert(str(src), f"{name}:{out}", tables=tables)
                times["convert"].append(time.perf_counter() - t0)
                size = store_size(out)
                _remove(base)
                _remove(out)
            t_load, t_scan, t_conv = (statistics.median(times[k]) for k in times)
            results[name] = {
                "records": total,
                "load_seconds": t_load,
                "scan_seconds": t_scan,
                "convert_seconds": t_conv,
                "ratio": (t_load + t_scan) / t_conv,
                "size_vs_sqlite": size / payload,
            }
            print(
                f"{name:8} bulk load {total / t_load:10,.0f} rec/s   scan {total / t_scan:10,.0f} rec/s   "
                f"convert (verified) {total / t_conv:10,.0f} rec/s   ratio convert/(load+scan) "
                f"{(t_load + t_scan) / t_conv:.2f}   size {size / payload:.1f}x the sqlite file"
            )
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if args.json:
        Path(args.json).write_text(
            json.dumps({"n": args.n, "runs": args.runs, **results}, indent=2)
        )
    command = R.command_line("engines_extra.py", sys.argv[1:])
    R.write_from(results_table(results, command, f"medians of {args.runs}; {R.machine()}"), args)


def results_table(results: dict[str, dict[str, float]], command: str, conditions: str) -> R.Table:
    """Each engine's figures as the data file ``results/drivers.json``.

    Args:
        results: by engine, its ``records`` and the medians ``load_seconds``,
            ``scan_seconds`` and ``convert_seconds``, ``ratio`` and ``size_vs_sqlite``.
        command: the command line that measured them.
        conditions: how (runs, machine).
    """
    rows = [
        [
            R.NAMES.get(name, name), r["records"], r["records"] / r["load_seconds"],
            r["records"] / r["scan_seconds"], r["records"] / r["convert_seconds"], r["ratio"],
            r["size_vs_sqlite"],
        ]
        for name, r in results.items()
    ]  # fmt: skip
    return R.Table(
        name="drivers",
        title="The driver engines against their drivers' own bulk paths",
        command=command,
        conditions=conditions,
        columns=[
            R.Column("engine", align="left"),
            R.Column("records", ","),
            R.Column("driver bulk load, records/s", ",.0f"),
            R.Column("driver scan, records/s", ",.0f"),
            R.Column("convert (verified), records/s", ",.0f"),
            R.Column("ratio", ".2f"),
            R.Column("size vs the SQLite file", ".1f", "×"),
        ],
        rows=rows,
        notes=[
            (
                "Ratio is (bulk load + scan) time over the convert's: the target is at "
                "least 0.8. The convert is verified (it also checks keys and reads the "
                "result back); the driver's load is fed by the same SQLite scan."
            )
        ],
    )


if __name__ == "__main__":
    main()
