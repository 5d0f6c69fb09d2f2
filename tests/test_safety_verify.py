"""verify names each difference with its key: a flipped value, a missing record, an
extra record and a changed version, between stores on every engine."""

from __future__ import annotations

from pathlib import Path

import pytest

from statemigrate.model import TableInfo, TableKind
from statemigrate.registry import engine_names
from statemigrate.testing.cli import describe, run_cli
from statemigrate.testing.stores import spec, store_file, write_content

EVENTS = TableInfo("events", TableKind.VERSIONED)
SETTINGS = TableInfo("settings")


def content() -> dict:
    return {
        EVENTS: [(b"e" + i.to_bytes(4, "big"), b"payload %d" % i, i) for i in range(2_000)],
        SETTINGS: [(b"s" + i.to_bytes(4, "big"), b"value %d" % i) for i in range(1_000)],
    }


def _changed() -> tuple[dict, list[str]]:
    """content() with one record flipped, one gone, one added and one version bumped;
    the lines verify must print for them."""
    changed = content()
    ev, st = changed[EVENTS], changed[SETTINGS]
    flipped, missing, extra, version = (
        b"s" + (500).to_bytes(4, "big"),
        ev[700][0],
        b"s\xff\x00",
        ev[1200][0],
    )
    st[500] = (flipped, bytes([st[500][1][0] ^ 1]) + st[500][1][1:])
    del ev[700]
    st.append((extra, b"new"))
    idx = next(i for i, r in enumerate(ev) if r[0] == version)
    ev[idx] = (version, ev[idx][1], ev[idx][2] + 1)
    lines = [
        f"settings: key {flipped.hex()}: value differs",
        f"events: key {missing.hex()}: missing in B",
        f"settings: key {extra.hex()}: missing in A",
        f"events: key {version.hex()}: version differs",
    ]
    return changed, lines


@pytest.mark.parametrize("engine", engine_names())
def test_verify_reports_each_difference_with_its_key(engine: str, tmp_path: Path) -> None:
    a = write_content("sqlite", store_file("sqlite", tmp_path, "a"), content())
    changed, lines = _changed()
    b = write_content(engine, store_file(engine, tmp_path, "b"), changed)

    run = run_cli(["verify", spec("sqlite", a), spec(engine, b)])
    assert run.returncode == 1, describe(run)
    out = run.stdout
    for line in lines:
        assert line in out, out
    assert "DIFFERENT (4 differences)" in out, out

    copy = store_file("jsonl", tmp_path, "copy")
    assert run_cli(["convert", "--quiet", spec(engine, b), spec("jsonl", copy)]).returncode == 0
    same = run_cli(["verify", spec(engine, b), spec("jsonl", copy)])
    assert same.returncode == 0, describe(same)
    assert "equal" in same.stdout


# Engines whose readers digest their files natively (Reader.native_digests): verify
# compares the two walks' digests first and merges records only where they differ.
WALKING = ["lmdb", "redb"]
PAIRS = [(x, y) for x in WALKING for y in WALKING]


@pytest.mark.parametrize("ea, eb", PAIRS)
def test_verify_between_walking_engines_names_each_difference(
    ea: str, eb: str, tmp_path: Path
) -> None:
    a = write_content(ea, store_file(ea, tmp_path, "a"), content())
    changed, lines = _changed()
    b = write_content(eb, store_file(eb, tmp_path, "b"), changed)
    run = run_cli(["verify", spec(ea, a), spec(eb, b)])
    assert run.returncode == 1, describe(run)
    for line in lines:
        assert line in run.stdout, run.stdout
    assert "DIFFERENT (4 differences)" in run.stdout, run.stdout


