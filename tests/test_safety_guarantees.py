"""Guarantees of the README's "Safety" section that no other test pinned down (the
mutation list, tests/mutants/mutations.toml, needed a test that fails without them).

The destination is synced before the rename that places it: every file of
``DST.partial``, every directory in it and the directory itself are fsynced before the
``os.rename`` that makes it ``DST``, on the batch path and on each engine's own copy,
for file and directory stores (an engine's copy also before its finished mark, which a
``--resume`` keeps it by). Only the pipeline's own syncs count
(``os.fsync``, recorded here with the path each descriptor names): a driver's fsyncs
run in C and are not seen, so a store the pipeline forgot to sync fails even where a
driver happened to sync its file.

Verification compares the source with the destination on the batch path too: a writer
that loses a record is caught by the read back, and nothing is placed. Nothing follows
a link: one planted as the finished mark while the copy runs is not written through.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from statemigrate import convert
from statemigrate.model import TableInfo, TableKind
from statemigrate.registry import get_engine
from statemigrate.testing.phases import Phases
from statemigrate.testing.stores import read_store, write_store

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux"), reason="names a descriptor's file by /proc/self/fd"
)

CONTENT = {
    TableInfo("events", TableKind.VERSIONED): [(b"k%03d" % i, b"v" * i, i) for i in range(300)],
    TableInfo("settings"): [(b"theme", b"dark"), (b"token", b"secret")],
}
METADATA = {"schema": b"sync-test", "revision": b'["0001"]'}
NATIVE = ["sqlite", "lmdb", "rocksdb", "redb"]  # the engines with their own copy
CASES = [(e, "native") for e in NATIVE] + [
    (e, "batch") for e in ("sqlite", "lmdb", "rocksdb", "redb", "fjall3", "jsonl")
]


def below(top: Path) -> list[Path]:
    """``top`` and, for a directory, every file and directory in it."""
    if not top.is_dir():
        return [top]
    out = [top]
    for root, dirs, files in os.walk(top):
        out += [Path(root) / n for n in (*dirs, *files)]
    return out


@pytest.mark.parametrize(("engine", "path"), CASES, ids=[f"{e}-{p}" for e, p in CASES])
def test_every_file_of_the_destination_is_synced_before_the_rename(
    engine: str, path: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    eng = get_engine(engine)
    src = write_store(eng, tmp_path / f"src.{engine}", CONTENT, METADATA)
    events: list[tuple[str, str, str]] = []
    real_fsync, real_rename = os.fsync, os.rename

    def fsync(fd: int) -> None:
        events.append(("fsync", os.path.realpath(f"/proc/self/fd/{fd}"), ""))
        real_fsync(fd)

    def rename(a, b, *args, **kwargs) -> None:  # type: ignore[no-untyped-def]
        events.append(("rename", os.path.realpath(a), os.path.realpath(b)))
        real_rename(a, b, *args, **kwargs)

    real_open = os.open

    def open_(path, flags, *args, **kwargs):  # type: ignore[no-untyped-def]
        if str(path).endswith(".partial.done") and flags & os.O_CREAT:
            events.append(("mark", os.path.realpath(path), ""))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "fsync", fsync)
    monkeypatch.setattr(os, "rename", rename)
    monkeypatch.setattr(os, "open", open_)
    dst = (tmp_path / f"dst.{engine}").resolve()
    progress = Phases()
    names = [t.name for t in CONTENT] if path == "batch" else None  # named: the batch loop
    report = convert(f"{engine}:{src}", f"{engine}:{dst}", tables=names, progress=progress)
    monkeypatch.undo()

    assert report.verified and progress.native() == (path == "native")
    partial = f"{dst}.partial"
    placing = [i for i, e in enumerate(events) if e[:3] == ("rename", partial, str(dst))]
    assert len(placing) == 1, [e for e in events if e[0] == "rename"]
    synced = {p for kind, p, _ in events[: placing[0]] if kind == "fsync"}
    want = {os.path.normpath(os.path.join(partial, os.path.relpath(p, dst))) for p in below(dst)}
    assert sorted(want - synced) == []
    if path == "native":  # and before the finished mark that a --resume keeps it by
        marked = [i for i, e in enumerate(events) if e[0] == "mark"]
        assert len(marked) == 1
        synced = {p for kind, p, _ in events[: marked[0]] if kind == "fsync"}
        assert sorted(want - synced) == []
    assert read_store(eng, dst)["tables"] == read_store(eng, src)["tables"]


class LosesOneRecord:
    """A real writer of the engine that drops the first record of ``settings`` it is given
    (a destination engine losing a write): everything else goes through unchanged."""

    def __init__(self, writer: object) -> None:
        self._writer = writer
        self.lost = False

    def __getattr__(self, name: str) -> object:
        return getattr(self._writer, name)

    def write_batch(self, table, batch, metadata=None):  # type: ignore[no-untyped-def]
        if table.name == "settings" and not self.lost and batch:
            self.lost, batch = True, batch[1:]
        return self._writer.write_batch(table, batch, metadata)  # type: ignore[attr-defined]


@pytest.mark.parametrize("engine", ["sqlite", "lmdb", "rocksdb", "jsonl"])
def test_the_batch_path_verifies_against_the_source_and_places_nothing(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from statemigrate.errors import DestinationError
    from statemigrate.testing.stores import leftovers

    src = write_store(get_engine("sqlite"), tmp_path / "src.sqlite", CONTENT, METADATA)
    eng = get_engine(engine)
    real = eng.create_writer
    monkeypatch.setattr(
        eng,
        "create_writer",
        classmethod(lambda cls, path, options=None: LosesOneRecord(real(path, options))),
    )
    dst = tmp_path / f"dst.{engine}"
    progress = Phases()
    with pytest.raises(DestinationError, match="verification failed for table 'settings'") as err:
        names = [t.name for t in CONTENT]  # named: the batch loop, for SQLite to SQLite too
        convert(f"sqlite:{src}", f"{engine}:{dst}", tables=names, progress=progress)
    assert "1 records read back, 2 written" in err.value.message
    assert not progress.native() and "verifying" in progress.phases
    assert not dst.exists() and leftovers(dst) == []


def test_a_link_planted_as_the_finished_mark_is_never_written_through(tmp_path: Path) -> None:
    """A symbolic link put at ``DST.partial.done`` while the engine's own copy runs (held at
    the step after the copy) is not followed when the mark is made: its target keeps its
    bytes, and nothing is placed from the run."""
    import subprocess
    import time

    from statemigrate.fsutil import HOLD_ENV
    from statemigrate.testing.cli import cli_command

    src = write_store(get_engine("lmdb"), tmp_path / "src.lmdb", CONTENT, METADATA)
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    dst, hold = tmp_path / "dst.lmdb", tmp_path / "held"
    env = dict(os.environ, **{HOLD_ENV: f"copied:{hold}"})
    child = subprocess.Popen(
        [*cli_command(), "convert", "-q", str(src), str(dst)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60  # a hang guard, never a measurement
        while not hold.exists() and child.poll() is None and time.monotonic() < deadline:
            time.sleep(0.01)
        assert hold.exists(), child.communicate(timeout=60)
        Path(f"{dst}.partial.done").symlink_to(victim)
        hold.unlink()
        _out, err = child.communicate(timeout=120)
    finally:
        if child.poll() is None:
            child.kill()
            child.wait()
    assert victim.read_text() == "precious\n"
    assert child.returncode == 5 and not dst.exists(), err  # the destination's problem
    assert "finished mark" in err and len(err.strip().splitlines()) <= 2, err
