"""Text for people: ``inspect`` and ``engines`` as aligned tables, facts in words.

``--json`` carries the full facts; this is what a person reads in a terminal, so no
Python reprs: booleans are yes/no, nothing is ``-``, redb's stored types read as
``u64 → (u16, &[u8])``.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any


def table(headers: Sequence[str], rows: Iterable[Sequence[str]], right: set[int]) -> list[str]:
    """Rows as lines of aligned columns (two spaces apart; the last column is not padded).

    Args:
        headers: the column titles.
        rows: the cells, as text.
        right: the indexes of columns aligned right (numbers).
    """
    grid = [list(headers), *(list(r) for r in rows)]
    widths = [max(len(r[i]) for r in grid) for i in range(len(headers))]
    lines = []
    for r in grid:
        cells = [
            c.rjust(w) if i in right else (c if i == len(r) - 1 else c.ljust(w))
            for i, (c, w) in enumerate(zip(r, widths))
        ]
        lines.append("  ".join(cells).rstrip())
    return lines


def words(value: Any) -> str:
    """A fact in words: yes/no, ``-`` for nothing, lists comma-separated, dicts as k=v."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, (list, tuple)):
        return ", ".join(words(v) for v in value) or "-"
    if isinstance(value, dict):
        return ", ".join(f"{label(k)} {words(v)}" for k, v in value.items()) or "-"
    return printable(str(value))


def label(key: str) -> str:
    """``needs_repair`` → ``needs repair``."""
    return key.replace("_", " ")


def printable(text: str) -> str:
    """``text`` with control characters escaped, so one name stays on one line."""
    if text.isprintable():
        return text
    return "".join(c if c.isprintable() else c.encode("unicode_escape").decode() for c in text)


def table_type(meta: dict[str, Any] | None) -> str:
    """A table's engine facts in words, as each engine words them (``Engine.table_type``)."""
    if not meta:
        return ""
    from ..registry import EngineUnavailableError, engine_names, get_engine

    known = set(engine_names())
    parts = []
    for engine, facts in meta.items():
        try:
            text = get_engine(engine).table_type(facts) if engine in known else None
        except EngineUnavailableError:  # a broken plugin's facts are still shown, as data
            text = None
        parts.append(text if text is not None else f"{label(engine)}: {words(facts)}")
    return "; ".join(parts)


def inspect_lines(report: Any) -> list[str]:
    """The text form of an :class:`~statemigrate.api.InspectReport`."""
    revision = ", ".join(report.revision or []) or "-"
    facts: list[tuple[str, str]] = [
        ("store", str(report.store)),
        ("engine", report.engine),
        *((label(k), words(v)) for k, v in report.format.items()),
        ("schema", f"{report.schema or '-'}, revision {revision}"),
    ]
    if report.upgrade_interrupted:
        facts.append(("upgrade", f"interrupted: {report.upgrade_interrupted['message']}"))
    width = max(len(k) for k, _ in facts)
    lines = [f"{k.ljust(width)}  {v}" for k, v in facts]
    if not report.tables:
        return [*lines, "", "no tables"]
    rows = [
        [
            printable(t["table"]),
            t["kind"],
            f"{t['records']:,}",
            f"{t['bytes']:,}",
            table_type(t.get("meta")),
        ]
        for t in report.tables
    ]
    headers = ["table", "kind", "records", "bytes", "type"]
    if len(rows) > 1:
        records, nbytes = (sum(t[k] for t in report.tables) for k in ("records", "bytes"))
        rows.append(["total", "", f"{records:,}", f"{nbytes:,}", ""])
    if not any(r[4] for r in rows):
        headers, rows = headers[:4], [r[:4] for r in rows]
    return [*lines, "", *table(headers, rows, right={2, 3})]


