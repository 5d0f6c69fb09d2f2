"""Peak memory of `statemigrate convert` per engine pair, as anonymous memory (RssAnon).

Usage:  python benchmarks/rss.py [--sizes 1000000,4000000] [--pairs sqlite-redb,...]
                                 [--runs N] [--dir DIR] [--json FILE]
        python benchmarks/rss.py --value-mb 200 [--pairs sqlite-fjall3,...] [--runs N]

For each pair and size, `statemigrate convert --quiet` runs in a fresh child process
whose wrapper (this file's `_WRAPPER`) polls `/proc/self/status` on a thread every
50 ms and reports the peak RssAnon (the process's own memory: heap, caches, buffers)
and VmHWM (the peak of total RSS, exact, kept by the kernel). Total RSS also counts
file mappings, which are page cache, not the tool's memory: LMDB maps its whole file,
so a read of an LMDB store shows the store's size in RSS. That is why RssAnon is the
measure; a 50 ms poll may miss a spike shorter than that.

The source stores are written once per engine and size by the workload generator that
`benchmarks/run.py` uses (`statemigrate.testing.workload.write_workload`: ~316-byte
events, 200 versioned 2 KB settings, odd keys) and kept in --dir when it is given.
Where the destination cannot hold every odd key (LMDB: no empty key, at most 511
bytes) the convert leaves out that table of eight records (`--tables events,settings`).
The seconds are the convert's own (in the child, interpreter start-up excluded), wall
clock and CPU (user + system, every thread); with ``--runs N`` every figure is the
median of N runs (the sizes taken in turn within a round, so that the machine's load
falls on both alike) and the spread of RssAnon is shown. On a shared machine the CPU
ratio between sizes says more about linear time than the wall clock. Growth and time
ratios are each pair's largest size against its smallest.

With ``--value-mb M`` each source holds one table of one record whose value is M MiB of
random bytes (nothing compresses it), written by the engine's own writer, and the
default pairs are SQLite into every engine (SQLite into SQLite is the native copy).
The table then also shows each peak as a multiple of the value: what one huge record
costs in memory beyond the batch budget.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

import results as R

from statemigrate.model import TableInfo
from statemigrate.registry import get_engine
from statemigrate.testing.stores import write_store
from statemigrate.testing.workload import EVENTS, SETTINGS, odd_records, write_workload

PAIRS = (
    ("sqlite", "redb"),
    ("redb", "sqlite"),
    ("redb", "lmdb"),
    ("lmdb", "redb"),
    ("sqlite", "rocksdb"),
    ("sqlite", "jsonl"),
)
SUFFIX = {
    "sqlite": ".sqlite",
    "redb": ".redb",
    "lmdb": ".lmdb",
    "rocksdb": ".rocksdb",
    "jsonl": ".jsonl",
}


# One huge value (--value-mb): SQLite into every engine the README's memory table names.
HUGE_PAIRS = tuple(
    ("sqlite", dst) for dst in ("sqlite", "lmdb", "rocksdb", "redb", "fjall2", "fjall3", "jsonl")
)


def _suffix(engine: str) -> str:
    """The store suffix of ``engine`` (its first declared one where not listed above)."""
    return SUFFIX.get(engine) or get_engine(engine).suffixes[0]


# Runs in the child: argv = [result file, statemigrate arguments...].
_WRAPPER = r"""
import json, os, sys, threading, time

def status():
    out = {}
    with open("/proc/self/status") as f:
        for line in f:
            key, _, rest = line.partition(":")
            if key in ("RssAnon", "VmHWM", "RssFile"):
                out[key] = int(rest.split()[0]) * 1024
    return out

peak = {"RssAnon": 0, "RssFile": 0}
done = threading.Event()

def sample():
    s = status()
    for k in peak:
        peak[k] = max(peak[k], s[k])

def poll():
    while not done.wait(0.05):
        sample()

result_file, args = sys.argv[1], sys.argv[2:]
from statemigrate.cli import main
sample()
threading.Thread(target=poll, daemon=True).start()
t0, c0 = time.perf_counter(), os.times()
try:
    main.main(args=args, prog_name="statemigrate")
    code = 0
except SystemExit as exc:
    code = exc.code if isinstance(exc.code, int) else 1
seconds = time.perf_counter() - t0
c1 = os.times()
cpu = (c1.user - c0.user) + (c1.system - c0.system)
done.set()
sample()
with open(result_file, "w") as f:
    json.dump({"exit": code, "seconds": seconds, "cpu_seconds": cpu, "rss_anon": peak["RssAnon"],
               "rss_file": peak["RssFile"], "vm_hwm": status()["VmHWM"]}, f)
