"""The readers under a fuzzer: hypothesis over mutated bytes of every engine's store.

Deterministic in ``make test``: each engine's seed store is a copy of its committed
fixture (``fixtures/<engine>/…``, byte-identical on every run and machine), and each
example is a ``random.Random`` with a fixed seed (``"<engine>-<n>"``), so the same
examples hit the same bytes on every run, machine and commit; ``STATEMIGRATE_LONG=1``
explores from a new random base. A failure names its seed, which reproduces it alone.

A mutated store must be read or refused as unreadable (exit 4, one line); another exit
code, an exception, a death by signal (an abort, SIGBUS) or a hang fails the example,
and the test reports its seed. Each read runs in a child process
(:mod:`statemigrate.testing.fuzz`): a crash of the driver fails an example, never the
test runner. HelixDB, whose driver has aborted the interpreter, runs a new
``statemigrate checksum`` per example; libSQL and Turso were checked in a long-lived
reader child (300 examples each, no crash) and run there with the others.

No stopwatch decides anything: a read has a generous hang guard
(:data:`statemigrate.testing.fuzz.HANG_GUARD`) that fails the example as a hang.
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from statemigrate.registry import engine_names
from statemigrate.testing.fuzz import (
    ABORTING_DRIVERS,
    Outcome,
    ReaderWorker,
    mutated_copy,
    read_with_cli,
    seed_store,
)
from statemigrate.testing.killpoints import LONG

EXAMPLES = 2_000 if LONG else 200
BASE = random.SystemRandom().getrandbits(32) if LONG else 0
# HelixDB runs a new process per example: 0.5-1.6 s each on the 2-core CI machine
# (measured: 150 examples in 122 s with other tests running; up to its 8 s read timeout
# on a stalled store), so 80 examples take 1-2 minutes in CI.
SLOW_EXAMPLES = {"helixdb": 500 if LONG else 80}

# Bugs found in engines owned by others: strict xfail (the example fails an assertion),
# so the test turns red once the engine is fixed and the mark must go.
BUGS: dict[str, str] = {}


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


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param(
            n,
            id=n,
            marks=[pytest.mark.xfail(strict=True, raises=AssertionError, reason=BUGS[n])]
            if n in BUGS
            else [],
        )
        for n in engine_names()
    ],
)
def test_reader_under_fuzzer(engine: str, tmp_path: Path) -> None:
    pristine = seed_store(engine, tmp_path / "pristine")
    work = tmp_path / "work"
    work.mkdir()
    with reader(engine) as read:
        clean = read(pristine)
        assert clean.exit == 0, f"the unmutated fixture must read: {clean.describe()}"

        # Fixed seeds, one random.Random each: the same bytes are hit on every run,
        # machine and commit (hypothesis's derandomized draws also depend on the
        # constants of whichever project modules are loaded, so they moved with every
        # code change). STATEMIGRATE_LONG=1 starts from a new random base, printed.
        for n in range(SLOW_EXAMPLES.get(engine, EXAMPLES)):
            seed = f"{engine}-{BASE + n}"
            rnd = random.Random(seed)
            target = mutated_copy(pristine, work / pristine.name, rnd, rnd.randint(1, 6))
            outcome = read(target)
            assert outcome.accepted, (
                f"seed {seed!r} (random.Random(seed); flips = rnd.randint(1, 6), then "
                f"statemigrate.testing.fuzz.mutated_copy): {outcome.describe()}"
            )