# Capabilities in words, in the order a person asks about them.
_CAPABILITIES = (
    ("in place", lambda c: "yes, atomic" if c["transactional_ddl"] else words(c["in_place"])),
    ("read-only", lambda c: words(c["read_only_open"])),
    ("beside the app", lambda c: words(c["multi_process_readers"])),
    ("store", lambda c: "dir" if c["directory"] else "file"),  # "directory": 81 columns
    ("keys", lambda c: _keys(c)),
)


def _keys(c: dict[str, Any]) -> str:
    low, high = c.get("min_key_len", 0), c.get("max_key_len")
    text = "any" if not low and high is None else f"{low}–{high if high is not None else '…'} B"
    return f"{text}, typed" if c.get("typed_keys") else text


_SIDES = {"source": "source", "dest": "destination", "both": "both"}
_OPTIONS_TITLE = (
    "options (KEY=VALUE: convert --source-option/--dest-option, checksum and inspect"
    " --option, verify --option-a/--option-b):"
)
# What a terminal gives by default: every line of `engines` fits it.
WIDTH = 80


def described(name: str, text: str, indent: int) -> list[str]:
    """``name`` then ``text`` wrapped to :data:`WIDTH`, later lines under the text."""
    import textwrap

    lead = name.ljust(indent - 2) + "  "
    return textwrap.wrap(
        text,
        WIDTH,
        initial_indent=lead,
        subsequent_indent=" " * indent,
        break_on_hyphens=False,
    ) or [lead.rstrip()]


def _option_default(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    return words(value)


def _options_lines(rows: list[dict[str, Any]], indent: int) -> list[str]:
    """The engines' options (``options`` of each row), each with its help wrapped, or
    nothing."""
    import textwrap

    lines: list[str] = []
    for row in rows:
        for o in row.get("options", ()):
            side = _SIDES.get(o["applies"], o["applies"])
            default = "" if o["default"] is None else f"; default {_option_default(o['default'])}"
            facts = f"{o['name']} ({side}; {o['type']}{default})"
            lines += described(row["name"], facts, indent)
            lines += textwrap.wrap(
                o["help"], WIDTH, initial_indent=" " * (indent + 2),
                subsequent_indent=" " * (indent + 2), break_on_hyphens=False,
            )  # fmt: skip
    if not lines:
        return []
    title = textwrap.wrap(_OPTIONS_TITLE, WIDTH, break_on_hyphens=False)
    return ["", *title, *lines]


def engines_lines(rows: list[dict[str, Any]]) -> list[str]:
    """The text form of :func:`statemigrate.api.engines`: one engine a row, then each
    one's description and options, every line within :data:`WIDTH` columns."""
    cells: list[list[str]] = []
    broken: list[str] = []
    missing: list[str] = []
    for row in rows:
        if "error" in row:
            broken.append(f"{row['name']}: broken plugin: {row['error']}")
            continue
        caps = row["capabilities"]
        driver = "installed" if row["driver_installed"] else "missing"
        if not row["driver_installed"]:
            missing.append(f"pip install 'statemigrate[{row['extra']}]'   # {row['name']}")
        cells.append([row["name"], driver, *(f(caps) for _, f in _CAPABILITIES)])
    headers = ["engine", "driver", *(name for name, _ in _CAPABILITIES)]
    lines = table(headers, cells, right=set())
    # The descriptions and options under the table, wrapped: beside it, 232 columns.
    indent = max((len(row["name"]) for row in rows), default=6) + 2
    lines.append("")
    for row in rows:
        if "error" not in row:
            lines += described(row["name"], row["description"], indent)
    lines += _options_lines(rows, indent)
    if missing:
        lines += ["", "missing drivers:", *(f"  {m}" for m in missing)]
    if broken:
        lines += ["", *broken]
    lines += [
        "",
        "in place: schema upgrades in place (atomic: each revision is one transaction)",
        "store: a file, or a directory (dir)",
        "read-only: opened without write access",
        "beside the app: read while an app holds it",
    ]
    return lines
