"""Issue 13's targets, each measured in one run and shown as met or missed.

    python benchmarks/scorecard.py [--n 1000000] [--runs 3] [--extra-n 200000]
                                   [--helix-n 20000] [--only same-engine,upgrade,drivers,verify]
                                   [--out DIR] [--json FILE]

Runs, one after the other on this machine (never beside the test suite):

- ``bench_native_copy.py``: each same-engine convert against its bounds, verified at most
  1.2 x (the engine's fastest copy + the slower digest scan), ``--no-verify`` at most
  1.2 x (its command-line copy + ``statemigrate --version``); redb 2 -> 3 where the
  versioned settings are spelt anew (the batch loop) at most 2.5 x (the fastest copy +
  redb 2.6's ``Database::upgrade``);
- ``bench_upgrade.py``: ``upgrade 0001 -> 0003`` at most 1.5 x (a batch-loop convert +
  the revisions' functions alone) and at most 2 x the convert;
- ``engines_extra.py``: each driver engine's verified convert from SQLite at least 0.8 of
  its driver's bulk load + scan (HelixDB at ``--helix-n``: it loads at thousands of
  records per second);
- here: ``verify`` of a SQLite store against a RocksDB store of the same workload, and
  of an LMDB store against a redb one, at least 0.9 of the slower of the two drivers'
  own full scans (py-lmdb's cursor; for redb, which has no other Python driver, the
  project's binding read in batches), medians of ``--runs``.

Each script's own output and JSON are kept in ``--out`` (a temporary directory unless
given); with ``--results DIR`` each script also writes its own data file there
(``same-engine``, ``upgrade``, ``drivers``, ``drivers-helixdb``) beside ``scorecard``. The figures are ratios of jobs timed in the same run: they compare across
machines where seconds do not. Peak memory is ``rss.py``'s (README "Memory").
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
from functools import partial
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

import results as R
from timing import settle

PARTS = ("same-engine", "upgrade", "drivers", "verify")


def script(name: str, args: list[str], out: Path) -> str:
    """Run ``benchmarks/<name>`` with ``args``; its output is kept in ``out/<name>.log``."""
    print(f"running {name} {' '.join(args)}", file=sys.stderr, flush=True)
    t = time.perf_counter()
    done = subprocess.run(
        [sys.executable, str(HERE / name), *args], capture_output=True, text=True, check=False
    )
    (out / f"{name}.log").write_text(done.stdout + done.stderr)
    if done.returncode != 0:
        sys.exit(f"{name} failed (exit {done.returncode}): see {out / f'{name}.log'}")
    print(f"  {time.perf_counter() - t:.0f} s", file=sys.stderr, flush=True)
    return done.stdout


def row(target: str, figure: float, bound: float, at_most: bool, what: str) -> dict[str, Any]:
    met = figure <= bound if at_most else figure >= bound
    sign = "≤" if at_most else "≥"
    return {
        "target": target,
        "what": what,
        "figure": round(figure, 2),
        "bound": f"{sign} {bound}",
        "met": met,
    }


def passed_on(results: str | None, name: str | None = None) -> list[str]:
    """``--results DIR`` for a script (and ``--results-name``), when the scorecard got it:
    one run then writes the data file of every table it measured, beside its own."""
    if results is None:
        return []
    return ["--results", results, *(["--results-name", name] if name else [])]


def same_engine(n: int, runs: int, out: Path, results: str | None) -> list[dict[str, Any]]:
    path = out / "native_copy.json"
    args = ["--n", str(n), "--runs", str(runs), "--json", str(path), *passed_on(results)]
    script("bench_native_copy.py", args, out)
    got = json.loads(path.read_text())
    rows = []
    for engine in ("sqlite", "lmdb", "rocksdb", "redb", "redb-2to3"):
        if engine in got:
            r = got[engine]
            what = R.pair(f"{engine}->{engine}") if engine != "redb-2to3" else "redb 2 → 3"
            rows.append(row("same-engine verified ÷ bound", r["verified ratio"], 1, True, what))
            rows.append(
                row("same-engine `--no-verify` ÷ bound", r["--no-verify ratio"], 1, True, what)
            )
    if "redb-2to3-respelt" in got:
        r = got["redb-2to3-respelt"]
        what = "redb 2 → 3, re-spelt (versioned settings: the batch loop)"
        figure = r["convert ÷ (copy + upgrade)"]
        rows.append(row("convert ÷ (copy + `Database::upgrade`)", figure, 2.5, True, what))
    return rows


def upgrade(n: int, runs: int, out: Path, results: str | None) -> list[dict[str, Any]]:
    args = ["--events", str(n), "--runs", str(runs), "--json", *passed_on(results)]
    text = script("bench_upgrade.py", args, out)
    got = json.loads(text)
    (out / "upgrade.json").write_text(json.dumps(got, indent=2))
    rows = []
    for r in got:
        what = f"{R.NAMES.get(r['engine'], r['engine'])}, {r['events']:,} events"
        rows.append(
            row(
                "upgrade ÷ (convert + functions)",
                r["ratio_to_batch_plus_functions"],
                1.5,
                True,
                what,
            )
        )
        rows.append(row("upgrade ÷ convert", r["ratio_to_batch"], 2, True, what))
    return rows


def drivers(
    n: int, helix_n: int, runs: int, out: Path, results: str | None
) -> list[dict[str, Any]]:
    rows = []
    for engines, size, name in (
        ("lmdb,libsql,turso,jsonl", n, None),
        ("helixdb", helix_n, "drivers-helixdb"),
    ):
        path = out / f"drivers-{engines.split(',')[0]}.json"
        script(
            "engines_extra.py",
            [
                *["--n", str(size), "--engines", engines, "--runs", str(runs)],
                *["--json", str(path), *passed_on(results, name)],
            ],
            out,
        )
        got = json.loads(path.read_text())
        for engine in engines.split(","):
            r = got[engine]
            what = f"{R.pair(f'sqlite->{engine}')}, {r['records']:,} records"
            rows.append(row("convert ÷ (driver load + scan)", r["ratio"], 0.8, False, what))
    return rows


def redb_scan_count(path: Path) -> int:
    """Every record of a redb file, read in batches by the project's binding (redb has
    no other Python driver): the tool's own scan, without digests."""
    from statemigrate.engines.redb import RedbEngine

    n = 0
    with RedbEngine.open_reader(path) as reader:
        for table in reader.tables():
            for batch in reader.read_batches(table):
                n += len(batch)
    return n


