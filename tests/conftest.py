"""Shared fixtures: every registered engine whose driver is installed."""

from __future__ import annotations

import os
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
