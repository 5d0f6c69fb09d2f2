"""Every registered engine against the shipped conformance suite."""

from __future__ import annotations

import pytest

from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.conformance import CASES, XFAIL


def _params():
    for engine in engine_names():
        for name in CASES:
            marks = []
            if (engine, name) in XFAIL:
                marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[(engine, name)]))
            yield pytest.param(engine, name, id=f"{engine}-{name}", marks=marks)


@pytest.mark.parametrize(("engine_name", "case_name"), list(_params()))
def test_conformance(engine_name: str, case_name: str, tmp_path) -> None:
    engine = get_engine(engine_name)
    engine.require_driver()
    CASES[case_name](engine, tmp_path)
