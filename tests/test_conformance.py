"""Every built-in engine against the shipped conformance suite, one test class each
(statemigrate.testing.conformance_suite; a plugin's engine runs it in its own tests)."""

from __future__ import annotations

from builtin_engines import builtin_engines  # tests/ is on sys.path, not a package

from statemigrate.testing import conformance_suite

for _name in builtin_engines():
    globals()[f"TestConformance_{_name}"] = conformance_suite(_name)
