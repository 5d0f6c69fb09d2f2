"""A mkdocs hook: the benchmark page's tables, written from benchmarks/results/*.json.

docs/benchmarks.md names a data file on a line of its own, ``<!-- results: NAME -->``;
the build puts there the file's table with its command and conditions, so the page
shows what the scripts wrote and cannot drift from it. ``tests/test_docs.py`` renders
it too.
"""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
PAGE = "benchmarks.md"
MARK = re.compile(r"^<!-- results: ([a-z0-9-]+) -->$", re.MULTILINE)


def _results_module() -> ModuleType:
    """benchmarks/results.py (the benchmarks are scripts, not a package)."""
    spec = importlib.util.spec_from_file_location("results", ROOT / "benchmarks" / "results.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("results", module)
    spec.loader.exec_module(module)
    return module


def section(table: Any) -> str:
    """One data file as Markdown: the table, then its command, conditions and notes."""
    lines = [*table.markdown(), ""]
    lines.append(f"Measured with `{table.command}`: {table.conditions}.")
    lines.extend(["", *(f"- {note}" for note in table.notes)] if table.notes else [])
    return "\n".join(lines)


def render(markdown: str, results_dir: Path | None = None) -> str:
    """``markdown`` with every ``<!-- results: NAME -->`` line replaced by that table.

    Raises:
        FileNotFoundError: a line names a data file that does not exist.
    """
    results = _results_module()
    where = results_dir or results.RESULTS
    return MARK.sub(lambda m: section(results.read(m.group(1), where)), markdown)


def on_page_markdown(markdown: str, page: Any, config: Any, files: Any) -> str:
    """Fills in the benchmark page's tables (mkdocs hook)."""
    if page.file.src_uri != PAGE:
        return markdown
    return render(markdown)
