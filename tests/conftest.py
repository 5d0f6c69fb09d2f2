"""Shared fixtures: every registered engine whose driver is installed."""

from __future__ import annotations

import pytest

from statemigrate.registry import engine_names, get_engine


def all_engines() -> list[str]:
    """Every registered engine; a missing driver fails the test rather than hiding it."""
    return engine_names()


@pytest.fixture(params=all_engines())
def engine(request):
    eng = get_engine(request.param)
    eng.require_driver()
    return eng
