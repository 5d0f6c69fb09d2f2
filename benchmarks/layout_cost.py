"""What a layout costs: a convert into (and a checksum of) a store in an app's layout,
against the same work in the engine's default layout, in one process.

Usage:  python benchmarks/layout_cost.py [--n 1000000] [--repeat 3] [--engines rocksdb,lmdb]

The source is the workload (statemigrate.testing.workload) in SQLite's default layout.
For each engine, the verified convert SQLite -> engine runs with no layout, then with
each layout below; then ``checksum`` reads each result. Every figure is the median of
--repeat runs; the ratio is layout / default (1.10 is 10 % slower). Issue 28's target:
at most 1.10 on 1M records.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from statemigrate import checksum, convert
from statemigrate.errors import StateMigrateError
from statemigrate.registry import get_engine
from statemigrate.testing.workload import write_workload

# The workload's tables every engine holds ("odd" has an empty key, which LMDB refuses).
TABLES = ["events", "settings"]
# The layouts measured, per layout family: name -> TOML (ENGINE replaced).
KV_LAYOUTS = {
    "namespaces": (
        'engine = "ENGINE"\nversioned = ["settings"]\n[kv]\nmode = "namespaces"\n'
        'tables = { events = "events", settings = "settings" }\n'
    ),
    "prefix": (
        'engine = "ENGINE"\nversioned = ["settings"]\n[kv]\nmode = "prefix"\n'
        'namespace = "state"\nprefix = "{name}/"\n'
    ),
}
SQL_LAYOUTS = {
    "table-per-table": (
        'engine = "ENGINE"\nversioned = ["settings"]\n[sql]\nmode = "table-per-table"\n'
        'template = "app_{name}"\nkey = "k"\nvalue = "v"\nversion = "ver"\n'
    ),
    "one-table": (
        'engine = "ENGINE"\nversioned = ["settings"]\n[sql]\nmode = "one-table"\n'
        'table = "kv"\nname_column = "tbl"\nkey = "k"\nvalue = "v"\nversion = "ver"\n'
    ),
}


def median_time(fn: Callable[[], object], repeat: int, setup: Callable[[], None]) -> float:
    times = []
    for _ in range(repeat):
        setup()
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def remove(path: Path) -> None:
    if path.is_dir():
        shutil.rmtree(path)
    elif path.exists():
        path.unlink()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=1_000_000)
    ap.add_argument("--repeat", type=int, default=3)
    ap.add_argument("--engines", default="rocksdb,lmdb,sqlite")
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="sm-layout-cost-"))
    try:
        src = write_workload(get_engine("sqlite"), work / "src.sqlite", args.n)
        print(f"{args.n:,} events; medians of {args.repeat}; ratio = layout / default")
        print(
            f"{'engine':8} {'layout':16} {'convert s':>10} {'ratio':>6} {'checksum s':>11} {'ratio':>6}"
        )
        for name in args.engines.split(","):
            engine = get_engine(name)
            family = engine.layout_family
            layouts = KV_LAYOUTS if family == "kv" else SQL_LAYOUTS if family == "sql" else {}
            dst = work / f"dst.{name}"
            runs: dict[str, dict[str, object] | None] = {"default": None}
            for lname, text in layouts.items():
                lay = work / f"{name}-{lname}.toml"
                lay.write_text(text.replace("ENGINE", name))
                runs[lname] = {"layout": str(lay)}
            base: tuple[float, float] | None = None
            for lname, opts in runs.items():
                target = f"{name}:{dst}"

                def conv(opts: dict[str, object] | None = opts, target: str = target) -> None:
                    convert(str(src), target, destination_options=opts, tables=TABLES)

                def clear(dst: Path = dst) -> None:
                    remove(dst)

                try:
                    t_conv = median_time(conv, args.repeat, clear)
                    t_sum = median_time(
                        lambda opts=opts, target=target: checksum(target, options=opts),
                        args.repeat,
                        lambda: None,
                    )
                except StateMigrateError as exc:  # a layout this engine does not have (yet)
                    print(f"{name:8} {lname:16} not measured: {exc}")
                    continue
                if base is None:
                    base = (t_conv, t_sum)
                print(
                    f"{name:8} {lname:16} {t_conv:10.2f} {t_conv / base[0]:6.2f} "
                    f"{t_sum:11.2f} {t_sum / base[1]:6.2f}"
                )
            remove(dst)
    finally:
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())