def verify(n: int, runs: int, out: Path) -> list[dict[str, Any]]:
    sys.path.insert(0, str(HERE))
    import baselines as B
    import engines_extra as E

    from statemigrate import convert as convert_store
    from statemigrate import verify as verify_stores
    from statemigrate.registry import get_engine
    from statemigrate.testing.workload import write_workload

    pairs: list[tuple[str, str, Callable[[Path], int], Callable[[Path], int]]] = [
        ("sqlite", "rocksdb", B.sqlite_scan_count, B.rocksdb_scan_count),
        ("lmdb", "redb", E.lmdb_scan_count, redb_scan_count),
    ]
    rows = []
    for ea, eb, scan_a, scan_b in pairs:
        print(f"running verify {ea} vs {eb} at {n:,} events", file=sys.stderr, flush=True)
        work = Path(tempfile.mkdtemp(prefix="sm-scorecard-", dir=out))
        try:
            a, b = work / f"a.{ea}", work / f"b.{eb}"
            write_workload(get_engine(ea), a, n)
            # B holds A's records: the workload's odd keys are fitted to each engine's limits
            convert_store(str(a), f"{eb}:{b}")
            jobs: list[tuple[str, Callable[[], Any]]] = [
                (f"{ea} scan", partial(scan_a, a)),
                (f"{eb} scan", partial(scan_b, b)),
                ("verify", partial(verify_stores, str(a), str(b), workers=2)),  # as the CLI
                ("verify, one process", partial(verify_stores, str(a), str(b))),
            ]
            times: dict[str, list[float]] = {name: [] for name, _ in jobs}
            for _ in range(runs):
                for name, job in jobs:
                    settle()
                    t = time.perf_counter()
                    result = job()
                    times[name].append(time.perf_counter() - t)
                    if name.startswith("verify"):
                        assert result.equal, result.differences[:3]
            m = {k: statistics.median(v) for k, v in times.items()}
            (out / f"verify-{ea}-{eb}.json").write_text(
                json.dumps({"n": n, "runs": runs, **m}, indent=2)
            )
        finally:
            shutil.rmtree(work, ignore_errors=True)
        sa, sb = m[f"{ea} scan"], m[f"{eb} scan"]
        what = (
            f"{ea} vs {eb}, {n:,} events ({m['verify']:.2f} s with workers=2, as the CLI; "
            f"{m['verify, one process']:.2f} s in one process; scans {sa:.2f} s, {sb:.2f} s)"
        )
        rows.append(row("slower scan ÷ `verify`", max(sa, sb) / m["verify"], 0.9, False, what))
    return rows


