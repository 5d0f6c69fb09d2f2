"""Test support shipped with the package: the suites any engine can run, and their helpers.

An engine's tests, a plugin's included, get the conformance and contract suites for
their engine as pytest test classes (:mod:`.suite`)::

    from statemigrate.testing import conformance_suite, contract_suite

    TestMyEngineConformance = conformance_suite("myengine")
    TestMyEngineContract = contract_suite("myengine")

The cases themselves are :data:`.conformance.CASES`, each a function
``case(engine, tmp_path)``. The safety tests' helpers: :mod:`.stores` (building, reading
and fingerprinting stores), :mod:`.cli` (the real command in a subprocess: run, kill, its
one-line error), :mod:`.killpoints` (where a kill -9 lands), :mod:`.corruption` (damaging
a copy of a store), :mod:`.filesystems` (a size-limited file system), :mod:`.holders` (a
real app process holding a store open with the engine's own driver) and :mod:`.fuzz`
(mutated copies of the committed fixtures, read in a child process). Schema upgrades have
their own suite, :mod:`.upgrade_conformance`, and kill -9 harness, :mod:`.killharness`,
both on the example schema of :mod:`.example` (shipped in the package as
``example_schema/``).

The suites import pytest; the helpers do not, so they load only on first use (PEP 562).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from .suite import conformance_suite, contract_suite


def __getattr__(name: str) -> Any:
    if name in __all__:
        from . import suite

        return getattr(suite, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = ["conformance_suite", "contract_suite"]
