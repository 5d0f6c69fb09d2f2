"""The readers under a fuzzer: mutated bytes of every built-in engine's store (a plugin's
engine runs :func:`statemigrate.testing.fuzz.fuzz_reader` on its own fixture in its tests).

Deterministic in ``make test``: each engine's seed store is a copy of its committed
fixture (``fixtures/<engine>/…``, byte-identical on every run and machine), and each
example is a ``random.Random`` with a fixed seed (``"<engine>-<n>"``), so the same
examples hit the same bytes on every run, machine and commit; ``STATEMIGRATE_LONG=1``
explores from a new random base. A failure names its seed, which reproduces it alone.

A mutated store must be read or refused as unreadable (exit 4, one line); another exit
code, an exception, a death by signal (an abort, SIGBUS) or a hang fails the example,
and the test reports its seed. Each read runs in a child process
(:func:`statemigrate.testing.fuzz.fuzz_reader`): a crash of the driver fails an example,
never the test runner. HelixDB, whose driver has aborted the interpreter, runs a new
``statemigrate checksum`` per example; libSQL and Turso were checked in a long-lived
reader child (300 examples each, no crash) and run there with the others.

No stopwatch decides anything: a read has a generous hang guard
(:data:`statemigrate.testing.fuzz.HANG_GUARD`) that fails the example as a hang.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from builtin_engines import builtin_engines  # tests/ is on sys.path, not a package

from statemigrate.testing.fuzz import EXAMPLES, fuzz_reader, seed_store
from statemigrate.testing.killpoints import LONG

# HelixDB runs a new process per example: 0.5-1.6 s each on the 2-core CI machine
# (measured: 150 examples in 122 s with other tests running; up to its 8 s read timeout
# on a stalled store), so 80 examples take 1-2 minutes in CI.
SLOW_EXAMPLES = {"helixdb": 500 if LONG else 80}

# Bugs found in engines owned by others: strict xfail (the example fails an assertion),
# so the test turns red once the engine is fixed and the mark must go.
BUGS: dict[str, str] = {}


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
        for n in builtin_engines()
    ],
)
@pytest.mark.heavy
def test_reader_under_fuzzer(engine: str, tmp_path: Path) -> None:
    pristine = seed_store(engine, tmp_path / "pristine")
    fuzz_reader(engine, pristine, tmp_path / "work", SLOW_EXAMPLES.get(engine, EXAMPLES))
