"""Shared fixtures: every registered engine whose driver is installed."""

from __future__ import annotations

import os

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


def all_engines() -> list[str]:
    """Every registered engine; a missing driver fails the test rather than hiding it."""
    return engine_names()


@pytest.fixture(params=all_engines())
def engine(request):
    eng = get_engine(request.param)
    eng.require_driver()
    return eng
