"""Benchmark: an in-place upgrade through the re-key and rewrite revisions, against convert.

    python benchmarks/bench_upgrade.py [--events 1000000] [--engines sqlite,rocksdb] [--json]

For each engine: an example store at revision 0001 holding N events (plus a few
settings) is made once; then, each in a fresh child process, timed:

- ``convert`` of that store to a new store of the same engine (read, write, verify);
- ``upgrade --to 0003`` of a copy of it: the re-key (0002, an external sort) and the
  split with a JSON-to-binary rewrite (0003), each atomic, with the store digest
  before and after as the CLI reports it; and the same without digests.

Reported: seconds, the ratio upgrade/convert (target <= 1.5) and each child's peak
RSS (target < 300 MB). Ratios, not absolute times, are what compare across machines.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "schemas" / "example"

CHILD = r"""
import json, resource, sys, time
args = json.loads(sys.argv[1])
t = time.perf_counter()
if args["what"] == "convert":
    from statemigrate.pipeline import convert
    convert(args["src"], args["dst"])
else:
    from statemigrate.upgrade import upgrade
    upgrade(args["src"], args["schema"], to="0003", digests=args["digests"])
seconds = time.perf_counter() - t
print(json.dumps({"seconds": seconds, "peak_rss_mb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024}))
"""


def child(**args: object) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(args)], check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def copy(engine: str, src: Path, dst: Path) -> None:
    if src.is_dir():
        shutil.copytree(src, dst)
    else:
        shutil.copy2(src, dst)


def bench(engine: str, events: int, tmp: Path) -> dict:
    sys.path.insert(0, str(EXAMPLE))
    import seed  # schemas/example/seed.py

    base = tmp / f"base.{engine}"
    t = time.perf_counter()
    seed.seed(f"{engine}:{base}", events)
    made = time.perf_counter() - t
    conv = child(what="convert", src=f"{engine}:{base}", dst=f"{engine}:{tmp / f'conv.{engine}'}")
    runs = {}
    for digests in (True, False):
        work = tmp / f"up-{digests}.{engine}"
        copy(engine, base, work)
        runs[digests] = child(
            what="upgrade", src=f"{engine}:{work}", schema=str(EXAMPLE), digests=digests
        )
    return {
        "engine": engine,
        "events": events,
        "seed_seconds": round(made, 2),
        "convert_seconds": round(conv["seconds"], 2),
        "convert_peak_rss_mb": round(conv["peak_rss_mb"]),
        "upgrade_seconds": round(runs[True]["seconds"], 2),
        "upgrade_peak_rss_mb": round(runs[True]["peak_rss_mb"]),
        "ratio": round(runs[True]["seconds"] / conv["seconds"], 2),
        "upgrade_no_digest_seconds": round(runs[False]["seconds"], 2),
        "ratio_no_digest": round(runs[False]["seconds"] / conv["seconds"], 2),
        "upgrade_no_digest_peak_rss_mb": round(runs[False]["peak_rss_mb"]),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=1_000_000)
    parser.add_argument("--engines", default="sqlite,rocksdb")
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    rows = []
    for engine in args.engines.split(","):
        with tempfile.TemporaryDirectory(prefix="bench-upgrade-") as tmp:
            rows.append(bench(engine, args.events, Path(tmp)))
    if args.json:
        print(json.dumps(rows, indent=2))
        return
    print(
        f"{'engine':<8} {'events':>9} {'convert s':>9} {'upgrade s':>9} {'ratio':>6} "
        f"{'no-digest s':>11} {'ratio':>6} {'peak RSS MB':>11}"
    )
    for r in rows:
        print(
            f"{r['engine']:<8} {r['events']:>9,} {r['convert_seconds']:>9} {r['upgrade_seconds']:>9} "
            f"{r['ratio']:>6} {r['upgrade_no_digest_seconds']:>11} {r['ratio_no_digest']:>6} "
            f"{r['upgrade_peak_rss_mb']:>11}"
        )


if __name__ == "__main__":
    main()