def results_table(rows: list[dict[str, Any]], command: str, conditions: str) -> R.Table:
    """The targets, met or missed, as the data file ``results/scorecard.json``."""
    met = sum(r["met"] for r in rows)
    return R.Table(
        name="scorecard",
        title="The performance targets, met or missed",
        command=command,
        conditions=conditions,
        columns=[
            R.Column("target", align="left"),
            R.Column("job", align="left"),
            R.Column("ratio", ".2f"),
            R.Column("bound", align="left"),
            R.Column("", align="left"),
        ],
        rows=[
            [r["target"], r["what"], r["figure"], r["bound"], "met" if r["met"] else "**missed**"]
            for r in rows
        ],
        notes=[f"{met} of {len(rows)} targets met."],
    )


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument(
        "--n", type=int, default=1_000_000, help="events (same-engine, upgrade, verify)"
    )
    ap.add_argument("--runs", type=int, default=3, help="runs of every job (medians)")
    ap.add_argument("--extra-n", type=int, default=200_000, help="events for the driver engines")
    ap.add_argument("--helix-n", type=int, default=20_000, help="events for HelixDB")
    ap.add_argument("--only", default=",".join(PARTS), help=f"some of {', '.join(PARTS)}")
    ap.add_argument("--out", default=None, help="keep each script's output and JSON here")
    ap.add_argument("--json", default=None, help="also write the rows here")
    R.add_argument(ap)
    args = ap.parse_args()
    parts = [p for p in args.only.split(",") if p]
    unknown = set(parts) - set(PARTS)
    if unknown:
        ap.error(f"unknown parts: {', '.join(sorted(unknown))} (of {', '.join(PARTS)})")
    out = Path(args.out or tempfile.mkdtemp(prefix="sm-scorecard-"))
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    if "same-engine" in parts:
        rows += same_engine(args.n, args.runs, out, args.results)
    if "upgrade" in parts:
        rows += upgrade(args.n, args.runs, out, args.results)
    if "drivers" in parts:
        rows += drivers(args.extra_n, args.helix_n, args.runs, out, args.results)
    if "verify" in parts:
        rows += verify(args.n, args.runs, out)
    print("| target | job | ratio | bound | |")
    print("|---|---|---:|---|---|")
    for r in rows:
        mark = "met" if r["met"] else "**missed**"
        print(f"| {r['target']} | {r['what']} | {r['figure']:.2f} | {r['bound']} | {mark} |")
    met = sum(r["met"] for r in rows)
    print(f"\n{met} of {len(rows)} targets met; each script's output is in {out}")
    if args.json:
        Path(args.json).write_text(json.dumps(rows, indent=2))
    conditions = f"medians of {args.runs}; {R.machine()}"
    R.write_from(
        results_table(rows, R.command_line("scorecard.py", sys.argv[1:]), conditions), args
    )


if __name__ == "__main__":
    main()
