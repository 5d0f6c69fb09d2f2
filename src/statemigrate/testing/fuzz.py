"""The readers under a fuzzer: mutated copies of committed fixture stores (tests only).

Every engine is fuzzed from the same bytes on every run: its seed store is a copy of a
committed fixture (:func:`seed_fixture`), never a freshly written store (RocksDB and HelixDB
name their files and write their manifests differently on each build, so the same
random choices would hit different bytes each time).

A mutated store is read in a child process, so that a driver that crashes (SIGBUS,
SIGSEGV, an abort) fails one example instead of killing the test runner:

- :class:`ReaderWorker` keeps one child per engine that reads store after store (fast);
  if it dies, the example fails naming the signal, and a new child takes over;
- :func:`read_with_cli` runs ``statemigrate checksum`` afresh for each store, for drivers
  known to abort the interpreter (HelixDB: "FATAL: exception not rethrown", SIGABRT):
  the exit status, including an abort while the interpreter exits, is the contract's.

Either way the only acceptable outcomes are the contract's: the store is read (exit 0)
or refused as unreadable (exit 4, one line). Anything else is a bug: another exit code
or exception (70), death by a signal, a hang (caught by a generous guard).
"""

from __future__ import annotations

import json
import queue
import random
import shutil
import signal
import subprocess
import sys
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from .cli import run_cli
from .corruption import copy_store, data_files, mutate
from .killpoints import LONG
from .stores import spec

ROOT = Path(__file__).resolve().parents[3]

# Drivers known to abort the interpreter on damaged input: each read is its own process.
# (libSQL and Turso were checked: 300 mutated fixtures each in one ReaderWorker, no crash;
# a crash there would still fail the example.)
ABORTING_DRIVERS = {"helixdb"}

# Seconds one read of a mutated store may take before it counts as a hang (a hang guard:
# the fixtures read in well under a second; HelixDB gives up on a stalled read by itself
# after 8 s).
HANG_GUARD = 90.0

# The outcomes the contract allows for a damaged store: read, or refused as unreadable.
ACCEPTED_EXITS = (0, 4)

# Mutated stores read per engine, and the first example's seed number: fixed in
# ``make test``; ``STATEMIGRATE_LONG=1`` reads more, from a new random base.
EXAMPLES = 2_000 if LONG else 200
BASE = random.SystemRandom().getrandbits(32) if LONG else 0

_WORKER = r"""
import json, sys, traceback
from pathlib import Path
from statemigrate.errors import StateMigrateError
from statemigrate.registry import get_engine
engine = get_engine(sys.argv[1])
for line in sys.stdin:
    path = Path(line.rstrip("\n"))
    try:
        with engine.open_reader(path) as reader:
            records = 0
            for table in reader.tables():
                for batch in reader.read_batches(table):
                    records += len(batch)
        out = {"exit": 0, "detail": f"{records} records"}
    except StateMigrateError as exc:
        out = {"exit": exc.exit_code, "detail": exc.message}
    except BaseException as exc:  # a driver panic is a BaseException
        out = {"exit": 70, "detail": "".join(traceback.format_exception(exc))[-3000:]}
    print(json.dumps(out), flush=True)
"""


@dataclass
class Outcome:
    """How one read of a mutated store ended."""

    exit: int | None = None  # the exit code (0 read, 4 refused, anything else a bug)
    signal: int | None = None  # the signal that killed the reader
    hung: bool = False
    detail: str = ""

    @property
    def accepted(self) -> bool:
        """Whether the contract allows this outcome."""
        return self.exit in ACCEPTED_EXITS and not self.hung and self.signal is None

    def describe(self) -> str:
        """One paragraph for an assertion message."""
        if self.hung:
            return f"the reader hung for more than {HANG_GUARD:.0f}s (hang guard)"
        if self.signal is not None:
            name = signal.Signals(self.signal).name
            return f"the reader was killed by {name}: {self.detail[-2000:]}"
        return f"exit {self.exit}: {self.detail[-2000:]}"


def seed_fixture(engine: str) -> Path:
    """The committed store ``engine``'s fuzzing starts from: ``fixtures/*/app.<engine>``.

    Every engine has one among its fixtures (``fixtures/README.md`` says which driver or
    crate wrote each); the independent fixtures are for the expectation tests.
    """
    found = sorted(
        p for p in (ROOT / "fixtures").glob(f"*/app.{engine}") if p.parent.name != "independent"
    )
    if not found:
        raise AssertionError(f"no fixtures/*/app.{engine} store to fuzz from")
    return found[0]


def seed_store(engine: str, directory: Path) -> Path:
    """A byte-identical copy of ``engine``'s committed fixture, below ``directory``."""
    fixture = seed_fixture(engine)
    directory.mkdir(parents=True, exist_ok=True)
    return copy_store(fixture, directory / fixture.name)


