"""Benchmark: an in-place upgrade through the re-key and rewrite revisions, against convert.

    python benchmarks/bench_upgrade.py [--events 1000000] [--engines sqlite,rocksdb]
                                       [--runs 1] [--json]

For each engine: an example store at revision 0001 holding N events (plus a few
settings) is made once; then, each in a fresh child process, timed (medians of
``--runs``):

- ``convert`` of that store to a new store of the same engine (read, write, verify):
  the engine's own copy where it has one, and the batch loop (every table named);
- the revisions' own functions alone (0002's ``seq_first`` per record, 0003's
  ``to_payload`` and ``to_header`` per batch) over the store's events, read
  beforehand and not counted;
- ``upgrade --to 0003`` of a copy of it: the re-key (0002, an external sort) and the
  split with a JSON-to-binary rewrite (0003), each atomic, with the store digest
  before and after as the CLI reports it; and the same without digests.

Reported: seconds, issue 13's two ratios (upgrade ÷ (batch-loop convert + the functions),
target <= 1.5; upgrade ÷ batch-loop convert, target <= 2), the ratio to the engine's own
copy, and each child's peak RSS (target < 300 MB). Ratios, not absolute times, are what
compare across machines.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import results as R
from timing import settle

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "schemas" / "example"

CHILD = r"""
import json, resource, sys, time
args = json.loads(sys.argv[1])
t = time.perf_counter()
if args["what"] == "convert":
    from statemigrate.api import convert
    convert(args["src"], args["dst"], tables=args.get("tables"))
elif args["what"] == "functions":
    import importlib.util
    from pathlib import Path
    from statemigrate.registry import resolve_source

    def load(name):
        spec = importlib.util.spec_from_file_location(name, Path(args["schema"]) / "versions" / name)
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        return module

    rekey = load("0002_rekey_events_by_seq.py").seq_first
    split = load("0003_split_event_payloads.py")
    eng, path = resolve_source(args["src"])
    with eng.open_reader(path) as reader:
        events = next(t for t in reader.tables() if t.name == "events")
        batches = list(reader.read_batches(events))
    t = time.perf_counter()
    for batch in batches:
        [rekey(r) for r in batch]
        split.to_payload(batch)
        split.to_header(batch)
