"""The command line through click's CliRunner: outputs and every exit code of the contract."""

from __future__ import annotations

import contextlib
import errno
import io
import json
import os
import re
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from statemigrate.cli import main
from statemigrate.engines.sqlite import SqliteEngine
from statemigrate.model import TableInfo, TableKind
from statemigrate.testing.stores import tree_sha256, write_store

ROOT = Path(__file__).resolve().parents[1]
HANG_GUARD = 120  # seconds: a generous guard against a hung child, never a measurement


def run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def src(tmp_path: Path) -> Path:
    content = {
        TableInfo("events"): [(b"e%03d" % i, b"payload %d" % i) for i in range(50)],
        TableInfo("settings", TableKind.VERSIONED): [(b"s1", b"on", 3), (b"s2", b"off", 2**64 - 1)],
    }
    return write_store(SqliteEngine, tmp_path / "a.sqlite", content, metadata={"schema": b"demo"})


def test_convert_verify_checksum_exit_0(src: Path, tmp_path: Path):
    before = tree_sha256(src)
    res = run("convert", src, tmp_path / "b.rocksdb", "--json")
    assert res.exit_code == 0, res.output
    report = json.loads(res.output)
    assert report["verified"] and report["records"] == 52
    res = run("verify", src, tmp_path / "b.rocksdb")
    assert res.exit_code == 0 and "equal" in res.output
    res = run("checksum", tmp_path / "b.rocksdb")
    assert res.exit_code == 0 and f"store digest {report['store_digest']}" in res.output
    assert tree_sha256(src) == before


def test_verify_lists_differences_exit_1(src: Path, tmp_path: Path):
    other = tmp_path / "c.sqlite"
    shutil.copy(src, other)
    import apsw

    con = apsw.Connection(str(other))
    con.execute("UPDATE events SET value = x'00' WHERE key = CAST('e007' AS BLOB)")
    con.execute("DELETE FROM events WHERE key = CAST('e010' AS BLOB)")
    con.execute("INSERT INTO events VALUES (CAST('zz' AS BLOB), x'01')")
    con.execute("UPDATE settings SET version = 4 WHERE key = CAST('s1' AS BLOB)")
    con.close()
    res = run("verify", src, other)
    assert res.exit_code == 1
    assert f"events: key {b'e007'.hex()}: value differs" in res.output
    assert f"events: key {b'e010'.hex()}: missing in B" in res.output
    assert f"events: key {b'zz'.hex()}: missing in A" in res.output
    assert f"settings: key {b's1'.hex()}: version differs" in res.output
    res = run("verify", src, other, "--json", "--limit", "1")
    data = json.loads(res.output)
    assert res.exit_code == 1 and data["difference_count"] == 4 and len(data["differences"]) == 1


def test_manifest_round_trip(src: Path, tmp_path: Path):
    res = run("checksum", src, "--json")
    manifest = tmp_path / "m.json"
    manifest.write_text(res.output)
    assert run("convert", src, tmp_path / "d.jsonl").exit_code == 0
    assert run("verify", tmp_path / "d.jsonl", "--manifest", manifest).exit_code == 0
    data = json.loads(res.output)
    data["tables"][0]["count"] += 1
    manifest.write_text(json.dumps(data))
    res = run("verify", src, "--manifest", manifest)
    assert res.exit_code == 1 and "digest differs" in res.output


def test_usage_errors_exit_2(src: Path, tmp_path: Path):
    res = run("convert", src, tmp_path / "x.unknown")
    assert res.exit_code == 2 and "--to" in res.output
    res = run("convert", "--to", "nosuch", src, tmp_path / "x")
    assert res.exit_code == 2 and "unknown engine 'nosuch'" in res.output and "sqlite" in res.output
    assert run("convert", "--bogus", src, tmp_path / "x").exit_code == 2
    assert run("verify", src).exit_code == 2


def test_busy_destination_exit_3(src: Path, tmp_path: Path):
    import os

    dst = tmp_path / "b.sqlite"
    fd = os.open(tmp_path / "b.sqlite.lock", os.O_RDWR | os.O_CREAT)
    import subprocess
    import sys

    # Another process holds the destination's lock (flock is per open file, so a child).
    child = subprocess.Popen(
        [
            sys.executable,
            "-c",
            (
                "import fcntl,os,sys,time;fd=os.open(sys.argv[1],os.O_RDWR);"
                "fcntl.flock(fd,fcntl.LOCK_EX);os.write(fd,b'4242');print('ok',flush=True);time.sleep(30)"
            ),
            str(tmp_path / "b.sqlite.lock"),
        ],
        stdout=subprocess.PIPE,
    )
    try:
        assert child.stdout.readline().strip() == b"ok"
        res = run("convert", src, dst)
        assert res.exit_code == 3 and "4242" in res.output
    finally:
        child.kill()
        child.wait()
        os.close(fd)


