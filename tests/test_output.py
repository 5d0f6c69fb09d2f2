"""What a person reads: ``inspect`` and ``engines`` as aligned tables, facts in words."""

from __future__ import annotations

import json
import re
from pathlib import Path

from click.testing import CliRunner

from statemigrate.cli import main
from statemigrate.cli.tables import engines_lines, table
from statemigrate.engines.sqlite import SqliteEngine
from statemigrate.model import TableInfo, TableKind
from statemigrate.testing.stores import write_store

ROOT = Path(__file__).resolve().parents[1]
REDB_CUSTOM = ROOT / "fixtures" / "redb" / "redb2-format2-custom.redb"
REPRS = re.compile(r"[{}]|\bTrue\b|\bFalse\b|\bNone\b")


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def columns_start_alike(lines: list[str], headers: list[str]) -> None:
    """Every row's cells start where the header's titles start (left-aligned columns)."""
    starts = [lines[0].index(h) for h in headers]
    for line in lines[1:]:
        for start in (s for s in starts[1:] if len(line) > s):
            assert line[start - 2 : start] == "  ", (line, start)


def test_table_aligns_columns_and_numbers_right() -> None:
    lines = table(["name", "n", "note"], [["a", "1", "x"], ["long name", "1,000", "y"]], {1})
    assert lines == ["name           n  note", "a              1  x", "long name  1,000  y"]


def test_inspect_reads_as_a_table_with_types_in_words() -> None:
    res = run("inspect", REDB_CUSTOM)
    assert res.exit_code == 0, res.output
    assert not REPRS.search(res.output), res.output
    lines = res.output.splitlines()
    assert re.match(r"needs repair +no$", next(x for x in lines if x.startswith("needs repair")))
    head = lines.index(next(x for x in lines if x.startswith("table ")))
    rows = lines[head:]
    columns_start_alike(rows, ["table", "kind", "type"])
    by_name = {r.split()[0]: r for r in rows[1:]}
    assert "multimap &str → (fixture::TxNo, u32), custom order" in by_name["multimap_custom"]
    assert by_name["tx_values"].endswith("u32 → (fixture::TxNo, &str)")
    records = {
        t["table"]: t["records"]
        for t in json.loads(run("inspect", REDB_CUSTOM, "--json").stdout)["tables"]
    }
    assert by_name["total"].split()[1] == str(sum(records.values()))


def test_inspect_json_keeps_the_full_facts() -> None:
    data = json.loads(run("inspect", REDB_CUSTOM, "--json").stdout)
    meta = {t["table"]: t["meta"] for t in data["tables"]}
    assert meta["multimap_custom"]["redb"]["multimap"] is True
    assert meta["multimap_custom"]["redb"]["key"]["name"] == "&str"
    assert data["format"]["needs_repair"] is False


def test_inspect_numbers_and_odd_names(tmp_path: Path) -> None:
    store = write_store(
        SqliteEngine,
        tmp_path / "s.sqlite",
        {
            TableInfo("big"): [(b"%06d" % i, b"x" * 10) for i in range(1500)],
            TableInfo("tab\there", TableKind.VERSIONED): [(b"k", b"v", 1)],
        },
    )
    res = run("inspect", store)
    assert res.exit_code == 0 and not REPRS.search(res.output), res.output
    lines = res.output.splitlines()
    assert any(re.match(r"big +plain +1,500 +24,000$", x) for x in lines), lines
    assert any(x.startswith("tab\\there ") for x in lines), lines  # one line, escaped
    assert any(re.match(r"total +1,501 +24,002$", x) for x in lines), lines


def test_engines_reads_as_a_table() -> None:
    res = run("engines")
    assert res.exit_code == 0 and not REPRS.search(res.output), res.output
    lines = res.output.splitlines()
    headers = ["engine", "driver", "in place", "read-only", "beside the app", "store", "keys"]
    columns_start_alike(lines[: lines.index("")], headers)
    rows = {x.split()[0]: x for x in lines[1 : lines.index("")]}
    assert {"sqlite", "redb", "lmdb", "jsonl"} <= set(rows)
    assert re.search(r"installed +yes, atomic +yes +yes +file +any ", rows["sqlite"])
    assert "1–511 B" in rows["lmdb"] and "any, typed" in rows["redb"]
    assert re.search(r"installed +no ", rows["jsonl"])  # no upgrades in place


def test_engines_names_the_extra_of_a_missing_driver() -> None:
    row = {
        "name": "fake",
        "description": "a plugin whose driver is absent",
        "extra": "fake",
        "driver_installed": False,
        "capabilities": {
            "atomic_multi_table": True,
            "read_only_open": True,
            "multi_process_readers": False,
            "directory": False,
            "min_key_len": 1,
            "max_key_len": None,
            "typed_keys": False,
            "in_place": False,
            "transactional_ddl": False,
        },
    }
    lines = engines_lines([row, {"name": "broken", "error": "ImportError: nope"}])
    assert re.match(r"fake +missing +no +yes +no +file +1–… B +a plugin", lines[1]), lines
    assert "  pip install 'statemigrate[fake]'   # fake" in lines
    assert "broken: broken plugin: ImportError: nope" in lines
