"""Every registered engine against the shipped conformance suite."""

from __future__ import annotations

import pytest

from statemigrate.errors import StateMigrateError
from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.conformance import CASES, SUITE_LIMITS

# How a declared limit shows: the engine refuses in the contract's words, or a case's
# assertion fails. Anything else (a crash) is not the limit and fails the test.
LIMIT_ERRORS = (StateMigrateError, AssertionError)


def _params():
    for engine in engine_names():
        limits = get_engine(engine).known_limits
        for name in CASES:
            marks = []
            if name in limits:
                marks.append(
                    pytest.mark.xfail(strict=True, raises=LIMIT_ERRORS, reason=limits[name])
                )
            yield pytest.param(engine, name, id=f"{engine}-{name}", marks=marks)


@pytest.mark.parametrize(("engine_name", "case_name"), list(_params()))
def test_conformance(engine_name: str, case_name: str, tmp_path) -> None:
    engine = get_engine(engine_name)
    engine.require_driver()
    CASES[case_name](engine, tmp_path)


@pytest.mark.parametrize("engine_name", engine_names())
def test_declared_limits_name_real_cases(engine_name: str) -> None:
    limits = get_engine(engine_name).known_limits
    known = set(CASES) | set(SUITE_LIMITS)
    assert set(limits) <= known, sorted(set(limits) - known)
    assert all(reason.strip() for reason in limits.values())
