"""Many one-record tables from SQLite into fjall: wall time and disk use (issue 27).

Usage:  python benchmarks/many_tables.py [--tables 500,1500,5000] [--engines fjall3,fjall2]
                                         [--runs 3] [--dir DIR] [--json FILE]
                                         [--variants NAME=PYTHONPATH,...]

One SQLite source per table count holds N tables of one record each (``b"k"`` ->
``b"v<i>"``), written once by the tool's own writer. Each run is `statemigrate convert
--quiet --no-verify SRC ENGINE:DST` in a child process; a thread polls the size of the
growing ``DST.partial`` (every file below it, by allocated blocks, like ``du``) every
20 ms and keeps the peak. Reported per engine and count: the wall time, the peak size
of the ``.partial``, the final store's size and their ratio, each the median of
``--runs`` runs. Time linear in the number of tables shows as a constant
seconds-per-1,000-tables column. The child's CPU seconds (user and system) are shown
too: on a shared machine they move far less with the load than the wall clock.

With the extension built with the cargo feature ``bench`` (``_native.fjall_create_tables``),
each run also times the **ceiling** in child processes the same way, just before the
converts: fjall's own way to make the same store through the fjall crate of the
engine's major, N keyspaces of one record created with no reopening of the database,
then flushed, fsynced and closed. It is made both ways fjall offers, one insert per
keyspace (every memtable flushed at the end) and one ingestion per keyspace, and the
way of fewer CPU seconds is the ceiling (fjall 3 inserts faster below a few thousand
keyspaces, ingests faster at 5,000; fjall 2 ingests faster). Its seconds per 1,000
tables, the convert's ratio to it (ceiling seconds ÷ convert seconds, wall and CPU: 1
is as fast as fjall's own, 0.5 twice as slow) and its disk use at the end are shown
beside each convert; without the feature those columns show ``—``.

``--variants before=DIR1,after=DIR2`` runs each convert once per variant with
``PYTHONPATH=DIRn`` (a copy of ``src/`` holding another build of the extension), the
variants taken in turn within each run, so that the machine's load falls on all alike.
"""

from __future__ import annotations

import argparse
import json
import math
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import results as R

from statemigrate import _native
from statemigrate.engines.sqlite import SqliteEngine
from statemigrate.model import TableInfo
from statemigrate.testing.stores import write_store

STATEMIGRATE = str(Path(sys.executable).with_name("statemigrate"))


def disk_bytes(path: Path) -> int:
    """Bytes allocated below ``path`` (0 when it does not exist), as ``du`` counts them."""
    total = 0
    for root, _dirs, files in os.walk(path):
        for name in files:
            try:
                total += os.lstat(os.path.join(root, name)).st_blocks * 512
            except FileNotFoundError:
                pass  # fjall removed it between the listing and the stat
    return total


def source(directory: Path, tables: int) -> Path:
    """The SQLite store of ``tables`` one-record tables (written once, then kept)."""
    path = directory / f"tables-{tables}.sqlite"
    if not path.exists():
        content = {TableInfo(f"t{i:05d}"): [(b"k", b"v%d" % i)] for i in range(tables)}
        write_store(SqliteEngine, path, content)
    return path


def _children_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def measure(cmd: list[str], watched: Path, final: Path, env: dict[str, str]) -> dict[str, float]:
    """Run ``cmd``: wall and CPU seconds, the peak bytes of ``watched``, the final bytes of
    ``final`` (both removed first)."""
    for path in {watched, final}:
        shutil.rmtree(path, ignore_errors=True)
    peak = 0
    done = threading.Event()

    def poll() -> None:
        nonlocal peak
        while not done.is_set():
            peak = max(peak, disk_bytes(watched))
            done.wait(0.02)

    watcher = threading.Thread(target=poll, daemon=True)
    cpu = _children_cpu()
    start = time.monotonic()
    watcher.start()
    run = subprocess.run(cmd, check=False, capture_output=True, text=True, env=env)
    seconds = time.monotonic() - start
    cpu = _children_cpu() - cpu
    done.set()
    watcher.join()
    if run.returncode != 0:
        raise SystemExit(f"{cmd[1]}: failed ({run.returncode}): {run.stderr[-400:]}")
    size = disk_bytes(final)
    return {
        "seconds": seconds,
        "cpu_seconds": cpu,
        "peak_bytes": max(peak, size),
        "final_bytes": size,
    }