def test_truncated_source_exit_4_leaves_nothing(src: Path, tmp_path: Path):
    bad = tmp_path / "bad.sqlite"
    bad.write_bytes(src.read_bytes()[:3000])
    before = tree_sha256(bad)
    res = run("convert", bad, tmp_path / "out.rocksdb")
    assert res.exit_code == 4, res.output
    lines = [line for line in res.output.splitlines() if line.strip()]
    assert lines[0].startswith("statemigrate: error: ") and "Traceback" not in res.output
    assert not (tmp_path / "out.rocksdb").exists()
    assert tree_sha256(bad) == before


def test_wrong_engine_and_missing_source_exit_4(src: Path, tmp_path: Path):
    res = run("convert", "--from", "rocksdb", src, tmp_path / "o.sqlite")
    assert res.exit_code == 4 and "not a RocksDB store" in res.output
    res = run("convert", tmp_path / "nope.sqlite", tmp_path / "o.sqlite")
    assert res.exit_code == 4 and "no such file" in res.output
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"hello world" * 10)
    res = run("inspect", junk)
    assert res.exit_code == 4 and "not a store of any known engine" in res.output


def test_existing_destination_exit_5_and_overwrite(src: Path, tmp_path: Path):
    dst = tmp_path / "b.sqlite"
    dst.write_bytes(b"precious")
    res = run("convert", src, dst)
    assert res.exit_code == 5 and "already exists" in res.output and "--overwrite" in res.output
    assert dst.read_bytes() == b"precious"
    res = run("convert", src, dst, "--overwrite")  # not a SQLite store: never replaced (B4)
    assert res.exit_code == 5 and "not a sqlite store" in res.output
    assert dst.read_bytes() == b"precious"
    dst.unlink()
    assert run("convert", src, dst).exit_code == 0
    res = run("convert", src, dst, "--overwrite")  # a store of the engine is replaced
    assert res.exit_code == 0
    assert run("verify", src, dst).exit_code == 0


def test_leftover_partial_exit_5_names_both_options(src: Path, tmp_path: Path):
    (tmp_path / "b.sqlite.partial").write_bytes(b"")
    res = run("convert", src, tmp_path / "b.sqlite")
    assert res.exit_code == 5 and "--resume" in res.output and "remove" in res.output


def test_interrupted_exit_6_then_resume(src: Path, tmp_path: Path, monkeypatch):
    from statemigrate import api

    calls = {"n": 0}
    real = api.convert

    def stop_after_two(*a, **kw):
        def should_stop():
            calls["n"] += 1
            return calls["n"] >= 2

        kw["should_stop"] = should_stop
        return real(*a, **kw)

    monkeypatch.setattr("statemigrate.api.convert", stop_after_two)
    res = run("convert", src, tmp_path / "b.rocksdb", "--batch-records", "10")
    assert res.exit_code == 6 and "--resume" in res.output
    assert (tmp_path / "b.rocksdb.partial").exists() and not (tmp_path / "b.rocksdb").exists()
    monkeypatch.setattr("statemigrate.api.convert", real)
    res = run("convert", src, tmp_path / "b.rocksdb", "--resume", "--json")
    assert res.exit_code == 0, res.output
    assert json.loads(res.output)["resumed"] is True
    assert run("verify", src, tmp_path / "b.rocksdb").exit_code == 0


def test_internal_error_exit_70(src: Path, tmp_path: Path, monkeypatch):
    def boom(*a, **kw):
        raise RuntimeError("kaboom")

    monkeypatch.setattr("statemigrate.api.checksum", boom)
    res = run("checksum", src)
    assert res.exit_code == 70 and "internal error" in res.output and "kaboom" in res.output
    assert "Traceback" not in res.output
    res = CliRunner().invoke(main, ["--traceback", "checksum", str(src)])
    assert res.exit_code == 70 and "Traceback" in res.output


def test_inspect_and_engines(src: Path):
    res = run("inspect", src, "--json")
    data = json.loads(res.output)
    assert res.exit_code == 0 and data["engine"] == "sqlite" and data["schema"] == "demo"
    assert {t["table"]: t["records"] for t in data["tables"]} == {"events": 50, "settings": 2}
    res = run("engines", "--json")
    names = {e["name"] for e in json.loads(res.output)["engines"]}
    assert {"sqlite", "rocksdb", "jsonl"} <= names


