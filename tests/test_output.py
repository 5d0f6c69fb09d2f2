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
    assert re.search(r"installed +yes, atomic +yes +yes +file +any$", rows["sqlite"])
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
    assert re.match(r"fake +missing +no +yes +no +file +1–… B$", lines[1]), lines
    assert any(re.match(r"fake +a plugin whose driver is absent$", x) for x in lines), lines
    assert "  pip install 'statemigrate[fake]'   # fake" in lines
    assert "broken: broken plugin: ImportError: nope" in lines


# --- progress ------------------------------------------------------------------------


def _two_tables(engine: str, path: Path) -> Path:
    from statemigrate.registry import get_engine

    content = {
        TableInfo("a"): [(b"%05d" % i, b"v") for i in range(1200)],
        TableInfo("b", TableKind.VERSIONED): [(b"%05d" % i, b"w", i) for i in range(300)],
    }
    return write_store(get_engine(engine), path, content)


def test_counts_for_progress_come_from_the_engines(tmp_path: Path) -> None:
    from statemigrate import api
    from statemigrate.progress import Estimate, Progress, table_total

    class Drawn(Progress):
        def start_table(self, table: str, total: int | None) -> None:
            pass

    for engine, exact in (("sqlite", True), ("lmdb", True), ("rocksdb", False)):
        store = _two_tables(engine, tmp_path / f"s.{engine}")
        with api.open_store(f"{engine}:{store}") as reader:
            totals = {t.name: table_total(Drawn(), reader, t) for t in reader.tables()}
            nobody = [table_total(Progress(), reader, t) for t in reader.tables()]
        assert totals == {"a": 1200, "b": 300}, (engine, totals)
        assert all(isinstance(n, Estimate) != exact for n in totals.values()), engine
        assert nobody == [None, None]  # no count is taken when nobody draws progress


def test_a_log_line_per_table_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    src = _two_tables("rocksdb", tmp_path / "s.rocksdb")
    res = run("convert", src, tmp_path / "d.sqlite")
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    for phase in ("converting", "syncing", "verifying", "renaming into place"):
        assert f"statemigrate: {phase}" in lines, lines
    # The source's counts are RocksDB's estimates, labelled; the read-back's are exact.
    assert any(
        re.match(r"statemigrate: converting a: 1,200 of about 1,200 records, ", x) for x in lines
    )
    assert any(re.match(r"statemigrate: verifying b: 300 of 300 records, ", x) for x in lines)
    assert res.stdout.startswith("converted 1,500 records")
    quiet = run("convert", src, tmp_path / "q.sqlite", "--quiet")
    assert quiet.exit_code == 0 and quiet.stderr == ""


def test_a_message_starts_on_a_clean_line(tmp_path: Path) -> None:
    from statemigrate.cli import progress as cli_progress

    bar = cli_progress.BarProgress()
    cli_progress._ACTIVE.append(bar)
    bar.start_table("t", 10)
    assert bar.bar is not None
    src = _two_tables("sqlite", tmp_path / "s.sqlite")
    res = run("convert", src, src)  # refused: a failure goes through fail()
    assert res.exit_code == 2 and bar.bar is None and cli_progress._ACTIVE == []


def test_inspect_reports_progress_with_totals(tmp_path: Path) -> None:
    from statemigrate import api
    from statemigrate.progress import Progress

    class Recorded(Progress):
        def __init__(self) -> None:
            self.events: list[tuple[str, int | None, int]] = []

        def start_table(self, table: str, total: int | None) -> None:
            self.events.append((table, total, 0))

        def advance(self, records: int, nbytes: int) -> None:
            table, total, seen = self.events[-1]
            self.events[-1] = (table, total, seen + records)

    store = _two_tables("lmdb", tmp_path / "s.lmdb")
    progress = Recorded()
    report = api.inspect(f"lmdb:{store}", progress=progress)
    assert progress.events == [("a", 1200, 1200), ("b", 300, 300)]
    assert [t["records"] for t in report.tables] == [1200, 300]
