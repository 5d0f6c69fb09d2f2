"""Ctrl-C, SIGTERM, --resume, leftovers and the destination lock, on every engine.

A real ``statemigrate convert`` runs in a subprocess and gets real signals.
"""

from __future__ import annotations

import fcntl
import json
import os
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from statemigrate.fsutil import HOLD_ENV
from statemigrate.registry import engine_names
from statemigrate.testing.cli import Run, cli_command, describe, one_line_error, run_cli
from statemigrate.testing.killpoints import copies_natively
from statemigrate.testing.stores import (
    build_store,
    digest_of,
    files_sha256,
    leftovers,
    spec,
    store_exists,
    store_file,
)

RECORDS = 20_000  # 40 batches: each test holds the convert in its first (interrupt)
BATCH = ["--batch-records", "500"]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    base = tmp_path_factory.mktemp("resume-source")
    path = store_file("sqlite", base, "source")
    digest = build_store("sqlite", path, RECORDS, seed=3)
    return path, digest


def interrupt(args: list[str], partial: Path, signals: list[int], timeout: float = 120) -> Run:
    """Run a convert held inside its first batch (``$STATEMIGRATE_HOLD_AT``: after the
    batch's write, before the stop is polled) and send ``signals`` there.

    No timing decides what is in flight: the process waits, holding the batch, until the
    hold file is removed; each signal after the first is sent only once the process has
    said it took the one before (a second signal that arrives before Python ran the
    handler would be handled once). ``timeout`` is a hang guard only.
    """
    hold = Path(tempfile.mkdtemp()) / "held"
    env = dict(os.environ, **{HOLD_ENV: f"batch:{hold}"})
    started = time.monotonic()
    proc = subprocess.Popen(
        cli_command() + args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env
    )
    deadline = started + timeout
    while not hold.exists() and proc.poll() is None and time.monotonic() < deadline:
        time.sleep(0.005)
    assert hold.exists(), f"the convert never reached its first batch (exit {proc.poll()})"
    assert partial.exists()  # the batch is written into the .partial, not yet checkpointed
    said: list[str] = []
    for i, sig in enumerate(signals):
        proc.send_signal(sig)
        if i + 1 < len(signals):  # wait for the handler's line before the next signal
            assert proc.stderr is not None
            while "stopping after the batch in flight" not in (line := proc.stderr.readline()):
                assert line, "the process ended before it took the first signal"
                said.append(line)
            said.append(line)
    hold.unlink(missing_ok=True)
    out, err = proc.communicate(timeout=timeout)
    return Run(args, proc.returncode, out, "".join(said) + err, time.monotonic() - started)


def convert_args(src: Path, dst_engine: str, final: Path, *extra: str) -> list[str]:
    return ["convert", "--quiet", *BATCH, spec("sqlite", src), spec(dst_engine, final), *extra]


def batch_args(src: Path, dst_engine: str, final: Path) -> list[str]:
    """:func:`convert_args` of a convert that runs the batch loop these tests are about: a
    same-engine pair is named its tables (a plain one takes the engine's own copy, whose
    stops tests/test_native_copy.py covers; it may also end before a signal lands)."""
    if copies_natively("sqlite", dst_engine):
        return convert_args(src, dst_engine, final, "--tables", "empty,events,settings")
    return convert_args(src, dst_engine, final)


@pytest.mark.parametrize("dst", engine_names())
def test_ctrl_c_prints_how_to_resume_and_resume_finishes(dst: str, source, tmp_path: Path) -> None:
    src, src_digest = source
    final = store_file(dst, tmp_path, "out")
    partial = final.with_name(final.name + ".partial")
    args = batch_args(src, dst, final)
    run = interrupt(args, partial, [signal.SIGINT])
    assert run.returncode == 6, describe(run)
    line = one_line_error(run)
    assert "interrupted" in line
    assert "--resume" in run.stderr
    assert not store_exists(dst, final), "an interrupted convert put something at the final path"
    assert partial.exists()

    again = run_cli(args)  # the same command without --resume: refused, both ways out named
    assert again.returncode == 5, describe(again)
    line = one_line_error(again)
    assert "--resume" in again.stderr and "remove" in again.stderr

    resumed = run_cli(args + ["--resume", "--json"], timeout=300)
    assert resumed.returncode == 0, describe(resumed)
    assert '"resumed": true' in resumed.stdout and '"verified": true' in resumed.stdout
    assert digest_of(dst, final) == src_digest
    assert leftovers(final) == []