"""


def remove(path: Path) -> None:
    """Remove a store (a file or a directory) and what a convert leaves beside it."""
    for p in [path, *path.parent.glob(path.name + ".*")]:
        if p.is_dir():
            shutil.rmtree(p)
        else:
            p.unlink(missing_ok=True)


def source_store(work: Path, engine: str, n: int, value_mb: int | None = None) -> Path:
    """The workload with ``n`` events in ``engine`` (or, with ``value_mb``, one record of
    that many MiB), written once (kept across runs)."""
    name = f"src-{n}" if value_mb is None else f"src-value-{value_mb}mb"
    path = work / f"{name}{_suffix(engine)}"
    done = path.with_name(path.name + ".done")
    if not done.exists():
        remove(path)
        if value_mb is None:
            print(f"writing {n:,} events to {path}", file=sys.stderr, flush=True)
            write_workload(get_engine(engine), path, n)
        else:
            print(f"writing one {value_mb} MiB value to {path}", file=sys.stderr, flush=True)
            record = (b"huge", os.urandom(value_mb << 20))
            write_store(get_engine(engine), path, {TableInfo("huge"): [record]})
        done.touch()
    return path


def measure(
    src_engine: str, src: Path, dst_engine: str, dst: Path, huge: bool = False
) -> dict[str, float]:
    """One `statemigrate convert` in a child process: its peaks and seconds."""
    remove(dst)
    result = dst.with_name(dst.name + ".result.json")
    args = ["convert", "--quiet", f"{src_engine}:{src}", f"{dst_engine}:{dst}"]
    if not huge and not set(odd_records(get_engine(src_engine))) <= set(
        odd_records(get_engine(dst_engine))
    ):
        # The destination cannot hold every odd key (LMDB: no empty key): leave out
        # that table of eight records rather than have the convert refuse.
        args[1:1] = ["--tables", f"{EVENTS.name},{SETTINGS.name}"]
    proc = subprocess.run(
        [sys.executable, "-c", _WRAPPER, str(result), *args],
        check=False,
        capture_output=True,
        text=True,
    )
    try:
        out: dict[str, float] = json.loads(result.read_text())
    except FileNotFoundError:
        out = {"exit": proc.returncode}
    result.unlink(missing_ok=True)
    remove(dst)
    if proc.returncode != 0 or out["exit"] != 0:
        raise SystemExit(f"convert {src} -> {dst} failed ({out['exit']}):\n{proc.stderr}")
    return out


def memory_table(rows: list[dict[str, Any]], command: str, conditions: str) -> R.Table:
    """The peaks of each pair and size as the data file ``results/memory.json``.

    Args:
        rows: each run's ``pair``, ``events``, ``rss_anon`` and ``vm_hwm`` (bytes),
            ``seconds`` and ``cpu_seconds``, in the order measured (each pair's
            smallest size first).
        command: the command line that measured them.
        conditions: how (runs, machine).
    """
    first: dict[str, dict[str, Any]] = {}
    shown = []
    for row in rows:
        base = first.setdefault(row["pair"], row)
        later = base is not row
        shown.append([
            R.pair(row["pair"]), row["events"], row["rss_anon"] / 2**20, row["vm_hwm"] / 2**20,
            row["seconds"], row["cpu_seconds"],
            (row["rss_anon"] / base["rss_anon"] - 1) * 100 if later else None,
            row["cpu_seconds"] / base["cpu_seconds"] if later else None,
        ])  # fmt: skip
    return R.Table(
        name="memory",
        title="Peak memory of a convert, 1M and 4M events",
        command=command,
        conditions=conditions,
        columns=[
            R.Column("pair", align="left"),
            R.Column("events", ","),
            R.Column("peak RssAnon", ",.0f", " MiB"),
            R.Column("peak RSS", ",.0f", " MiB"),
            R.Column("seconds", ".1f"),
            R.Column("CPU seconds", ".1f"),
            R.Column("RssAnon growth", "+.0f", " %"),
            R.Column("CPU time ratio", ".1f", "×"),
        ],
        rows=shown,
        notes=[
            (
                "RssAnon is the process's own memory (heap, caches, buffers); peak RSS also "
                "counts file mappings (LMDB maps its whole file), which are page cache."
            ),
            (
                "Growth and the CPU time ratio are each pair's 4M-event run against its 1M "
                "one. Targets: RssAnon under 300 MB, and within 10 % from 1M to 4M."
            ),
        ],
    )


def one_value_table(
    rows: list[dict[str, Any]], value_mb: int, command: str, conditions: str
) -> R.Table:
    """The peaks with one huge value as the data file ``results/memory-one-value.json``."""
    return R.Table(
        name="memory-one-value",
        title=f"Peak memory of a convert of one {value_mb} MiB value",
        command=command,
        conditions=conditions,
        columns=[
            R.Column("pair", align="left"),
            R.Column("peak RssAnon", ",.0f", " MiB"),
            R.Column("× the value", ".2f"),
        ],
        rows=[
            [R.pair(r["pair"]), r["rss_anon"] / 2**20, r["rss_anon"] / 2**20 / value_mb]
            for r in rows
        ],
        notes=["The whole convert, verification included; SQLite → SQLite is the native copy."],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", default="1000000,4000000", help="events per store, comma-separated")
    ap.add_argument(
        "--pairs",
        default=",".join(f"{a}-{b}" for a, b in PAIRS),
        help="SRC-DST engine pairs, comma-separated",
    )
    ap.add_argument("--runs", type=int, default=1, help="runs per pair and size (medians)")
    ap.add_argument("--dir", default=None, help="keep the source stores here (reused)")
    ap.add_argument("--json", default=None, help="also write the results here")
    ap.add_argument(
        "--value-mb", type=int, default=None, help="one record of this many MiB instead of events"
    )
    R.add_argument(ap)
    args = ap.parse_args()
    huge = args.value_mb
    sizes = [int(x) for x in args.sizes.split(",") if x] if huge is None else [1]
    if huge is not None and args.pairs == ap.get_default("pairs"):
        args.pairs = ",".join(f"{a}-{b}" for a, b in HUGE_PAIRS)
    pairs = [tuple(p.split("-", 1)) for p in args.pairs.split(",") if p]
    work = Path(args.dir or tempfile.mkdtemp(prefix="sm-rss-"))
    work.mkdir(parents=True, exist_ok=True)
    rows = []
    try:
        for src_engine, dst_engine in pairs:
            runs: dict[int, list[dict[str, float]]] = {n: [] for n in sizes}
            for _ in range(args.runs):
                for n in sizes:
                    src = source_store(work, src_engine, n, huge)
                    dst = work / f"out-{n}{_suffix(dst_engine)}"
                    m = measure(src_engine, src, dst_engine, dst, huge is not None)
                    m = {**m, "load": os.getloadavg()[0]}
                    runs[n].append(m)
                    print(
                        f"{src_engine}->{dst_engine} {n:,}: RssAnon {m['rss_anon'] / 2**20:.0f} MiB, "
                        f"RSS {m['vm_hwm'] / 2**20:.0f} MiB, {m['seconds']:.1f} s "
                        f"({m['cpu_seconds']:.1f} s CPU), load {m['load']:.1f}",
                        file=sys.stderr,
                        flush=True,
                    )
            for n in sizes:
                got = runs[n]
                row: dict[str, Any] = {"pair": f"{src_engine}->{dst_engine}", "events": n}
                for key in ("rss_anon", "vm_hwm", "seconds", "cpu_seconds", "exit"):
                    row[key] = statistics.median(m[key] for m in got)
                row["load_average"] = statistics.median(m["load"] for m in got)
                row["rss_anon_runs"] = [m["rss_anon"] for m in got]
                rows.append(row)
    finally:
        if not args.dir:
            shutil.rmtree(work, ignore_errors=True)
    first: dict[str, dict[str, float]] = {}
    each = "one run each" if args.runs == 1 else f"medians of {args.runs} runs"
    print(f"\n{os.cpu_count()} cores (shared); {each}\n")
    command = R.command_line("rss.py", sys.argv[1:])
    load = statistics.median(r["load_average"] for r in rows)
    conditions = f"{each}; {os.cpu_count()} cores, load average {load:.1f}"
    if huge is not None:
        print(
            "| pair | value MiB | peak RssAnon MiB | x value | peak RSS MiB | x value | seconds |"
        )
        print("|---|---:|---:|---:|---:|---:|---:|")
        for row in rows:
            anon, hwm = row["rss_anon"] / 2**20, row["vm_hwm"] / 2**20
            print(
                f"| {row['pair']} | {huge} | {anon:.0f} | {anon / huge:.2f} | {hwm:.0f} "
                f"| {hwm / huge:.2f} | {row['seconds']:.1f} |"
            )
        if args.json:
            Path(args.json).write_text(json.dumps({"rows": rows, "value_mb": huge}, indent=2))
        R.write_from(one_value_table(rows, huge, command, conditions), args)
        return
    print(
        "| pair | events | peak RssAnon MiB | peak RSS MiB | seconds | CPU seconds "
        "| RssAnon growth | time ratio (CPU) | RssAnon of each run MiB |"
    )
    print("|---|---:|---:|---:|---:|---:|---:|---:|---|")
    for row in rows:
        base = first.setdefault(row["pair"], row)
        row["rss_anon_growth_pct"] = (row["rss_anon"] / base["rss_anon"] - 1) * 100
        row["time_ratio"] = row["seconds"] / base["seconds"]
        row["cpu_ratio"] = row["cpu_seconds"] / base["cpu_seconds"]
        growth, ratio = (
            (
                f"{row['rss_anon_growth_pct']:+.0f} %",
                f"{row['time_ratio']:.1f}x ({row['cpu_ratio']:.1f}x)",
            )
            if base is not row
            else ("", "")
        )
        print(
            f"| {row['pair']} | {row['events']:,} | {row['rss_anon'] / 2**20:.0f} | "
            f"{row['vm_hwm'] / 2**20:.0f} | {row['seconds']:.1f} | {row['cpu_seconds']:.1f} "
            f"| {growth} | {ratio} | {', '.join(f'{r / 2**20:.0f}' for r in row['rss_anon_runs'])} |"
        )
    if args.json:
        env = {k: v for k, v in os.environ.items() if k.startswith("STATEMIGRATE_")}
        Path(args.json).write_text(json.dumps({"rows": rows, "env": env}, indent=2))
    R.write_from(memory_table(rows, command, conditions), args)


if __name__ == "__main__":
    main()