def run_once(src: Path, engine: str, dst: Path, pythonpath: str | None) -> dict[str, float]:
    """One convert: wall and CPU seconds, the peak bytes of its .partial, the final bytes."""
    env = dict(os.environ, **({"PYTHONPATH": pythonpath} if pythonpath else {}))
    cmd = [STATEMIGRATE, "convert", "--quiet", "--no-verify", f"sqlite:{src}", f"{engine}:{dst}"]
    return measure(cmd, dst.with_name(dst.name + ".partial"), dst, env)


HAS_CEILING = hasattr(_native, "fjall_create_tables")
CEILING = (
    "import sys; from statemigrate import _native as n; "
    "n.fjall_create_tables(sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4] == 'ingest')"
)
WAYS = ("insert", "ingest")


def ceiling_once(engine: str, tables: int, dst: Path) -> dict[str, Any]:
    """The ceiling: fjall's own store of ``tables`` one-record keyspaces made each way
    (inserts, then every memtable flushed; or an ingestion per keyspace), each in a child
    process loading this process's extension and measured as :func:`run_once` measures
    a convert (its peak that of the store itself). Returns the way of fewer CPU seconds
    (the stable measure on a shared machine), with both ways under ``ways``."""
    major = engine.removeprefix("fjall")
    env = dict(os.environ, PYTHONPATH=str(Path(_native.__file__).parents[1]))
    ways = {}
    for way in WAYS:
        cmd = [sys.executable, "-c", CEILING, str(dst), major, str(tables), way]
        ways[way] = measure(cmd, dst, dst, env)
        shutil.rmtree(dst, ignore_errors=True)
    best = min(WAYS, key=lambda w: ways[w]["cpu_seconds"])
    return {**ways[best], "way": best, "ways": ways}


def _shown(value: float | None, spec: str, width: int) -> str:
    """A figure for the printed table (``-`` for None: no ceiling)."""
    shown = "-" if value is None or math.isnan(value) else format(value, spec)
    return f"{shown:>{width}}"


def _ratio(ceiling: dict[str, Any] | None, r: dict[str, Any], key: str) -> float | None:
    return None if ceiling is None else ceiling[key] / r[key]