@pytest.mark.parametrize("ea, eb", PAIRS)
def test_equal_stores_on_walking_engines_are_verified_by_their_walks(
    ea: str, eb: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """No record is read one batch at a time, and the digests are those of the same
    records in SQLite, read there record by record."""
    from statemigrate import checksum, verify
    from statemigrate.engines.lmdb import LmdbReader
    from statemigrate.engines.redb.reader import RedbReader

    sqlite = write_content("sqlite", store_file("sqlite", tmp_path, "s"), content())
    expected = checksum(spec("sqlite", sqlite))
    a = write_content(ea, store_file(ea, tmp_path, "a"), content())
    b = write_content(eb, store_file(eb, tmp_path, "b"), content())

    def scanned(*_args: object, **_kw: object) -> None:
        raise AssertionError("read record by record")

    for reader in (LmdbReader, RedbReader):
        monkeypatch.setattr(reader, "scan", scanned)
    report = verify(spec(ea, a), spec(eb, b))
    assert report.equal and report.difference_count == 0, report.to_json()
    assert report.digest_a == report.digest_b == expected.digest
    for row in expected.tables:
        got = report.tables[row["table"]]
        assert got["equal"] and got["a"] == got["b"], got
        assert (got["a"]["count"], got["a"]["sum"]) == (row["count"], row["sum"]), (got, row)


# --- both sides at once: B's tables digested in a worker process ---------------------


@pytest.fixture
def beside(monkeypatch: pytest.MonkeyPatch) -> list[bool]:
    """The worker process for stores of any size (the command line waits for tens of MB);
    the list says, for each compare that asked the worker, whether it answered."""
    from statemigrate import verification

    monkeypatch.setattr(verification, "BESIDE_MIN_BYTES", 0)
    answered: list[bool] = []
    real = verification._digested_beside

    def spy(*a, **k):
        got = real(*a, **k)
        answered.append(got is not None)
        return got

    monkeypatch.setattr(verification, "_digested_beside", spy)
    return answered


def _as_compared(report) -> tuple:
    return (
        report.equal,
        report.difference_count,
        [d.line() for d in report.differences],
        report.digest_a,
        report.digest_b,
        report.tables,
    )


@pytest.mark.parametrize("engine", ["sqlite", "rocksdb", "libsql", "jsonl"])
def test_verify_beside_a_worker_gives_the_one_process_report(
    engine: str, tmp_path: Path, beside: list[bool]
) -> None:
    from statemigrate import api
    from statemigrate.testing.phases import Phases

    a = write_content("sqlite", store_file("sqlite", tmp_path, "a"), content())
    same = write_content(engine, store_file(engine, tmp_path, "same"), content())
    changed, lines = _changed()
    other = write_content(engine, store_file(engine, tmp_path, "other"), changed)
    for b in (same, other):
        one = api.verify(spec("sqlite", a), spec(engine, b))
        two = api.verify(spec("sqlite", a), spec(engine, b), workers=2, progress=Phases())
        assert _as_compared(two) == _as_compared(one)
    assert api.verify(spec("sqlite", a), spec(engine, same), workers=2).equal
    listed = [
        d.line() for d in api.verify(spec("sqlite", a), spec(engine, other), workers=2).differences
    ]
    assert sorted(listed) == sorted(lines)
    assert beside == [True] * 4  # the worker answered every compare that asked it


def test_a_failing_worker_leaves_the_error_to_this_process(
    tmp_path: Path, beside: list[bool]
) -> None:
    from statemigrate import api
    from statemigrate.errors import SourceError

    a = write_content("sqlite", store_file("sqlite", tmp_path, "a"), content())
    b = write_content("jsonl", store_file("jsonl", tmp_path, "b"), content())
    lines = b.read_bytes().splitlines(keepends=True)
    b.write_bytes(b"".join(lines[:-3]) + b'{"t": "settings", "k": "!!"}\n' + b"".join(lines[-2:]))
    with pytest.raises(SourceError) as one:
        api.verify(spec("sqlite", a), spec("jsonl", b))
    with pytest.raises(SourceError) as two:
        api.verify(spec("sqlite", a), spec("jsonl", b), workers=2)
    assert two.value.message == one.value.message
    assert beside == [False]  # the worker failed on the damaged line; this process named it
