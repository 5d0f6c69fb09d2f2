"""The benchmark page's chart, drawn from the data files in benchmarks/results/.

Usage:  python benchmarks/chart.py [--results benchmarks/results] [--out docs/img/benchmarks.svg]
                                  [--same-engine-out docs/img/same-engine.svg]

Two panels: each job's records per second beside its ceiling (``convert.json``, written
by ``run.py``), and each pair's peak memory at 1M and 4M events (``memory.json``,
written by ``rss.py``). A second chart: each same-engine convert's events per second,
verified and ``--no-verify``, beside the engine's own fastest copy
(``same-engine.json``, written by ``bench_native_copy.py``, which ``make scorecard`` runs). ``make bench`` runs it after the benchmarks. Needs matplotlib
(the ``bench`` extra). The SVG carries no date and its element ids are fixed, so the
same figures draw the same file.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

import results as R

OUT = Path(__file__).resolve().parents[1] / "docs" / "img" / "benchmarks.svg"
SAME_ENGINE_OUT = OUT.with_name("same-engine.svg")


def column(table: R.Table, label: str) -> list[Any]:
    """The values of the column named ``label``."""
    at = next(i for i, c in enumerate(table.columns) if c.label == label)
    return [row[at] for row in table.rows]


def draw(convert: R.Table, memory: R.Table, out: Path) -> None:
    """Write the chart of ``convert`` and ``memory`` to ``out`` (SVG)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "statemigrate"
    plt.rcParams["svg.fonttype"] = "none"  # text stays text
    fig, (left, right) = plt.subplots(1, 2, figsize=(12, 4.8), layout="constrained")

    jobs = [str(j).replace("`", "") for j in column(convert, "what")]
    tool = [v / 1000 for v in column(convert, "records/s")]
    ceiling = [v / 1000 for v in column(convert, "ceiling records/s")]
    at = list(range(len(jobs)))
    h = 0.38
    left.barh([y - h / 2 for y in at], tool, h, label="statemigrate", color="#3b6ea8")
    left.barh([y + h / 2 for y in at], ceiling, h, label="the drivers' ceiling", color="#b9c7d8")
    left.set_yticks(at, jobs)
    left.invert_yaxis()
    left.set_xlabel("thousand records per second (more is faster)")
    left.set_title("Throughput against the drivers' own paths", loc="left")
    left.legend(loc="lower right", frameon=False)

    pairs = list(dict.fromkeys(column(memory, "pair")))
    events = column(memory, "events")
    peaks = column(memory, "peak RssAnon")
    sizes = sorted(set(events))
    at = list(range(len(pairs)))
    w = 0.8 / len(sizes)
    shades = ["#8fbf7f", "#3d7a2e", "#1f4a14"]
    for k, n in enumerate(sizes):
        got = {
            p: v for p, e, v in zip(column(memory, "pair"), events, peaks, strict=True) if e == n
        }
        right.barh(
            [y - 0.4 + w * (k + 0.5) for y in at],
            [got.get(p, 0) for p in pairs],
            w,
            label=f"{n / 1e6:g}M events",
            color=shades[k % len(shades)],
        )
    target = 300e6 / 2**20  # the target: under 300 MB
    right.axvline(target, color="#a33", linestyle="--", linewidth=1)
    right.text(target, -0.45, "300 MB target ", color="#a33", ha="right", va="top")
    right.set_xlim(0, target * 1.1)
    right.set_yticks(at, pairs)
    right.invert_yaxis()
    right.set_xlabel("peak RssAnon, MiB (less is better)")
    right.set_title("Memory stays flat as the store grows", loc="left")
    right.legend(loc="lower right", frameon=False)

    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)


def events_of(table: R.Table) -> int:
    """The events a table's run measured, from its conditions (``1,000,000 events, …``)."""
    return int(table.conditions.split(" events")[0].replace(",", ""))


def draw_same_engine(table: R.Table, out: Path) -> None:
    """Write the same-engine chart of ``table`` to ``out`` (SVG): events per second of the
    convert (verified, ``--no-verify``) and of the engine's fastest copy (tool or API)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    plt.rcParams["svg.hashsalt"] = "statemigrate"
    plt.rcParams["svg.fonttype"] = "none"
    n = events_of(table) / 1000
    jobs = [str(j) for j in column(table, "engine")]
    fastest = [
        min(x for x in (a, b) if x is not None)
        for a, b in zip(column(table, "copy tool"), column(table, "API copy"), strict=True)
    ]
    bars = [
        ("statemigrate convert, verified", column(table, "convert"), "#3b6ea8"),
        ("statemigrate convert --no-verify", column(table, "`--no-verify`"), "#7fa3cc"),
        ("the engine's fastest copy", fastest, "#b9c7d8"),
    ]
    fig, ax = plt.subplots(figsize=(8, 4.8), layout="constrained")
    at = list(range(len(jobs)))
    h = 0.8 / len(bars)
    for k, (label, seconds, color) in enumerate(bars):
        ax.barh([y - 0.4 + h * (k + 0.5) for y in at], [n / s for s in seconds], h,
                label=label, color=color)  # fmt: skip
    ax.set_xscale("log")
    ax.set_yticks(at, jobs)
    ax.invert_yaxis()
    ax.set_xlabel("thousand events per second, log scale (more is faster)")
    ax.set_title("Same-engine converts beside the engine's own copy", loc="left")
    ax.legend(loc="lower right", frameon=False, fontsize="small")
    out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out, format="svg", metadata={"Date": None, "Creator": None})
    plt.close(fig)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=R.RESULTS)
    ap.add_argument("--out", type=Path, default=OUT)
    ap.add_argument("--same-engine-out", type=Path, default=SAME_ENGINE_OUT)
    args = ap.parse_args()
    draw(R.read("convert", args.results), R.read("memory", args.results), args.out)
    print(f"chart: {args.out}")
    draw_same_engine(R.read("same-engine", args.results), args.same_engine_out)
    print(f"chart: {args.same_engine_out}")


if __name__ == "__main__":
    main()
