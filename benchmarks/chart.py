"""The benchmark page's chart, drawn from the data files in benchmarks/results/.

Usage:  python benchmarks/chart.py [--results benchmarks/results] [--out docs/img/benchmarks.svg]

Two panels: each job's records per second beside its ceiling (``convert.json``, written
by ``run.py``), and each pair's peak memory at 1M and 4M events (``memory.json``,
written by ``rss.py``). ``make bench`` runs it after the benchmarks. Needs matplotlib
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


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--results", type=Path, default=R.RESULTS)
    ap.add_argument("--out", type=Path, default=OUT)
    args = ap.parse_args()
    draw(R.read("convert", args.results), R.read("memory", args.results), args.out)
    print(f"chart: {args.out}")


if __name__ == "__main__":
    main()
