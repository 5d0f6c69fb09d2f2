"""The engines whose suites run here: the built-in ones. A plugin's engine (plugins/turbokv)
runs the shipped suites (statemigrate.testing.conformance_suite, contract_suite) in its own
tests, as any third-party engine does."""

from __future__ import annotations

from statemigrate.registry import engine_names, get_engine


def builtin_engines() -> list[str]:
    """The registered engines that ship in statemigrate itself, by name."""
    return [n for n in engine_names() if get_engine(n).__module__.startswith("statemigrate.")]
