"""The benchmark runner: the tool against the drivers' own fastest paths, in one process.

Usage:  python benchmarks/run.py [--n 1000000] [--repeat 3] [--rss-n 1000000,4000000]

Every figure is the median of --repeat runs. Each convert is compared with its
ceiling: the same work done directly with the drivers, each on its fastest path, one
after the other (scan the source + bulk-load the destination + scan it back for a
verified convert; scan + load for --no-verify; the two scans for verify). Ratios
above 1 mean the tool is faster than that sequence. The naive loop is per-record
`dst.put(k, v)` calls. Peak RSS is measured in a child process per run.

The redb ceilings need the extension built with the cargo feature `bench`
(`python benchmarks/build_native.py`; `make bench` does it).
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).parent))

import baselines as B
import results as R
from timing import settle

from statemigrate import convert, verify
from statemigrate.model import BATCH_RECORDS
from statemigrate.registry import get_engine
from statemigrate.testing.workload import write_workload


def timed(fn: Callable[[], object], repeat: int, setup: Callable[[], None] = lambda: None) -> float:
    times = []
    for _ in range(repeat):
        setup()
        settle()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def clean(*paths: Path) -> Callable[[], None]:
    def do() -> None:
        for p in paths:
            shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)

    return do


_RSS_WRAPPER = """
import os, subprocess, sys
proc = subprocess.Popen(sys.argv[1:])
_pid, status, usage = os.wait4(proc.pid, 0)
print(usage.ru_maxrss if status == 0 else -1)
"""


def peak_rss_of_convert(src: Path, dst: Path) -> int:
    """Peak RSS (bytes) of a `statemigrate convert` child process.

    The child is started by a small wrapper process: a child forked straight from this
    (large) process would report this process's RSS, which Linux counts into the
    child's peak until it execs.
    """
    clean(dst)()
    out = subprocess.run(
        [
            sys.executable,
            "-c",
            _RSS_WRAPPER,
            sys.executable,
            "-m",
            "statemigrate.cli",
            "convert",
            "--quiet",
            str(src),
            str(dst),
        ],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    clean(dst)()
    kib = int(out.strip())
    if kib < 0:
        raise SystemExit("convert for the RSS measurement failed")
    return kib * 1024


def label(what: str) -> str:
    """A job's name as the page shows it: ``convert sqlite → rocksdb (verified)``."""
    shown = what.replace("->", " → ").replace(" --no-verify", " `--no-verify`")
    if shown.startswith("convert") and "--no-verify" not in what and "(" not in what:
        shown += " (verified)"
    return shown