def results_table(results: list[dict[str, Any]], command: str, conditions: str) -> R.Table:
    """The medians of each engine and table count as the data file ``results/many-tables.json``
    (the variant named ``after``, or the only one), with the ceiling's (None without it)."""
    kept = [r for r in results if r["variant"] in ("", "after")]
    return R.Table(
        name="many-tables",
        title="Many one-record tables from SQLite into fjall, against fjall's own",
        command=command,
        conditions=conditions,
        columns=[
            R.Column("engine", align="left"),
            R.Column("tables", ","),
            R.Column("wall", ".1f", " s"),
            R.Column("CPU", ".1f", " s"),
            R.Column("s per 1,000 tables", ".1f"),
            R.Column("ceiling s per 1,000 tables", ".1f"),
            R.Column("ratio to ceiling", ".2f"),
            R.Column("CPU ratio to ceiling", ".2f"),
            R.Column("peak", ",.1f", " MB"),
            R.Column("final", ",.1f", " MB"),
            R.Column("peak ÷ final", ".1f"),
            R.Column("ceiling final", ",.1f", " MB"),
        ],
        rows=[
            [
                r["engine"],
                r["tables"],
                r["seconds"],
                r["cpu_seconds"],
                1000 * r["seconds"] / r["tables"],
                None if r["ceiling"] is None else 1000 * r["ceiling"]["seconds"] / r["tables"],
                _ratio(r["ceiling"], r, "seconds"),
                _ratio(r["ceiling"], r, "cpu_seconds"),
                r["peak_bytes"] / 1e6,
                r["final_bytes"] / 1e6,
                r["peak_bytes"] / max(r["final_bytes"], 1),
                None if r["ceiling"] is None else r["ceiling"]["final_bytes"] / 1e6,
            ]
            for r in kept
        ],
        notes=[
            "Peak is the largest size of `DST.partial` on disk while the convert runs.",
            (
                "The ceiling is fjall's own way to make the same store "
                "(`_native.fjall_create_tables`, built only with the cargo feature `bench`): "
                "N keyspaces of one record each, inserted or ingested (whichever took fewer "
                "CPU seconds), with no reopening of the database, then flushed, fsynced "
                "and closed. Ratio to ceiling: its seconds ÷ the convert's (1: as fast)."
            ),
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--tables", default="500,1500,5000")
    parser.add_argument("--engines", default="fjall3,fjall2")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--dir", type=Path, default=None)
    parser.add_argument("--json", type=Path, default=None)
    parser.add_argument("--variants", default="", help="NAME=PYTHONPATH,... (see above)")
    R.add_argument(parser)
    args = parser.parse_args()
    variants = [tuple(v.split("=", 1)) for v in args.variants.split(",") if v] or [("", None)]
    counts = [int(n) for n in args.tables.split(",")]
    engines = args.engines.split(",")
    work = args.dir or Path(tempfile.mkdtemp(prefix="many-tables-"))
    work.mkdir(parents=True, exist_ok=True)
    results: list[dict[str, Any]] = []
    print(
        f"{'variant':8} {'engine':8} {'tables':>7} {'seconds':>8} {'CPU s':>7} "
        f"{'s/1k tables':>11} {'ceil s/1k':>9} {'ratio':>6} {'CPU ratio':>9} "
        f"{'peak MB':>9} {'final MB':>9} {'peak/final':>10} {'ceil MB':>8} {'ceil peak':>9} ceil way"
    )
    if not HAS_CEILING:
        print("(no ceiling: the extension is built without the cargo feature `bench`)")
    for engine in engines:
        for n in counts:
            src = source(work, n)
            dst = work / f"out-{n}.{engine}"
            ceiling_dst = work / f"ceiling-{n}.{engine}"
            runs: dict[str, list[dict[str, float]]] = {name: [] for name, _ in variants}
            ceilings: list[dict[str, Any]] = []
            for _ in range(args.runs):
                if HAS_CEILING:
                    ceilings.append(ceiling_once(engine, n, ceiling_dst))
                for name, pythonpath in variants:
                    runs[name].append(run_once(src, engine, dst, pythonpath))
            figures = ("seconds", "cpu_seconds", "peak_bytes", "final_bytes")
            ceiling = (
                {k: statistics.median(c[k] for c in ceilings) for k in figures}
                if ceilings
                else None
            )
            for name, _ in variants:
                got = runs[name]
                med = {k: statistics.median(r[k] for r in got) for k in got[0]}
                row = {"variant": name, "engine": engine, "tables": n, "runs": got, **med}
                row.update(ceiling=ceiling, ceiling_runs=ceilings)
                results.append(row)
                c = ceiling or dict.fromkeys(("seconds", "final_bytes", "peak_bytes"), math.nan)
                print(
                    f"{name:8} {engine:8} {n:>7} {med['seconds']:>8.1f} {med['cpu_seconds']:>7.1f} "
                    f"{1000 * med['seconds'] / n:>11.2f} "
                    f"{_shown(1000 * c['seconds'] / n, '.2f', 9)} "
                    f"{_shown(_ratio(ceiling, med, 'seconds'), '.2f', 6)} "
                    f"{_shown(_ratio(ceiling, med, 'cpu_seconds'), '.2f', 9)} "
                    f"{med['peak_bytes'] / 1e6:>9.1f} {med['final_bytes'] / 1e6:>9.1f} "
                    f"{med['peak_bytes'] / max(med['final_bytes'], 1):>10.1f} "
                    f"{_shown(c['final_bytes'] / 1e6, '.1f', 8)} "
                    f"{_shown(c['peak_bytes'] / 1e6, '.1f', 9)} "
                    f"{' '.join(sorted({str(x['way']) for x in ceilings}))}",
                    flush=True,
                )
            shutil.rmtree(dst, ignore_errors=True)
    if args.json:
        args.json.write_text(json.dumps(results, indent=2))
    command = R.command_line("many_tables.py", sys.argv[1:])
    R.write_from(results_table(results, command, f"medians of {args.runs}; {R.machine()}"), args)
    if args.dir is None:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
