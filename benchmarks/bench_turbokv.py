"""TurboKV 0.6 through the bindings: the seed's comparison and convert at 1M records.

1. TurboKV vs fjall 3 sequential batch writes (the comparison TurboKV's users quote):
   ``--records`` keys of 20 bytes in ascending order, 400-byte random values, batches of
   1,000, one table, through the bindings (``statemigrate_turbokv._native.TurbokvWriter``
   with the ``durable`` preset configured as the crate's ``Db`` does and compression off;
   ``statemigrate._native.FjallWriter``
   on a keyspace that already exists, so its batches are write batches, not ingestion;
   fjall 3's default keyspace options compress nothing on levels 0 and 1, where a load's
   flushes land). Records/s of the write loop (every batch acknowledged: the WAL or
   journal written, not synced) and of the loop with the final flush, sync and close.
   Medians of ``--repeat`` runs, the engines alternating.
2. ``statemigrate convert`` SQLite -> turbokv and back (verified) at ``--convert-n``
   events of the benchmark workload, beside the drivers' own sequential work in the
   same run: SQLite's scan feeding the binding's load (batches of 10,000, ``durable``),
   and the binding's scan plus SQLite's load (apsw, ``baselines.sqlite_load``).

Run:  python benchmarks/bench_turbokv.py [--records 200000] [--convert-n 1000000]
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import results as R

KEY = 20
VALUE = 400
BATCH = 1_000


def batches(n: int) -> list[list[tuple[bytes, bytes]]]:
    """``n`` records in batches of 1,000: ascending 20-byte keys, random 400-byte values."""
    pool = os.urandom(VALUE * 1024)
    out = []
    for start in range(0, n, BATCH):
        out.append(
            [
                (b"k%019d" % i, pool[(i % 1000) * VALUE : (i % 1000) * VALUE + VALUE])
                for i in range(start, min(n, start + BATCH))
            ]
        )
    assert len(out[0][0][0]) == KEY and len(out[0][0][1]) == VALUE
    return out


def turbokv_writes(path: Path, data: list[list[tuple[bytes, bytes]]]) -> tuple[float, float]:
    from statemigrate_turbokv import _native

    # TurboKV's own durable preset, configured as `Db::open_with_options` does (statemigrate's
    # writer bounds memory and WAL segments: measured in the convert table).
    w = _native.TurbokvWriter(str(path.absolute()), True, "durable", "none", False)
    t0 = time.perf_counter()
    for b in data:
        w.write_batch("t", b, False, [])
    t1 = time.perf_counter()
    w.finish()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t0


def fjall3_writes(path: Path, data: list[list[tuple[bytes, bytes]]]) -> tuple[float, float]:
    from statemigrate import _native

    w = _native.FjallWriter(str(path), 3, True)
    w.create_table("t", [])
    w.close()
    w = _native.FjallWriter(str(path), 3, False)  # the keyspace exists: write batches
    t0 = time.perf_counter()
    for b in data:
        w.write_batch("t", b, False, [])
    t1 = time.perf_counter()
    w.persist()
    w.close()
    t2 = time.perf_counter()
    return t1 - t0, t2 - t0


def batch_writes_table(
    med: dict[str, tuple[float, float]], n: int, repeat: int, command: str, machine: str
) -> R.Table:
    """The batch-write rates as the data file ``results/turbokv-batch-writes.json``.

    Args:
        med: by engine (``turbokv``, ``fjall3``), the median records/s of the write loop
            and of the loop with its final flush, sync and close.
        n: the records written.
        repeat: the runs each median is of.
        command: the command line that measured them.
        machine: the cores and the load.
    """
    shown = {"turbokv": "TurboKV 0.6", "fjall3": "fjall 3"}
    rows: list[list[object]] = [[shown[k], *v] for k, v in med.items()]
    turbo, fjall = med["turbokv"], med["fjall3"]
    rows.append(["TurboKV ÷ fjall 3", f"{turbo[0] / fjall[0]:.2f}×", f"{turbo[1] / fjall[1]:.2f}×"])
    return R.Table(
        name="turbokv-batch-writes",
        title="TurboKV against fjall 3, sequential batch writes",
        command=command,
        conditions=f"{n:,} records, batches of {BATCH:,}, medians of {repeat}; {machine}",
        columns=[
            R.Column("engine", align="left"),
            R.Column("batches acknowledged, records/s", ",.0f"),
            R.Column("with the final flush, sync and close, records/s", ",.0f"),
        ],
        rows=rows,
        notes=[
            (
                "20-byte ascending keys, 400-byte values, one table, compression off, "
                "through the bindings; acknowledged means the WAL or journal written, "
                "not synced."
            )
        ],
    )


def convert_results_table(
    rows: list[tuple[str, float]], records: int, command: str, machine: str
) -> R.Table:
    """The convert figures as the data file ``results/turbokv-convert.json``.

    Args:
        rows: each job's name and seconds.
        records: the records converted.
        command: the command line that measured them.
        machine: the cores and the load.
    """
    return R.Table(
        name="turbokv-convert",
        title="TurboKV: convert against the drivers' own work",
        command=command,
        conditions=f"{records:,} records, one run; {machine}",
        columns=[
            R.Column("what", align="left"),
            R.Column("seconds", ".1f"),
            R.Column("records/s", ",.0f"),
        ],
        rows=[[what, t, records / t] for what, t in rows],
    )


def side_table(work: Path, n: int, repeat: int) -> R.Table:
    data = batches(n)
    runs: dict[str, list[tuple[float, float]]] = {"turbokv": [], "fjall3": []}
    fns: dict[str, Callable[[Path, list[list[tuple[bytes, bytes]]]], tuple[float, float]]] = {
        "turbokv": turbokv_writes,
        "fjall3": fjall3_writes,
    }
    for i in range(repeat):
        for name, fn in fns.items():
            path = work / f"side-{name}-{i}"
            runs[name].append(fn(path, data))
            shutil.rmtree(path)
    print(f"\nsequential batch writes: {n:,} records, batches of {BATCH:,}, medians of {repeat}")
    print("| engine | batches acknowledged, records/s | with flush, sync and close, records/s |")
    print("|---|---:|---:|")
    med = {}
    for name, rs in runs.items():
        loop = statistics.median(n / a for a, _ in rs)
        whole = statistics.median(n / b for _, b in rs)
        med[name] = (loop, whole)
        print(f"| {name} | {loop:,.0f} | {whole:,.0f} |")
    print(
        f"| TurboKV / fjall 3 | {med['turbokv'][0] / med['fjall3'][0]:.2f}x "
        f"| {med['turbokv'][1] / med['fjall3'][1]:.2f}x |"
    )
    return batch_writes_table(
        med, n, repeat, R.command_line("bench_turbokv.py", sys.argv[1:]), R.machine()
    )


def convert_table(work: Path, n: int) -> R.Table:
    sys.path.insert(0, str(Path(__file__).parent))
    import baselines as B
    from statemigrate_turbokv import _native

    from statemigrate import convert
    from statemigrate.registry import get_engine
    from statemigrate.testing.workload import write_workload

    src = work / "src.sqlite"
    print(f"\nwriting the workload: {n:,} events", file=sys.stderr)
    write_workload(get_engine("sqlite"), src, n)
    records = B.sqlite_scan_count(src)

    # The binding's own load of the same records as they are scanned from SQLite (the
    # time includes that scan: the bound of convert sqlite -> turbokv), and its scan.
    base = work / "base.turbokv"
    t0 = time.perf_counter()
    w = _native.TurbokvWriter(str(base.absolute()), True, "durable", "lz4")
    for name, versioned, rows in B.sqlite_scan(src):
        batch: list[tuple[bytes, ...]] = []
        for row in rows:
            batch.append((row[0], row[1], row[2] % 2**64) if versioned else (row[0], row[1]))
            if len(batch) == 10_000:
                w.write_batch(name, batch, versioned, [])
                batch = []
        if batch:
            w.write_batch(name, batch, versioned, [])
    w.finish()
    t_load = time.perf_counter() - t0
    t0 = time.perf_counter()
    r = _native.TurbokvReader(str(base.absolute()))
    seen = 0
    for name in r.names():
        after = None
        while b := r.read_batch(name, after, 10_000, 8 << 20, False):
            seen += len(b)
            after = b[-1][0]
    r.close()
    t_scan = time.perf_counter() - t0
    assert seen == records, (seen, records)

    mid, back = work / "out.turbokv", work / "back.sqlite"
    t0 = time.perf_counter()
    assert convert(str(src), str(mid)).verified
    t_to = time.perf_counter() - t0
    t0 = time.perf_counter()
    assert convert(str(mid), str(back)).verified
    t_from = time.perf_counter() - t0
    # SQLite's own side: its scan, and a copy into a new file (scan + load).
    t0 = time.perf_counter()
    assert B.sqlite_scan_count(src) == records
    t_sql_scan = time.perf_counter() - t0
    t0 = time.perf_counter()
    B.sqlite_load(work / "base.sqlite", B.sqlite_scan(src))
    t_sql_load = max(time.perf_counter() - t0 - t_sql_scan, 1e-9)

    print(f"\nconvert at {records:,} records (workload of {n:,} events), one run")
    print("| what | seconds | records/s |")
    print("|---|---:|---:|")
    jobs = [
        ("SQLite scan + TurboKV binding load, batches of 10,000 (`durable`, flush, close)", t_load),
        ("TurboKV binding scan, batches of 10,000", t_scan),
        ("SQLite scan (apsw)", t_sql_scan),
        ("SQLite load (apsw, one transaction per table)", t_sql_load),
        ("convert sqlite → turbokv (verified)", t_to),
        ("convert turbokv → sqlite (verified)", t_from),
    ]
    for what, t in jobs:
        print(f"| {what} | {t:.1f} | {records / t:,.0f} |")
    print(
        f"ratio to the drivers' own sequential work: sqlite → turbokv "
        f"{t_load / t_to:.2f}, turbokv → sqlite {(t_scan + t_sql_load) / t_from:.2f}"
    )
    command = R.command_line("bench_turbokv.py", sys.argv[1:])
    table = convert_results_table(jobs, records, command, R.machine())
    table.notes.append(
        f"Ratio to the drivers' own sequential work (load and scan, without the read-back): "
        f"SQLite → turbokv {t_load / t_to:.2f}, turbokv → SQLite "
        f"{(t_scan + t_sql_load) / t_from:.2f}; the target is 0.8."
    )
    return table


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--convert-n", type=int, default=1_000_000)
    ap.add_argument("--dir", default=None)
    R.add_argument(ap)
    args = ap.parse_args()
    work = Path(args.dir or tempfile.mkdtemp(prefix="sm-bench-turbokv-"))
    work.mkdir(parents=True, exist_ok=True)
    try:
        R.write(side_table(work, args.records, args.repeat), args.results)
        if args.convert_n:
            R.write(convert_table(work, args.convert_n), args.results)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
