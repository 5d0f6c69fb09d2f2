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
    # Then only the end summary: a row per table and the total.
    assert lines[3].split() == SUMMARY_HEADER and len(lines) == 7, lines
    assert [x.split()[:2] for x in lines[4:]] == [["a", "1,200"], ["b", "300"], ["total", "1,500"]]
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
    ]  # the digest after is carried from what the revisions wrote: no walk after
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


# --- one display for the whole run (issue 30) -------------------------------------------

BIG_A, BIG_B = 150_000, 50_000  # 200k records: small enough for CI, many batches


def _big(path: Path) -> Path:
    content = {
        TableInfo("a"): [(b"%07d" % i, b"value %d" % i) for i in range(BIG_A)],
        TableInfo("b", TableKind.VERSIONED): [(b"%07d" % i, b"w", i) for i in range(BIG_B)],
    }
    return write_store(get_engine("sqlite"), path, content)


def test_a_plain_callable_receives_the_runs_events(tmp_path: Path) -> None:
    from statemigrate import ProgressEvent

    src = _big(tmp_path / "s.sqlite")
    events: list[ProgressEvent] = []
    report = api.convert(src, f"lmdb:{tmp_path / 'd.lmdb'}", progress=events.append)
    assert report.verified and report.records == BIG_A + BIG_B
    assert all(isinstance(e, ProgressEvent) for e in events)
    advances = [e for e in events if e.kind == "advance"]
    # The run is the copy and its read-back: each record is handled twice, and that
    # total is known from the first batch on.
    assert advances and {e.run_total for e in advances} == {2 * (BIG_A + BIG_B)}
    assert advances[0].phase == "converting" and advances[0].table == "a"
    assert advances[0].total == BIG_A and advances[0].done == advances[0].records > 0
    assert [e.run_done for e in advances] == sorted(e.run_done for e in advances)
    assert advances[-1].phase == "verifying" and advances[-1].table == "b"
    assert advances[-1].run_done == advances[-1].run_total  # 100 % after verification
    assert sum(e.records for e in advances) == 2 * (BIG_A + BIG_B)
    assert sum(e.nbytes for e in advances if e.phase == "converting") == sum(
        t.bytes for t in report.tables
    )
    assert events[-1].kind == "close"
    assert {e.phase for e in events if e.kind == "phase"} >= {"converting", "verifying"}


def test_the_progress_class_is_exported_and_a_subclass_still_works(tmp_path: Path) -> None:
    import statemigrate

    assert statemigrate.Progress is Progress
    a = _store("sqlite", tmp_path / "a.sqlite")
    progress = Recorded()
    api.convert(a, f"lmdb:{tmp_path / 'b.lmdb'}", progress=progress)
    assert ["a", 1200, 1200] in progress.events and ["b", 300, 300] in progress.events


class Bars:
    """The CLI's terminal display drawing into a buffer, its overall bar seen at each batch."""

    def __init__(self) -> None:
        import io

        from statemigrate.cli.progress import BarProgress

        self.out = io.StringIO()
        self.seen: list[tuple[int, object, int | None]] = []
        seen = self.seen

        class Seen(BarProgress):
            def advance(self, records: int, nbytes: int) -> None:
                super().advance(records, nbytes)
                seen.append((id(self.overall), self.overall.n, self.overall.total))

        self.progress = Seen(file=self.out)


def test_a_convert_draws_one_overall_bar_known_from_the_first_batch(tmp_path: Path) -> None:
    src = _big(tmp_path / "s.sqlite")
    bars = Bars()
    api.convert(src, f"lmdb:{tmp_path / 'd.lmdb'}", progress=bars.progress)
    seen = bars.seen
    assert len({bar for bar, _, _ in seen}) == 1  # one overall bar, from start to end
    assert {total for _, _, total in seen} == {2 * (BIG_A + BIG_B)}
    assert seen[-1][1] == seen[-1][2]  # at 100 % once the read-back is done
    text = bars.out.getvalue()
    assert "100%" in text


def _stopped_after(batches: int):
    polls = iter(range(10**9))
    return lambda: next(polls) >= batches


def test_a_resumed_convert_starts_at_the_checkpoints_share(tmp_path: Path) -> None:
    from statemigrate.errors import InterruptedByUser

    src = _store("sqlite", tmp_path / "s.sqlite", a=10_000, b=2_000)
    dst = f"lmdb:{tmp_path / 'd.lmdb'}"
    with pytest.raises(InterruptedByUser):
        api.convert(src, dst, batch_records=1000, should_stop=_stopped_after(3))
    events: list = []
    report = api.convert(src, dst, batch_records=1000, resume=True, progress=events.append)
    assert report.resumed and report.verified
    first = next(e for e in events if e.kind in ("total", "advance"))
    # Three batches of table a were committed before the stop: 3,000 records.
    assert first.kind == "total" and first.run_done == 3000
    # The rest copied, the whole source read again (it may have changed meanwhile),
    # the whole destination read back.
    assert first.run_total == 3 * 12_000
    last = [e for e in events if e.kind == "advance"][-1]
    assert last.run_done == last.run_total
    assert events[-1].kind == "close"
    bars = Bars()
    with pytest.raises(InterruptedByUser):
        api.convert(src, f"lmdb:{tmp_path / 'e.lmdb'}", batch_records=1000,
                    should_stop=_stopped_after(3))  # fmt: skip
    api.convert(src, f"lmdb:{tmp_path / 'e.lmdb'}", batch_records=1000, resume=True,
                progress=bars.progress)  # fmt: skip
    _, n, total = bars.seen[0]
    assert n == 3000 + 1000 and total == first.run_total  # the share, then one batch


