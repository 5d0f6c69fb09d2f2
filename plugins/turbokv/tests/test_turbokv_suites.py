"""The shipped suites against the turbokv engine, as any third-party engine runs them
(``statemigrate.testing``; singer-sdk's ``get_target_test_class`` is the model): every
conformance case (a declared ``known_limits`` entry as a strict xfail) and the engine
contract (its registered name, suffixes and options; it reads through the base).

Skipped as a whole where the binding is not built (a CPU without AES instructions).
"""

from __future__ import annotations

import pytest

from statemigrate.testing import conformance_suite, contract_suite

pytest.importorskip("statemigrate_turbokv._native")
from statemigrate_turbokv.engine import TurbokvEngine

TestTurbokvConformance = conformance_suite(TurbokvEngine)
TestTurbokvContract = contract_suite(TurbokvEngine)  # registered under its name included
