"""The upgrade conformance suite against every registered engine.

An engine that does not declare ``Capabilities.in_place`` runs every case as
``xfail(strict=True)``: it joins as soon as it declares the capability.
"""

from __future__ import annotations

import pytest

from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.upgrade_conformance import CASES, xfail_raises, xfail_reason


def _params():
    for engine in engine_names():
        for name in CASES:
            if name == "crash_points_recover":
                continue  # tests/test_upgrade_kill.py
            reason = xfail_reason(get_engine(engine), name)
            raises = xfail_raises(get_engine(engine))
            marks = [pytest.mark.xfail(strict=True, raises=raises, reason=reason)] if reason else []
            yield pytest.param(engine, name, id=f"{engine}-{name}", marks=marks)


@pytest.mark.parametrize(("engine_name", "case_name"), list(_params()))
def test_upgrade_conformance(engine_name: str, case_name: str, tmp_path) -> None:
    engine = get_engine(engine_name)
    engine.require_driver()
    CASES[case_name](engine, tmp_path)