@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_twice_stops_at_once_and_stays_resumable(sig: int, source, tmp_path: Path) -> None:
    src, src_digest = source
    dst = "rocksdb" if sig == signal.SIGTERM else "sqlite"
    final = store_file(dst, tmp_path, "out")
    partial = final.with_name(final.name + ".partial")
    args = batch_args(src, dst, final)
    run = interrupt(args, partial, [sig, sig])
    assert run.returncode == 6, describe(run)
    assert "stopped at once" in run.stderr and "Traceback" not in run.stderr, describe(run)
    assert not store_exists(dst, final)
    resumed = run_cli(args + ["--resume"])
    assert resumed.returncode == 0, describe(resumed)
    assert digest_of(dst, final) == src_digest


def test_signal_twice_with_json_still_prints_one_object(source, tmp_path: Path) -> None:
    """The hard stop leaves, like every other path, one JSON object on stdout."""
    src, src_digest = source
    final = store_file("sqlite", tmp_path, "out")
    partial = final.with_name(final.name + ".partial")
    args = ["convert", "--json", *BATCH, spec("sqlite", src), spec("sqlite", final)]
    args += ["--tables", "empty,events,settings"]  # the batch loop, where the hold is
    run = interrupt(args, partial, [signal.SIGINT, signal.SIGINT])
    assert run.returncode == 6, describe(run)
    assert "stopped at once" in run.stderr, describe(run)
    out = json.loads(run.stdout)
    assert (out["command"], out["status"], out["exit_code"]) == ("convert", "interrupted", 6)
    assert out["error"].startswith("stopped at once") and "--resume" in out["hint"]
    assert (out["source"], out["destination"]) == (spec("sqlite", src), spec("sqlite", final))
    assert run_cli(args + ["--resume"]).returncode == 0
    assert digest_of("sqlite", final) == src_digest


def test_sigterm_once_behaves_like_ctrl_c(source, tmp_path: Path) -> None:
    src, src_digest = source
    final = store_file("jsonl", tmp_path, "out")
    args = convert_args(src, "jsonl", final)
    run = interrupt(args, final.with_name(final.name + ".partial"), [signal.SIGTERM])
    assert run.returncode == 6, describe(run)
    assert "--resume" in run.stderr
    assert run_cli(args + ["--resume"]).returncode == 0
    assert digest_of("jsonl", final) == src_digest


@pytest.mark.parametrize("keep_mtime", [False, True], ids=["mtime-changed", "mtime-restored"])
def test_source_changed_while_interrupted_is_refused(keep_mtime: bool, tmp_path: Path) -> None:
    import apsw

    src = store_file("sqlite", tmp_path, "src")
    build_store("sqlite", src, RECORDS, seed=4)
    final = store_file("sqlite", tmp_path, "out")
    # --tables: the batch loop and its checkpoint (a plain sqlite -> sqlite convert is
    # SQLite's own copy, which keeps none: a resume reads it back or starts over).
    args = convert_args(src, "sqlite", final, "--tables", "empty,events,settings")
    run = interrupt(args, final.with_name(final.name + ".partial"), [signal.SIGINT])
    assert run.returncode == 6, describe(run)
    st = src.stat()
    conn = apsw.Connection(str(src))
    # Same size: one value changes one byte, in the table done first.
    conn.execute(
        "UPDATE events SET value = zeroblob(length(value)) WHERE key = (SELECT min(key) FROM events)"
    )
    conn.close()
    if keep_mtime:
        os.utime(src, ns=(st.st_atime_ns, st.st_mtime_ns))
    resumed = run_cli(args + ["--resume"])
    assert resumed.returncode == 4, describe(resumed)
    line = one_line_error(resumed)
    assert "source changed" in line
    assert "start over" in resumed.stderr
    assert not store_exists("sqlite", final)


def test_resume_with_another_source_is_refused(source, tmp_path: Path) -> None:
    src, _ = source
    other = store_file("sqlite", tmp_path, "other")
    build_store("sqlite", other, 1000, seed=5)
    final = store_file("rocksdb", tmp_path, "out")
    args = convert_args(src, "rocksdb", final)
    assert (
        interrupt(args, final.with_name(final.name + ".partial"), [signal.SIGINT]).returncode == 6
    )
    wrong = run_cli(convert_args(other, "rocksdb", final, "--resume"))
    assert wrong.returncode == 4, describe(wrong)
    one_line_error(wrong)
    assert not store_exists("rocksdb", final)