def test_every_command_has_help_and_is_in_the_readme():
    readme = (ROOT / "README.md").read_text()
    for name, cmd in main.commands.items():
        assert cmd.help and len(cmd.help) > 20, name
        assert re.search(rf"statemigrate {re.escape(name)}\b", readme), (
            f"README lacks `statemigrate {name}`"
        )
    top = run("--help").output
    for code in ("0 ", "1 ", "2 ", "3 ", "4 ", "5 ", "6 ", "70 "):
        assert f"  {code}" in top


def test_help_imports_no_driver():
    import subprocess
    import sys

    code = (
        "import sys; from statemigrate.cli import main\n"
        "try:\n main(['--help'])\nexcept SystemExit: pass\n"
        "bad=[m for m in ('apsw','rocksdict','lmdb','statemigrate._native','alembic') if m in sys.modules]\n"
        "print('LOADED:' + ','.join(bad))"
    )
    out = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True
    ).stdout
    assert out.strip().splitlines()[-1] == "LOADED:"


# --- what a person sees (issue 15) -----------------------------------------------------


class _ClosedAfterFirstLine(io.TextIOWrapper):
    """stdout of ``| head -1``: the reader goes away after the first line."""

    def write(self, text: str) -> int:
        if getattr(self, "_line_done", False):
            raise BrokenPipeError(errno.EPIPE, "Broken pipe")
        self._line_done = "\n" in text
        return super().write(text)


class _ReaderGoesAway(CliRunner):
    @contextlib.contextmanager
    def isolation(self, *args, **kwargs):
        with super().isolation(*args, **kwargs) as streams:
            real = sys.stdout
            sys.stdout = _ClosedAfterFirstLine(real.buffer, encoding="utf-8")
            try:
                yield streams
            finally:
                sys.stdout.detach()
                sys.stdout = real


@pytest.mark.parametrize("args", [["inspect", "{src}"], ["checksum", "{src}"], ["engines"]])
def test_a_reader_that_goes_away_ends_the_command_quietly(src: Path, args: list[str]) -> None:
    args = [a.format(src=src) for a in args]
    res = _ReaderGoesAway().invoke(main, args, catch_exceptions=False)
    assert res.exit_code == 0, res.output
    assert res.stderr == "" and len(res.stdout.splitlines()) == 1