INTERVAL = {"STATEMIGRATE_PROGRESS_EVERY": "0"}  # a periodic line at every batch


def test_off_a_terminal_the_periodic_lines_carry_the_runs_share_and_eta(tmp_path: Path) -> None:
    src = _store("sqlite", tmp_path / "s.sqlite", a=10_000, b=2_000)
    res = CliRunner(env=INTERVAL).invoke(
        main, ["convert", str(src), f"lmdb:{tmp_path / 'd.lmdb'}", "--batch-records", "1000"]
    )
    assert res.exit_code == 0, res.output
    periodic = [x for x in res.stderr.splitlines() if re.match(r"statemigrate: converting a: ", x)]
    assert len(periodic) >= 10, res.stderr  # one a batch, then the table's last line
    shares = [int(m.group(1)) for x in periodic if (m := re.search(r"; (\d+)% of the run", x))]
    assert len(shares) == len(periodic) and shares == sorted(shares) and shares[-1] < 50
    assert all(re.search(r", ETA \d", x) for x in periodic[:-1]), periodic
    done = [x for x in res.stderr.splitlines() if x.startswith("statemigrate: verifying b: ")]
    assert done and "100% of the run" in done[-1], res.stderr


def _summary(stderr: str) -> list[list[str]]:
    lines = stderr.splitlines()
    start = next(i for i, x in enumerate(lines) if x.split() == SUMMARY_HEADER)
    return [x.split() for x in lines[start:]]


SUMMARY_HEADER = ["table", "records", "bytes", "time", "rate"]


def test_a_convert_ends_with_a_summary_row_per_table_and_a_total(tmp_path: Path) -> None:
    src = _store("sqlite", tmp_path / "s.sqlite", a=10_000, b=2_000)
    dst = f"lmdb:{tmp_path / 'd.lmdb'}"
    res = run("convert", src, dst)
    assert res.exit_code == 0, res.output
    assert res.stdout.startswith("converted 12,000 records")  # stdout as before
    rows = _summary(res.stderr)
    assert [r[:2] for r in rows[1:]] == [["a", "10,000"], ["b", "2,000"], ["total", "12,000"]]
    facts = {t["name"]: t for t in json.loads(run("convert", src, tmp_path / "j.sqlite",
                                                    "--json").stdout)["tables"]}  # fmt: skip
    assert rows[1][2] == f"{facts['a']['bytes']:,}" and rows[2][2] == f"{facts['b']['bytes']:,}"
    assert all(re.fullmatch(r"[\d.]+s", r[3]) for r in rows[1:]), rows
    assert all(re.fullmatch(r"[\d,]+/s|-", r[4]) for r in rows[1:3]), rows  # - : too quick
    assert re.fullmatch(r"[\d,]+/s", rows[3][4]), rows
    assert not any("resumed" in r for r in rows)
    quiet = run("convert", src, tmp_path / "q.lmdb", "--to", "lmdb", "-q")
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == ""


def test_a_resumed_convert_says_so_in_its_summary(tmp_path: Path) -> None:
    src = _store("sqlite", tmp_path / "s.sqlite", a=10_000, b=2_000)
    dst = f"lmdb:{tmp_path / 'd.lmdb'}"
    from statemigrate.errors import InterruptedByUser

    with pytest.raises(InterruptedByUser):
        api.convert(src, dst, batch_records=1000, should_stop=_stopped_after(3))
    res = run("convert", src, dst, "--resume", "--batch-records", "1000")
    assert res.exit_code == 0, res.output
    rows = _summary(res.stderr)
    assert rows[1][:2] == ["a", "10,000"] and rows[1][-1] == "resumed", rows
    assert rows[2][:2] == ["b", "2,000"] and rows[2][-1] != "resumed", rows
    assert rows[3][0] == "total" and rows[3][-1] == "resumed", rows


def test_verify_ends_with_a_summary_and_json_or_quiet_has_none(tmp_path: Path) -> None:
    a = _store("sqlite", tmp_path / "a.sqlite")
    b = _store("lmdb", tmp_path / "b.lmdb")
    res = run("verify", a, f"lmdb:{b}")
    assert res.exit_code == 0, res.output
    rows = _summary(res.stderr)
    assert [r[:2] for r in rows[1:]] == [["a", "1,200"], ["b", "300"], ["total", "1,500"]]
    assert run("verify", a, f"lmdb:{b}", "-q").stderr == ""
    assert run("verify", a, f"lmdb:{b}", "--json").stderr == ""


def test_upgrade_operations_have_totals(tmp_path: Path) -> None:
    store = seeded(get_engine("sqlite"), tmp_path, events=300)
    events: list = []
    api.upgrade(store, EXAMPLE, to="0003", progress=events.append)
    starts = {e.table: e.total for e in events if e.kind == "start" and "'" in (e.table or "")}
    assert starts == {"rekey of 'events'": 300, "copy_table 'events' and rewrite of 'events'": 300}
    # Every bar that starts with a total ends at it: the digest before and each operation.
    ends = [e for e in events if e.kind == "end" and e.total is not None]
    assert ends and all(e.total == e.done for e in ends), ends
    assert {e.table: e.done for e in ends}["copy_table 'events' and rewrite of 'events'"] == 300