def mutated_copy(pristine: Path, target: Path, rnd: random.Random, flips: int) -> Path:
    """``target``: a fresh copy of ``pristine`` with one of its data files mutated."""
    if target.is_dir():
        shutil.rmtree(target)
    else:
        target.unlink(missing_ok=True)
    copy_store(pristine, target)
    victim = rnd.choice(data_files(target))
    victim.write_bytes(mutate(victim.read_bytes(), rnd, flips))
    return target


def read_with_cli(engine: str, path: Path) -> Outcome:
    """``statemigrate checksum ENGINE:PATH`` in a new process, as a user would run it."""
    try:
        run = run_cli(["checksum", spec(engine, path)], timeout=HANG_GUARD)
    except AssertionError:  # run_cli's hang guard
        return Outcome(hung=True)
    if run.returncode < 0:
        return Outcome(signal=-run.returncode, detail=run.stderr)
    if "Traceback" in run.stderr:
        return Outcome(exit=70, detail=run.stderr)
    return Outcome(exit=run.returncode, detail=run.stderr or run.stdout)


class ReaderWorker:
    """A child process that reads one store per request through the engine's reader."""

    def __init__(self, engine: str) -> None:
        self.engine = engine
        self.proc: subprocess.Popen[str] | None = None
        self.lines: queue.Queue[str] = queue.Queue()

    def _start(self) -> subprocess.Popen[str]:
        proc = subprocess.Popen(
            [sys.executable, "-c", _WORKER, self.engine],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        self.lines = queue.Queue()
        out, lines = proc.stdout, self.lines

        def pump() -> None:
            for line in out or ():
                lines.put(line)
            lines.put("")  # end of output: the child is gone

        threading.Thread(target=pump, daemon=True).start()
        return proc

    def read(self, path: Path) -> Outcome:
        """Read the store at ``path`` in the child; restart the child if it died."""
        if self.proc is None or self.proc.poll() is not None:
            self.proc = self._start()
        proc = self.proc
        assert proc.stdin is not None
        try:
            proc.stdin.write(f"{path}\n")
            proc.stdin.flush()
            line = self.lines.get(timeout=HANG_GUARD)
        except queue.Empty:
            self.close()
            return Outcome(hung=True)
        except BrokenPipeError:
            line = ""
        if line:
            answer = json.loads(line)
            return Outcome(exit=answer["exit"], detail=answer["detail"])
        proc.wait()
        err = proc.stderr.read() if proc.stderr else ""
        self.proc = None
        if proc.returncode < 0:
            return Outcome(signal=-proc.returncode, detail=err)
        return Outcome(exit=proc.returncode, detail=f"the reader exited: {err}")

    def close(self) -> None:
        """Stop the child."""
        if self.proc is not None:
            self.proc.kill()
            self.proc.communicate()
            self.proc = None


@contextmanager
def reader(engine: str) -> Iterator[Callable[[Path], Outcome]]:
    """How one mutated store is read: a new CLI process, or the engine's reader child."""
    if engine in ABORTING_DRIVERS:
        yield lambda path: read_with_cli(engine, path)
        return
    worker = ReaderWorker(engine)
    try:
        yield worker.read
    finally:
        worker.close()


def fuzz_reader(engine: str, pristine: Path, work: Path, examples: int = EXAMPLES) -> None:
    """Read ``examples`` mutated copies of the store ``pristine`` (a copy of a committed
    fixture) with ``engine``'s reader, each in a child process, below ``work``.

    Raises:
        AssertionError: the pristine store does not read, or a mutated copy was neither
            read nor refused as unreadable (exit 4); the message names its seed.
    """
    work.mkdir()
    with reader(engine) as read:
        clean = read(pristine)
        assert clean.exit == 0, f"the unmutated fixture must read: {clean.describe()}"

        # Fixed seeds, one random.Random each: the same bytes are hit on every run,
        # machine and commit (hypothesis's derandomized draws also depend on the
        # constants of whichever project modules are loaded, so they moved with every
        # code change). STATEMIGRATE_LONG=1 starts from a new random base, printed.
        for n in range(examples):
            seed = f"{engine}-{BASE + n}"
            rnd = random.Random(seed)
            target = mutated_copy(pristine, work / pristine.name, rnd, rnd.randint(1, 6))
            outcome = read(target)
            assert outcome.accepted, (
                f"seed {seed!r} (random.Random(seed); flips = rnd.randint(1, 6), then "
                f"statemigrate.testing.fuzz.mutated_copy): {outcome.describe()}"
            )


__all__ = [
    "ABORTING_DRIVERS",
    "EXAMPLES",
    "HANG_GUARD",
    "Outcome",
    "ReaderWorker",
    "fuzz_reader",
    "mutated_copy",
    "read_with_cli",
    "seed_fixture",
    "seed_store",
]