def _run_into_a_closed_pipe(args: list[str], stream: str) -> subprocess.CompletedProcess:
    """``statemigrate ARGS`` with ``stream`` (stdout or stderr) a pipe whose reader has
    gone (``| head -1`` already exited): every write to it is EPIPE. The other stream is
    captured (stderr) or dropped (stdout)."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    other = subprocess.PIPE if stream == "stdout" else subprocess.DEVNULL
    streams = {"stdout": other, "stderr": other, stream: write_end}
    try:
        return subprocess.run(
            [sys.executable, "-m", "statemigrate", *args],
            check=False,
            text=True,
            timeout=HANG_GUARD,
            **streams,
        )
    finally:
        os.close(write_end)


def test_a_closed_pipe_is_exit_0_with_nothing_on_stderr(src: Path) -> None:
    proc = _run_into_a_closed_pipe(["inspect", str(src)], "stdout")
    assert proc.returncode == 0 and proc.stderr == ""


@pytest.mark.parametrize("target", ["sqlite", "lmdb"])
def test_a_closed_stderr_does_not_stop_a_convert(src: Path, tmp_path: Path, target: str) -> None:
    """``convert … 2>&1 | head`` whose reader has gone: the convert finishes and places
    the store (same digest as the source), and a refusal keeps its exit code."""
    from statemigrate import checksum

    dst = tmp_path / f"out.{target}"
    args = ["convert", str(src), f"{target}:{dst}"]
    # The second time, DST exists: exit 5 with nobody to tell.
    codes = [_run_into_a_closed_pipe(args, "stderr").returncode for _ in range(2)]
    assert codes == [0, 5]
    assert checksum(f"{target}:{dst}").digest == checksum(str(src)).digest
    assert not Path(f"{dst}.partial").exists()


def test_traceback_is_accepted_after_the_subcommand_too(src: Path, monkeypatch) -> None:
    monkeypatch.setattr("statemigrate.api.checksum", _boom)
    for args in (["checksum", str(src), "--traceback"], ["--traceback", "checksum", str(src)]):
        res = CliRunner().invoke(main, args)
        assert res.exit_code == 70 and "Traceback" in res.output and "kaboom" in res.output
    res = CliRunner().invoke(main, ["checksum", str(src)])
    assert res.exit_code == 70 and "Traceback" not in res.output
    assert "--traceback" not in run("checksum", "--help").output  # hidden: the group's option


def _boom(*_args, **_kwargs):
    raise RuntimeError("kaboom")


def test_hints_name_only_options_the_command_has(tmp_path: Path) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"hello world" * 10)
    for verb in (["inspect"], ["checksum"], ["verify", junk]):
        res = run(*verb, junk)
        assert res.exit_code == 4 and "not a store of any known engine" in res.output
        assert "ENGINE:PATH" in res.output and "--from" not in res.output, res.output
    res = run("convert", junk, tmp_path / "o.sqlite")
    assert res.exit_code == 4 and "--from" in res.output and "ENGINE:PATH" in res.output


def test_hint_filter_keeps_what_the_command_can_do() -> None:
    from statemigrate.cli.output import hint_for

    both = "name the engine as ENGINE:PATH or with --from"
    assert hint_for(both, {"--from"}) == both
    assert hint_for(both, set()) == "name the engine as ENGINE:PATH"
    steps = "free some space, then run the same command with --resume"
    assert hint_for(steps, {"--json"}) == "free some space"
    assert hint_for("pass --overwrite to replace it", set()) is None
    assert hint_for(None, set()) is None


def test_resume_of_a_complete_destination_says_there_is_nothing_to_do(
    src: Path, tmp_path: Path
) -> None:
    dst = tmp_path / "b.jsonl"
    killed = subprocess.run(  # killed after the rename: DST is complete, its marks are left
        [sys.executable, "-m", "statemigrate", "convert", "--quiet", str(src), str(dst)],
        env={**os.environ, "STATEMIGRATE_CRASH_AT": "placed"},
        capture_output=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert killed.returncode == -signal.SIGKILL and dst.exists()
    res = run("convert", "--resume", src, dst)
    assert res.exit_code == 0, res.output
    assert res.stdout.splitlines()[0] == f"nothing to do: {dst} is already complete"
    assert "converted" not in res.stdout
    assert run("verify", src, dst).exit_code == 0
    report = json.loads(run("convert", "--resume", src, dst, "--json").stdout)
    assert report["already_complete"] is True
    assert {t["name"]: t["bytes"] for t in report["tables"]} == _payload_bytes(src)


def test_inspect_text_reports_an_interrupted_upgrade(tmp_path: Path) -> None:
    pending = {"revision": "0002", "to": ["0002"], "direction": "upgrade", "tables": []}
    store = write_store(  # what a kill during a revision leaves: its pending entry
        SqliteEngine,
        tmp_path / "s.sqlite",
        {TableInfo("events"): [(b"k", b"v")]},
        metadata={"upgrade_pending": json.dumps(pending).encode()},
    )
    res = run("inspect", store)
    assert res.exit_code == 0, res.output
    line = next(x for x in res.stdout.splitlines() if x.startswith("upgrade "))
    assert "an upgrade to 0002 was interrupted" in line and "statemigrate upgrade" in line
    assert json.loads(run("inspect", store, "--json").stdout)["upgrade_interrupted"]
    clean = run("inspect", _clean_store(tmp_path))
    assert clean.exit_code == 0 and "interrupted" not in clean.stdout


def _clean_store(tmp_path: Path) -> Path:
    return write_store(SqliteEngine, tmp_path / "c.sqlite", {TableInfo("events"): [(b"k", b"v")]})


def _payload_bytes(store: Path) -> dict[str, int]:
    """Each table's key and value bytes, as inspect reads them from the store."""
    return {
        t["table"]: t["bytes"] for t in json.loads(run("inspect", store, "--json").stdout)["tables"]
    }


def test_convert_json_reports_each_tables_payload_bytes(src: Path, tmp_path: Path, monkeypatch):
    expected = _payload_bytes(src)
    assert expected["events"] == sum(len(b"e%03d" % i) + len(b"payload %d" % i) for i in range(50))
    assert expected["settings"] == len(b"s1on") + len(b"s2off")
    fresh = json.loads(run("convert", src, tmp_path / "fresh.jsonl", "--json").stdout)
    assert {t["name"]: t["bytes"] for t in fresh["tables"]} == expected
    # Stopped after two batches, then resumed: the report covers the whole tables, not
    # only what the second run copied.
    from statemigrate import api

    calls = {"n": 0}
    real = api.convert

    def stop_after_two(*a, **kw):
        def should_stop():
            calls["n"] += 1
            return calls["n"] >= 2

        return real(*a, **{**kw, "should_stop": should_stop})

    dst = tmp_path / "b.rocksdb"
    monkeypatch.setattr("statemigrate.api.convert", stop_after_two)
    assert run("convert", src, dst, "--batch-records", "10").exit_code == 6
    monkeypatch.setattr("statemigrate.api.convert", real)
    resumed = json.loads(run("convert", src, dst, "--resume", "--json").stdout)
    assert resumed["resumed"] and {t["name"]: t["bytes"] for t in resumed["tables"]} == expected
