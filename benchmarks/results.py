"""The benchmarks' data files: one JSON file per table of figures, in benchmarks/results/.

Each benchmark script writes its table with :func:`write` when given ``--results DIR``
(``make bench`` passes ``benchmarks/results``): the command that measured it, how
(medians of how many runs, on what machine), the columns and the rows as numbers.
docs/benchmarks.md shows every file as a table (``docs/hooks/benchmarks.py``) and
``benchmarks/chart.py`` draws the chart from them, so the page cannot drift from what
was measured. A file holds no date, host name or commit: running the same command
again rewrites it with the new figures only.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

RESULTS = Path(__file__).resolve().parent / "results"


@dataclass
class Column:
    """One column: its label and how a value is shown (a :func:`format` spec).

    ``unit`` is appended to each shown value (``" s"``, ``"×"``); a value of None
    is shown as ``—``.
    """

    label: str
    spec: str = ""
    unit: str = ""
    align: str = "right"  # or "left"

    def show(self, value: Any) -> str:
        if value is None:
            return "—"
        if isinstance(value, str):
            return value
        return f"{format(value, self.spec)}{self.unit}"


@dataclass
class Table:
    """A table of figures as the benchmark measured it.

    Args:
        name: the file's name (``results/NAME.json``) and the page's reference to it.
        title: what the table shows, in a few words.
        command: the command line that measured it, as a user would type it.
        conditions: how it was measured (runs, machine, load).
        columns: the columns.
        rows: one list of values per row, in the columns' order.
        notes: what a reader needs to read a figure right (one sentence each).
    """

    name: str
    title: str
    command: str
    conditions: str
    columns: list[Column]
    rows: list[list[Any]]
    notes: list[str] = field(default_factory=list)

    def markdown(self) -> list[str]:
        """The table as Markdown lines."""
        lines = ["| " + " | ".join(c.label for c in self.columns) + " |"]
        lines.append(
            "|" + "|".join("---:" if c.align == "right" else "---" for c in self.columns) + "|"
        )
        for row in self.rows:
            shown = (c.show(v) for c, v in zip(self.columns, row, strict=True))
            lines.append("| " + " | ".join(s.replace("|", "\\|") for s in shown) + " |")
        return lines

    def to_json(self) -> dict[str, Any]:
        return asdict(self)

    @classmethod
    def from_json(cls, data: dict[str, Any]) -> Table:
        columns = [Column(**c) for c in data["columns"]]
        return cls(**{**data, "columns": columns})


def write(table: Table, directory: Path | str | None) -> Path | None:
    """Write ``table`` to ``DIRECTORY/NAME.json`` (nothing when ``directory`` is None).

    Returns:
        The file written, or None.
    """
    if directory is None:
        return None
    path = Path(directory) / f"{table.name}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(dumps(table.to_json()))
    return path


def _rounded(value: Any) -> Any:
    """Floats to 6 significant digits (a measurement holds no more), lists in depth."""
    if isinstance(value, float):
        return float(f"{value:.6g}")
    if isinstance(value, list):
        return [_rounded(v) for v in value]
    return value


def dumps(data: dict[str, Any]) -> str:
    """``data`` as JSON with one line per column, row and note (diffs read line by line)."""
    lines = ["{"]
    for i, (key, value) in enumerate(data.items()):
        comma = "," if i < len(data) - 1 else ""
        if isinstance(value, list) and value:
            lines.append(f"  {json.dumps(key)}: [")
            items = [json.dumps(_rounded(v), ensure_ascii=False) for v in value]
            lines.extend(f"    {x}{',' if j < len(items) - 1 else ''}" for j, x in enumerate(items))
            lines.append(f"  ]{comma}")
        else:
            lines.append(f"  {json.dumps(key)}: {json.dumps(value, ensure_ascii=False)}{comma}")
    return "\n".join([*lines, "}"]) + "\n"


def read(name: str, directory: Path = RESULTS) -> Table:
    """The table ``name`` from its data file."""
    return Table.from_json(json.loads((directory / f"{name}.json").read_text()))


def read_all(directory: Path = RESULTS) -> dict[str, Table]:
    """Every data file's table, by name."""
    return {p.stem: read(p.stem, directory) for p in sorted(directory.glob("*.json"))}


def add_argument(parser: argparse.ArgumentParser) -> None:
    """The ``--results DIR`` option every benchmark script takes, and ``--results-name``
    for a run whose table is kept beside the default one (other pairs, other sizes)."""
    parser.add_argument(
        "--results",
        default=None,
        metavar="DIR",
        help="write the figures as data files here (make bench: benchmarks/results)",
    )
    parser.add_argument(
        "--results-name",
        default=None,
        metavar="NAME",
        help="the data file's name (DIR/NAME.json) instead of the table's own",
    )


def write_from(table: Table, args: argparse.Namespace) -> Path | None:
    """:func:`write` to ``--results`` under ``--results-name`` (if given)."""
    if args.results_name:
        table.name = args.results_name
    return write(table, args.results)


def machine() -> str:
    """The cores and the load average now, for a table's conditions."""
    return f"{os.cpu_count()} cores, load average {os.getloadavg()[0]:.1f} after the run"


NAMES = {"sqlite": "SQLite", "lmdb": "LMDB", "rocksdb": "RocksDB", "libsql": "libSQL",
         "turso": "Turso", "helixdb": "HelixDB"}  # fmt: skip


def pair(text: str) -> str:
    """``sqlite->redb`` as the page names it: ``SQLite → redb``."""
    return " → ".join(NAMES.get(e, e) for e in text.split("->"))


WHERE_OPTIONS = ("--results", "--dir", "--json", "--out")


def command_line(script: str, args: list[str], dropped: tuple[str, ...] = WHERE_OPTIONS) -> str:
    """The command as a user types it: ``python benchmarks/SCRIPT ARGS``, without the
    options in ``dropped`` and their values (--results, --dir, --json, --out: they
    change where things go, not what is measured; ``--results-name`` stays, so that
    the command shown writes the same file again)."""
    kept: list[str] = []
    skip = False
    for a in args:
        if skip:
            skip = False
        elif a in dropped:
            skip = True
        elif a.split("=", 1)[0] not in dropped:
            kept.append(a)
    return shlex.join(["python", f"benchmarks/{script}", *kept])