def test_resume_without_partial_just_converts(source, tmp_path: Path) -> None:
    src, src_digest = source
    final = store_file("sqlite", tmp_path, "out")
    run = run_cli(convert_args(src, "sqlite", final, "--resume"))
    assert run.returncode == 0, describe(run)
    assert digest_of("sqlite", final) == src_digest


def test_a_second_convert_of_the_same_destination_gets_exit_3(source, tmp_path: Path) -> None:
    src, _ = source
    final = store_file("sqlite", tmp_path, "out")
    lock = final.with_name(final.name + ".lock")
    fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        os.write(fd, b"4242")
        # Refused at once rather than waiting for the lock: a run still going after the
        # hang guard (120 s) fails as a hang; no stopwatch decides.
        run = run_cli(convert_args(src, "sqlite", final), timeout=120)
        assert run.returncode == 3, describe(run)
        assert "4242" in one_line_error(run)
        assert not store_exists("sqlite", final)
        assert not final.with_name(final.name + ".partial").exists()
    finally:
        os.close(fd)


def test_two_converts_racing_for_one_destination(source, tmp_path: Path) -> None:
    """Started together: exactly one writes, the other gets exit 3 (or 0/5 if it came after)."""
    src, src_digest = source
    final = store_file("sqlite", tmp_path, "out")
    args = cli_command() + convert_args(src, "sqlite", final)
    procs = [
        subprocess.Popen(args, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for _ in range(3)
    ]
    codes = sorted(p.wait(timeout=120) for p in procs)
    assert codes.count(0) == 1, codes
    assert set(codes) <= {0, 3, 5}, codes
    assert digest_of("sqlite", final) == src_digest


@pytest.mark.parametrize("engine", engine_names())
def test_reading_never_modifies_a_store(engine: str, tmp_path: Path) -> None:
    """convert (as source), verify, checksum and inspect leave every file of a store as it was."""
    src = store_file("sqlite", tmp_path, "src")
    build_store("sqlite", src, 5_000, seed=6)
    store = store_file(engine, tmp_path, "store")
    assert run_cli(["convert", "--quiet", spec("sqlite", src), spec(engine, store)]).returncode == 0
    before = files_sha256(engine, store)
    stat_before = {p: os.stat(tmp_path / p).st_mtime_ns for p in before}
    other = store_file("rocksdb", tmp_path, "back")
    for args in (
        ["convert", "--quiet", spec(engine, store), spec("rocksdb", other)],
        ["verify", spec(engine, store), spec("sqlite", src)],
        ["checksum", spec(engine, store)],
        ["inspect", spec(engine, store)],
    ):
        run = run_cli(args)
        assert run.returncode == 0, describe(run)
        assert files_sha256(engine, store) == before, (
            f"statemigrate {args[0]} modified the {engine} store"
        )
    assert {p: os.stat(tmp_path / p).st_mtime_ns for p in before} == stat_before
    assert sorted(os.listdir(tmp_path)) == sorted(["src.sqlite", store.name, other.name])


@pytest.mark.parametrize("src_engine", engine_names())
def test_a_killed_convert_resumes_from_every_source_engine(src_engine: str, tmp_path: Path) -> None:
    """kill -9 in the middle of the batches, then ``--resume``, from each engine as the
    source: the resume reads the whole source again to check it did not change (a second
    reader of an LMDB store was refused, "already open in this process": exit 4)."""
    src = store_file(src_engine, tmp_path, "source")
    digest = build_store(src_engine, src, 3_000, seed=5)
    dst = "rocksdb" if src_engine == "sqlite" else "sqlite"  # not SQLite's own copy: batches
    final = store_file(dst, tmp_path, "out")
    args = ["convert", "--quiet", "--batch-records", "100", spec(src_engine, src), spec(dst, final)]
    killed = run_cli(args, env={"STATEMIGRATE_CRASH_AT": "batch"})
    assert killed.returncode == -signal.SIGKILL, describe(killed)
    assert final.with_name(final.name + ".partial").exists()
    resumed = run_cli([*args, "--resume"], timeout=300)
    assert resumed.returncode == 0, describe(resumed)
    assert digest_of(dst, final) == digest
    assert leftovers(final) == []