def results_table(
    rows: list[dict[str, Any]],
    records: int,
    repeat: int,
    naive_records_per_s: float,
    command: str,
    machine: str,
) -> R.Table:
    """The figures of one run as the data file ``results/convert.json``.

    Args:
        rows: each job's ``what``, ``seconds``, ``ceiling_seconds`` and ``ratio_to_ceiling``.
        records: the records in each store.
        repeat: runs each figure is the median of.
        naive_records_per_s: the naive per-record loop's rate (SQLite → RocksDB).
        command: the command line that measured them.
        machine: the cores and the load the run had.
    """
    verified = next(r for r in rows if r["what"] == "convert sqlite->rocksdb")
    speedup = records / float(verified["seconds"]) / naive_records_per_s
    return R.Table(
        name="convert",
        title="The tool against the drivers' own fastest paths",
        command=command,
        conditions=f"{records:,} records, median of {repeat} runs; {machine}",
        columns=[
            R.Column("what", align="left"),
            R.Column("records/s", ",.0f"),
            R.Column("ceiling records/s", ",.0f"),
            R.Column("ratio to ceiling", ".2f"),
        ],
        rows=[
            [
                label(str(r["what"])),
                records / float(r["seconds"]),
                records / float(r["ceiling_seconds"]),
                r["ratio_to_ceiling"],
            ]
            for r in rows
        ],
        notes=[
            (
                f"The naive loop (one rocksdict `cf[key] = value` per record, SQLite → "
                f"RocksDB) ran at {naive_records_per_s:,.0f} records/s: the verified "
                f"convert is {speedup:.2f}× faster."
            )
        ],
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--rss-n", default="1000000,4000000")
    ap.add_argument("--dir", default=None)
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument("--rss-only", action="store_true", help="only the peak-RSS measurements")
    R.add_argument(ap)
    args = ap.parse_args()
    from statemigrate import _native

    if not args.rss_only and not hasattr(_native, "redb_bulk_load"):
        sys.exit(
            "the redb ceilings are built only with the cargo feature `bench`: "
            "run `python benchmarks/build_native.py` first"
        )
    work = Path(args.dir or tempfile.mkdtemp(prefix="sm-bench-"))
    work.mkdir(parents=True, exist_ok=True)
    sqlite, rocks = get_engine("sqlite"), get_engine("rocksdb")
    if args.rss_only:
        for n in [int(x) for x in args.rss_n.split(",") if x]:
            big = work / f"rss-{n}.sqlite"
            if not big.exists():
                write_workload(sqlite, big, n)
            print(
                f"peak RSS of convert sqlite->rocksdb at {n:,} events: "
                f"{peak_rss_of_convert(big, work / f'rss-{n}.rocksdb') / 2**20:.0f} MiB"
            )
        return
    src_sql, src_rdb = work / "src.sqlite", work / "src.rocksdb"
    clean(src_sql, src_rdb)()
    print(f"writing the workload: {args.n:,} events + 200 settings + odd keys", file=sys.stderr)
    write_workload(sqlite, src_sql, args.n)
    write_workload(rocks, src_rdb, args.n)
    redb = get_engine("redb")
    src_redb = work / "src.redb"
    clean(src_redb)()
    write_workload(redb, src_redb, args.n)
    records = B.sqlite_scan_count(src_sql)
    r = args.repeat
    out_sql, out_rdb, out_jsonl = work / "out.sqlite", work / "out.rocksdb", work / "out.jsonl"
    out_redb = work / "out.redb"
    res: dict[str, float] = {}

    # ceilings: the drivers' own fastest paths
    res["sqlite scan"] = timed(lambda: B.sqlite_scan_count(src_sql), r)
    res["rocksdb scan"] = timed(lambda: B.rocksdb_scan_count(src_rdb), r)
    res["sqlite load"] = timed(
        lambda: B.sqlite_load(
            out_sql, ((n, v, list(rows)) for n, v, rows in B.sqlite_scan(src_sql))
        ),
        r,
        clean(out_sql),
    )
    res["sqlite load (scan+load)"] = res["sqlite load"]
    res["rocksdb load (scan+load)"] = timed(
        lambda: B.rocksdb_load(out_rdb, B.sqlite_scan(src_sql)), r, clean(out_rdb)
    )
    res["sqlite load from rocksdb (scan+load)"] = timed(
        lambda: B.sqlite_load(
            out_sql,
            (
                (
                    n,
                    v,
                    [(k, x[8:], int.from_bytes(x[:8], "big", signed=True)) for k, x in rows]
                    if v
                    else list(rows),
                )
                for n, v, rows in B.rocksdb_scan(src_rdb)
            ),
        ),
        r,
        clean(out_sql),
    )
    res["jsonl write (scan+write)"] = timed(
        lambda: B.jsonl_write(out_jsonl, B.sqlite_scan(src_sql)), r, clean(out_jsonl)
    )
    res["jsonl read"] = timed(lambda: B.jsonl_read_count(out_jsonl), r)
    # redb's own fastest paths through the binding (records generated in Rust with the
    # workload's sizes: 19-byte keys, ~300-byte values; the cargo feature `bench`).
    res["redb load (native)"] = timed(
        lambda: _native.redb_bulk_load(str(out_redb), records, 19, 300), r, clean(out_redb)
    )
    # The fair ceiling: commits of the tool's batch size, Durability::None but the last,
    # no compact() (what the tool's redb writer does).
    res["redb load (native, batched)"] = timed(
        lambda: _native.redb_bulk_load(str(out_redb), records, 19, 300, BATCH_RECORDS),
        r,
        clean(out_redb),
    )
    res["redb scan (native)"] = timed(lambda: _native.redb_full_scan(str(src_redb)), r)
    clean(out_sql, out_rdb, out_jsonl)()

    # the naive loop: one driver call per record
    def naive() -> None:
        import rocksdict as rd

        o = B._rd_opts()
        db = rd.Rdict(str(out_rdb), o)
        for name, versioned, rows in B.sqlite_scan(src_sql):
            cf = db.create_column_family(name, o)
            for row in rows:
                cf[row[0]] = ((row[2] % 2**64).to_bytes(8, "big") + row[1]) if versioned else row[1]
            del cf
        db.close()

    res["naive sqlite->rocksdb"] = timed(naive, r, clean(out_rdb))

    # the tool
    res["convert sqlite->rocksdb"] = timed(
        lambda: convert(str(src_sql), str(out_rdb)), r, clean(out_rdb)
    )
    res["convert sqlite->rocksdb --no-verify"] = timed(
        lambda: convert(str(src_sql), str(out_rdb), verify=False), r, clean(out_rdb)
    )
    res["convert rocksdb->sqlite"] = timed(
        lambda: convert(str(src_rdb), str(out_sql)), r, clean(out_sql)
    )
    res["convert sqlite->jsonl"] = timed(
        lambda: convert(str(src_sql), str(out_jsonl)), r, clean(out_jsonl)
    )
    res["verify sqlite rocksdb"] = timed(lambda: verify(str(src_sql), str(src_rdb)), r)
    res["convert sqlite->redb"] = timed(
        lambda: convert(str(src_sql), str(out_redb)), r, clean(out_redb)
    )
    res["convert redb->sqlite"] = timed(
        lambda: convert(str(src_redb), str(out_sql)), r, clean(out_sql)
    )

    ceilings = {
        "convert sqlite->rocksdb": res["rocksdb load (scan+load)"] + res["rocksdb scan"],
        "convert sqlite->rocksdb --no-verify": res["rocksdb load (scan+load)"],
        "convert rocksdb->sqlite": res["sqlite load from rocksdb (scan+load)"] + res["sqlite scan"],
        "convert sqlite->jsonl": res["jsonl write (scan+write)"] + res["jsonl read"],
        "verify sqlite rocksdb": res["sqlite scan"] + res["rocksdb scan"],
        "convert sqlite->redb": res["sqlite scan"]
        + res["redb load (native)"]
        + res["redb scan (native)"],
        "convert sqlite->redb (batched ceiling)": res["sqlite scan"]
        + res["redb load (native, batched)"]
        + res["redb scan (native)"],
        "convert redb->sqlite": res["redb scan (native)"]
        + res["sqlite load (scan+load)"]
        + res["sqlite scan"],
    }
    rows = []
    for name, ceiling in ceilings.items():
        measured = res[name.removesuffix(" (batched ceiling)")]
        rows.append(
            {
                "what": name,
                "seconds": measured,
                "records_per_s": records / measured,
                "ceiling_seconds": ceiling,
                "ratio_to_ceiling": ceiling / measured,
            }
        )
    speedup_naive = res["naive sqlite->rocksdb"] / res["convert sqlite->rocksdb"]
    rss = {}
    for n in [int(x) for x in args.rss_n.split(",") if x]:
        big = work / f"rss-{n}.sqlite"
        if not big.exists():
            write_workload(sqlite, big, n)
        rss[n] = peak_rss_of_convert(big, work / f"rss-{n}.rocksdb")
    print(f"\n{records:,} records, median of {r} runs\n")
    print("| what | records/s | ceiling records/s | ratio to ceiling |")
    print("|---|---:|---:|---:|")
    for row in rows:
        print(
            f"| {row['what']} | {row['records_per_s']:,.0f} | {records / row['ceiling_seconds']:,.0f} | "
            f"{row['ratio_to_ceiling']:.2f} |"
        )
    print(
        f"\nnaive per-record loop sqlite->rocksdb: {records / res['naive sqlite->rocksdb']:,.0f} records/s; "
        f"verified convert is {speedup_naive:.2f}x faster"
    )
    for n, b in rss.items():
        print(f"peak RSS of convert sqlite->rocksdb at {n:,} events: {b / 2**20:.0f} MiB")
    print("\nraw timings (s):", json.dumps({k: round(v, 3) for k, v in res.items()}))
    table = results_table(
        rows,
        records,
        r,
        records / res["naive sqlite->rocksdb"],
        R.command_line("run.py", sys.argv[1:]),
        R.machine(),
    )
    R.write_from(table, args)
    if args.json:
        Path(args.json).write_text(
            json.dumps(
                {
                    "records": records,
                    "rows": rows,
                    "naive_speedup": speedup_naive,
                    "rss": rss,
                    "raw": res,
                },
                indent=2,
            )
        )
    if not args.dir:
        shutil.rmtree(work)
    return


if __name__ == "__main__":
    main()
