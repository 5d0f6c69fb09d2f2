"""Shared fixtures: every registered engine whose driver is installed."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

# `make test` is deterministic: every property test draws the same examples on every
# run and machine (derandomize, no example database), so CI cannot fail at random.
# `make test-long` (STATEMIGRATE_LONG=1) explores new random examples instead.
settings.register_profile(
    "ci",
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "explore", deadline=None, print_blob=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("explore" if os.environ.get("STATEMIGRATE_LONG") else "ci")

from statemigrate.registry import engine_names, get_engine

ROOT = Path(__file__).resolve().parents[1]


def all_engines() -> list[str]:
    """Every registered engine; a missing driver fails the test rather than hiding it."""
    return engine_names()


@pytest.fixture(params=all_engines())
def engine(request):
    eng = get_engine(request.param)
    eng.require_driver()
    return eng


@pytest.fixture(scope="session")
def fixture_maker():
    """Runs the fixture maker (the real redb crates): ``fixture_maker(mode, *args)`` -> stdout."""
    target = ROOT / "rust" / "target" / "fixture-maker"
    subprocess.run(
        [
            "cargo",
            "build",
            "--release",
            "--quiet",
            "--manifest-path",
            str(ROOT / "rust" / "fixture-maker" / "Cargo.toml"),
            "--target-dir",
            str(target),
        ],
        check=True,
        timeout=900,  # a hang guard for a cold build, not a timing assertion
    )
    exe = target / "release" / "redb-fixture-maker"

    def run(mode: str, *args: object) -> str:
        out = subprocess.run(
            [str(exe), mode, *map(str, args)],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        assert out.returncode == 0, out.stderr[-2000:]
        return out.stdout.strip()

    return run


# Every engine the README documents (TurboKV is a plugin of its own distribution, so a
# machine without it registers one engine fewer): the summary names the engines a run
# covered, so that a green run without one says so.
DOCUMENTED_ENGINES = frozenset(
    {"fjall2", "fjall3", "helixdb", "jsonl", "libsql", "lmdb", "redb", "rocksdb", "sqlite",
     "turbokv", "turso"}
)  # fmt: skip


def _engines_named(nodeid: str, engines: frozenset[str]) -> set[str]:
    """The engines a test's node id names: its file (tests/engines/test_<engine>.py), a
    word of its name or a parameter (``[lmdb]``, ``[sqlite-to-redb]``, ``[rocksdb-odd_keys]``)."""
    path, _, test = nodeid.partition("::")
    found = {e for e in engines if path.endswith(f"/test_{e}.py")}
    return found | (set(re.split(r"[^a-z0-9]+", test.lower())) & engines)


def pytest_collection_modifyitems(config, items) -> None:
    """The heavy tests first (kill harnesses, fuzzers, full disks), each group in the
    order collected: the workers take them in turn at the start, and the many short
    tests fill in behind, instead of one worker ending alone on the last long ones.
    The same order on every worker (pytest-xdist requires it)."""
    items.sort(key=lambda item: item.get_closest_marker("heavy") is None)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:
    """One line naming how many engines the run covered, and why any was skipped whole."""
    engines = DOCUMENTED_ENGINES | frozenset(engine_names())
    ran: set[str] = set()
    for outcome in ("passed", "failed", "xfailed", "xpassed", "error"):
        for report in terminalreporter.stats.get(outcome, []):
            ran |= _engines_named(getattr(report, "nodeid", ""), engines)
    missing = sorted(engines - ran)
    reasons = {}
    for report in terminalreporter.stats.get("skipped", []):
        longrepr = getattr(report, "longrepr", None)
        reason = longrepr[2] if isinstance(longrepr, tuple) else str(longrepr)
        for e in _engines_named(report.nodeid, engines) & set(missing):
            reasons.setdefault(e, reason.removeprefix("Skipped: "))
    line = f"engines covered: {len(ran)} of {len(engines)}"
    if missing:
        why = "; ".join(f"{e} ({reasons[e]})" if e in reasons else e for e in missing)
        line += f"; NOT COVERED: {why}"
    terminalreporter.write_sep("=", line, bold=True, red=bool(missing))
