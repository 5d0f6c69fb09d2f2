"""Where a verified convert from SQLite spends its time: cProfile of one in-process run.

Usage:  python benchmarks/profile_convert.py ENGINE [--n 100000] [--top 18] [--sort tottime]

The source is the workload generator's SQLite store (``write_workload``: ~316-byte
events, 200 versioned 2 KB settings); its ``events`` and ``settings`` tables are
converted to ``ENGINE`` once to warm the caches and the driver's import, then once more
under cProfile. The wall time of the profiled run is printed first, then the functions
with the most time of their own: the driver's methods (``executemany``, ``fetchall``
…) against statemigrate's (the source read ``take_batch``, ``batch_digest``, the
syncs). This is the profile behind the driver rows of the scorecard
(``engines_extra.py``: convert ÷ the driver's own load + scan).
"""

from __future__ import annotations

import argparse
import cProfile
import pstats
import shutil
import tempfile
import time
from pathlib import Path

from statemigrate import convert
from statemigrate.registry import get_engine
from statemigrate.testing.workload import write_workload

TABLES = ["events", "settings"]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("engine", help="the destination engine (libsql, turso, helixdb, lmdb …)")
    ap.add_argument("--n", type=int, default=100_000, help="events in the source")
    ap.add_argument("--top", type=int, default=18, help="functions listed")
    ap.add_argument("--sort", default="tottime", help="pstats sort key (tottime, cumtime)")
    args = ap.parse_args()
    tmp = Path(tempfile.mkdtemp(prefix="sm-profile-"))
    try:
        src = write_workload(get_engine("sqlite"), tmp / "src.sqlite", args.n)
        convert(str(src), f"{args.engine}:{tmp / 'warm'}", tables=TABLES)
        profile = cProfile.Profile()
        t0 = time.perf_counter()
        profile.enable()
        convert(str(src), f"{args.engine}:{tmp / 'out'}", tables=TABLES)
        profile.disable()
        print(f"wall {time.perf_counter() - t0:.3f} s (profiled)")
        pstats.Stats(profile).sort_stats(args.sort).print_stats(args.top)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