else:
    from statemigrate.api import upgrade
    upgrade(args["src"], args["schema"], to="0003", digests=args["digests"])
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(**args: object) -> dict:
    settle()
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def copy(engine: str, src: Path, dst: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copy2(src, dst)


def median_of(runs: int, make: Callable[[], dict]) -> dict:
    """The child run with the median time of ``runs`` (its peak RSS with it)."""
    results = sorted((make() for _ in range(runs)), key=lambda r: r["seconds"])
    return results[len(results) // 2]


def bench(engine: str, events: int, tmp: Path, runs: int) -> dict:
    sys.path.insert(0, str(EXAMPLE))
    import seed  # schemas/example/seed.py

    base = tmp / f"base.{engine}"
    t = time.perf_counter()
    seed.seed(f"{engine}:{base}", events)
    made = time.perf_counter() - t
    conv_dst = tmp / f"conv.{engine}"

    def convert(tables: list[str] | None) -> dict:
        remove(conv_dst)
        return child(
            what="convert", src=f"{engine}:{base}", dst=f"{engine}:{conv_dst}", tables=tables
        )

    from statemigrate.registry import get_engine

    with get_engine(engine).open_reader(base) as reader:
        names = [t.name for t in reader.tables()]
    conv = median_of(runs, lambda: convert(None))
    batch = median_of(runs, lambda: convert(names))
    functions = median_of(
        runs, lambda: child(what="functions", src=f"{engine}:{base}", schema=str(EXAMPLE))
    )
    up = {}
    for digests in (True, False):
        work = tmp / f"up-{digests}.{engine}"

        def upgrade(work: Path = work, digests: bool = digests) -> dict:
            remove(work)
            copy(engine, base, work)
            return child(
                what="upgrade", src=f"{engine}:{work}", schema=str(EXAMPLE), digests=digests
            )

        up[digests] = median_of(runs, upgrade)
    s = {k: v["seconds"] for k, v in (("up", up[True]), ("nod", up[False]), ("batch", batch))}
    return {
        "engine": engine,
        "events": events,
        "runs": runs,
        "seed_seconds": round(made, 2),
        "convert_seconds": round(conv["seconds"], 2),
        "convert_batch_seconds": round(batch["seconds"], 2),
        "functions_seconds": round(functions["seconds"], 2),
        "convert_peak_rss_mb": round(batch["peak_rss_mb"]),
        "upgrade_seconds": round(s["up"], 2),
        "upgrade_peak_rss_mb": round(up[True]["peak_rss_mb"]),
        "upgrade_no_digest_seconds": round(s["nod"], 2),
        "upgrade_no_digest_peak_rss_mb": round(up[False]["peak_rss_mb"]),
        # issue 13's targets: <= 1.5 and <= 2; the upgrade as the CLI runs it (digests
        # before and after, as a convert verifies), and with --no-digest
        "ratio_to_batch_plus_functions": round(s["up"] / (s["batch"] + functions["seconds"]), 2),
        "ratio_to_batch": round(s["up"] / s["batch"], 2),
        "no_digest_ratio_to_batch_plus_functions": round(
            s["nod"] / (s["batch"] + functions["seconds"]), 2
        ),
        "no_digest_ratio_to_batch": round(s["nod"] / s["batch"], 2),
        "ratio_to_own_copy": round(s["up"] / conv["seconds"], 2),
    }


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def results_table(rows: list[dict[str, Any]], command: str, conditions: str) -> R.Table:
    """The rows of :func:`bench`, one per engine, as the data file ``results/upgrade.json``."""
    return R.Table(
        name="upgrade",
        title="Schema upgrade 0001 → 0003 against a convert of the same store",
        command=command,
        conditions=conditions,
        columns=[
            R.Column("engine", align="left"),
            R.Column("convert, batch loop", ".2f", " s"),
            R.Column("own copy", ".2f", " s"),
            R.Column("functions alone", ".2f", " s"),
            R.Column("upgrade", ".2f", " s"),
            R.Column("`--no-digest`", ".2f", " s"),
            R.Column("÷ (convert + functions)", ".2f"),
            R.Column("÷ convert", ".2f"),
            R.Column("peak RSS", ",.0f", " MB"),
        ],
        rows=[
            [
                R.NAMES.get(r["engine"], r["engine"]),
                r["convert_batch_seconds"],
                r["convert_seconds"],
                r["functions_seconds"],
                r["upgrade_seconds"],
                r["upgrade_no_digest_seconds"],
                r["ratio_to_batch_plus_functions"],
                r["ratio_to_batch"],
                r["upgrade_peak_rss_mb"],
            ]
            for r in rows
        ],
        notes=[
            (
                "Targets: the upgrade at most 1.5 × (a batch-loop convert + the revisions' "
                "functions alone), and at most 2 × the convert. The upgrade takes digests "
                "before and after, as the command line does."
            )
        ],
    )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--engines", default="sqlite,rocksdb")
    parser.add_argument(
        "--runs", type=int, default=1, help="runs of every job (the median is kept)"
    )
    parser.add_argument("--json", action="store_true")
    R.add_argument(parser)
    args = parser.parse_args()
    rows = []
    for engine in args.engines.split(","):
        with tempfile.TemporaryDirectory(prefix="bench-upgrade-") as tmp:
            rows.append(bench(engine, args.events, Path(tmp), args.runs))
    conditions = (
        f"{args.events:,} events, medians of {args.runs}, each job a fresh process timed "
        f"inside it; {R.machine()}"
    )
    dropped = tuple(o for o in R.WHERE_OPTIONS if o != "--json")  # a flag here
    command = R.command_line("bench_upgrade.py", sys.argv[1:], dropped)
    R.write_from(results_table(rows, command, conditions), args)
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    for r in rows:
        print(f"{r['engine']}: {r['events']:,} events, medians of {r['runs']}")
        for key, value in r.items():
            if key not in ("engine", "events", "runs"):
                print(f"  {key:36} {value}")


if __name__ == "__main__":
    main()
