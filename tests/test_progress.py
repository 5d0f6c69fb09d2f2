"""Progress of ``verify`` and ``upgrade``: the library's hook and the CLI's log lines off a
terminal."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from statemigrate import api
from statemigrate.cli import main
from statemigrate.model import TableInfo, TableKind
from statemigrate.progress import Progress
from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.stores import write_store
from statemigrate.testing.upgrade_conformance import EXAMPLE, seeded


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _store(engine: str, path: Path, a: int = 1200, b: int = 300, only: str = "") -> Path:
    content = {
        TableInfo("a"): [(b"%05d" % i, b"v") for i in range(a)],
        TableInfo("b", TableKind.VERSIONED): [(b"%05d" % i, b"w", i) for i in range(b)],
    }
    if only:
        content[TableInfo(only)] = [(b"k%03d" % i, b"x") for i in range(7)]
    return write_store(get_engine(engine), path, content)


class Recorded(Progress):
    """Every event: phases as ("phase", name), tables as [table, total, records]."""

    def __init__(self) -> None:
        self.events: list[list[object]] = []

    def phase(self, name: str) -> None:
        self.events.append(["phase", name])

    def start_table(self, table: str, total: int | None) -> None:
        self.events.append([table, total, 0])

    def advance(self, records: int, nbytes: int) -> None:
        assert nbytes > 0
        self.events[-1][2] += records  # type: ignore[operator]

    def end_table(self) -> None:
        self.events.append(["end"])


def test_verify_reports_each_table_with_its_total(tmp_path: Path) -> None:
    a = _store("sqlite", tmp_path / "a.sqlite")
    b = _store("lmdb", tmp_path / "b.lmdb")
    progress = Recorded()
    report = api.verify(a, f"lmdb:{b}", progress=progress)
    assert report.equal
    assert progress.events == [
        ["phase", "verifying"],
        ["a", 1200, 1200],
        ["end"],
        ["b", 300, 300],
        ["end"],
    ]


def test_verify_progress_follows_b_for_a_table_only_b_has(tmp_path: Path) -> None:
    a = _store("sqlite", tmp_path / "a.sqlite", a=1000)
    b = _store("sqlite", tmp_path / "b.sqlite", only="c")
    progress = Recorded()
    report = api.verify(a, b, progress=progress)
    assert not report.equal
    # A's counts for A's tables (1,000 of table a, though B holds 1,200); B's for c.
    assert progress.events[1:] == [
        ["a", 1000, 1000],
        ["end"],
        ["b", 300, 300],
        ["end"],
        ["c", 7, 7],
        ["end"],
    ]


def test_verify_manifest_reports_progress(tmp_path: Path) -> None:
    a = _store("lmdb", tmp_path / "a.lmdb")
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(api.checksum(f"lmdb:{a}").to_json()))
    progress = Recorded()
    assert api.verify_manifest(f"lmdb:{a}", manifest, progress=progress).equal
    assert progress.events[0] == ["phase", "verifying"]
    assert progress.events[1:] == [["a", 1200, 1200], ["end"], ["b", 300, 300], ["end"]]


def test_verify_logs_a_line_per_table_when_stderr_is_not_a_terminal(tmp_path: Path) -> None:
    a = _store("rocksdb", tmp_path / "a.rocksdb")
    b = _store("sqlite", tmp_path / "b.sqlite")
    res = run("verify", a, b)
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert lines[0] == "statemigrate: verifying", lines
    # A is RocksDB: its counts are estimates, labelled as such.
    assert re.match(r"statemigrate: verifying a: 1,200 of about 1,200 records, ", lines[1])
    assert re.match(r"statemigrate: verifying b: 300 of about 300 records, ", lines[2])
    assert len(lines) == 3, lines
    assert "equal" in res.stdout.lower() and "statemigrate:" not in res.stdout
    back = run("verify", b, a)  # exact counts from SQLite
    assert any(
        re.match(r"statemigrate: verifying a: 1,200 of 1,200 records, ", x)
        for x in back.stderr.splitlines()
    )


def test_verify_json_and_a_difference_keep_their_output(tmp_path: Path) -> None:
    a = _store("sqlite", tmp_path / "a.sqlite")
    b = _store("sqlite", tmp_path / "b.sqlite", b=299)
    res = run("verify", a, b, "--json")
    assert res.exit_code == 1
    assert res.stderr == ""  # --json: no progress lines
    assert json.loads(res.stdout)["equal"] is False
    text = run("verify", a, b)
    assert text.exit_code == 1
    assert any(
        re.match(r"statemigrate: verifying b: 300 of 300 records, ", x)
        for x in text.stderr.splitlines()
    )
    manifest = tmp_path / "m.json"
    manifest.write_text(run("checksum", a, "--json").stdout)
    checked = run("verify", a, "--manifest", manifest)
    assert checked.exit_code == 0, checked.output
    assert checked.stderr.splitlines()[0] == "statemigrate: verifying"
    assert re.match(
        r"statemigrate: verifying a: 1,200 of 1,200 records, ", checked.stderr.splitlines()[1]
    )


# --- redb: exact totals from the table's stored length ---------------------------------

REDB_FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "redb"


@pytest.mark.parametrize(
    "name",
    [
        "redb1-format1.redb",
        "redb2-format2.redb",
        "redb4-format3.redb",
        "redb2-format3.redb",
        "redb3-format3.redb",
    ],
)
def test_redb_counts_are_the_tables_lengths(name: str) -> None:
    from statemigrate.engines.redb import RedbEngine

    path = REDB_FIXTURES / name
    # What redb itself reads from each table (written by the fixture maker).
    expected = {t: len(rows) for t, rows in json.loads(Path(f"{path}.json").read_text()).items()}
    assert any(n > 1 for n in expected.values()) and 0 in expected.values()
    with RedbEngine.open_reader(path) as reader:
        tables = reader.tables()
        counts = {t.name: reader.estimate_count(t) for t in tables}
        read = {t.name: sum(map(len, reader.read_batches(t))) for t in tables}
    assert counts == {t: (n, True) for t, n in expected.items()}, name
    assert read == expected  # every kind: plain, versioned, typed, custom order, multimap


def test_redb_verify_logs_exact_totals(tmp_path: Path) -> None:
    a = _store("redb", tmp_path / "a.redb")
    b = _store("sqlite", tmp_path / "b.sqlite")
    res = run("verify", a, b)
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert re.match(r"statemigrate: verifying a: 1,200 of 1,200 records, ", lines[1]), lines
    assert re.match(r"statemigrate: verifying b: 300 of 300 records, ", lines[2]), lines


def test_upgrade_reports_each_revision_and_what_each_operation_wrote(tmp_path: Path) -> None:
    store = seeded(get_engine("sqlite"), tmp_path, events=300)
    progress = Recorded()
    report = api.upgrade(store, EXAMPLE, to="0003", progress=progress)
    assert report.status == "upgraded"
    phases = [e[1] for e in progress.events if e[0] == "phase"]
    assert [p.split(":")[0] for p in phases] == [
        "digesting the store before",
        "revision 0002 (1 of 2, upgrade)",
        "revision 0003 (2 of 2, upgrade)",
        "syncing",
        "digesting the store after",
    ]
    assert phases[1].startswith("revision 0002 (1 of 2, upgrade): Re-key the event log")
    written = {e[0]: e[2] for e in progress.events if e[0] not in ("phase", "end")}
    # The example's 0002 rekeys the event log; 0003 copies it and rewrites it, both
    # from one read of it.
    operations = {k: v for k, v in written.items() if "'" in k}  # not the digests' tables
    assert operations == {
        "rekey of 'events'": 300,
        "copy_table 'events' and rewrite of 'events'": 300,
    }


def test_upgrade_logs_lines_off_a_terminal_and_quiet_or_json_silences_them(
    tmp_path: Path,
) -> None:
    store = seeded(get_engine("sqlite"), tmp_path, events=300)
    res = run("upgrade", store, "--schema", EXAMPLE, "--to", "0002", "--no-digest")
    assert res.exit_code == 0, res.output
    lines = res.stderr.splitlines()
    assert lines[0].startswith("statemigrate: revision 0002 (1 of 1, upgrade): "), lines
    assert re.match(r"statemigrate: revision 0002 .* rekey of 'events': 300 records, ", lines[1])
    assert lines[2:] == ["statemigrate: syncing"], lines
    assert "upgraded from 0001 to 0002" in res.stdout and "statemigrate:" not in res.stdout
    quiet = run("upgrade", store, "--schema", EXAMPLE, "--to", "0003", "-q")
    assert quiet.exit_code == 0 and quiet.stderr == "", quiet.stderr
    as_json = run("downgrade", store, "--schema", EXAMPLE, "--to", "0002", "--json")
    assert as_json.exit_code == 0 and as_json.stderr == "", as_json.stderr
    assert json.loads(as_json.stdout)["status"] == "downgraded"


@pytest.mark.parametrize("engine", engine_names())
def test_a_count_an_engine_gives_for_progress_is_right(engine: str, tmp_path: Path) -> None:
    """Exact counts are the tables' lengths; estimates are marked so (the bar says so)."""
    eng = get_engine(engine)
    eng.require_driver()
    path = _store(engine, tmp_path / f"s{eng.suffixes[0] if eng.suffixes else ''}", 1200, 0)
    with eng.open_reader(path) as reader:
        counts = {t.name: reader.estimate_count(t) for t in reader.tables()}
    for name, real in (("a", 1200), ("b", 0)):
        found = counts[name]
        if found is not None and found[1]:
            assert found[0] == real, (name, found)


@pytest.mark.parametrize("engine", ["libsql", "turso", "jsonl", "helixdb"])
def test_the_last_engines_without_totals_give_exact_ones(engine: str, tmp_path: Path) -> None:
    eng = get_engine(engine)
    eng.require_driver()
    eng_suffix = eng.suffixes[0] if eng.suffixes else ""
    path = _store(engine, tmp_path / f"s{eng_suffix}", 1200, 300)
    with eng.open_reader(path) as reader:
        assert [(t.name, reader.estimate_count(t)) for t in reader.tables()] == [
            ("a", (1200, True)),
            ("b", (300, True)),
        ]
