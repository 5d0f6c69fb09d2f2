"""Test support shipped with the package: the conformance suite any engine can run.

Third-party engines run the same suite: ``from statemigrate.testing.conformance import
CASES`` and call each case with their engine class and a temporary directory. The
safety tests' helpers: :mod:`.stores` (building, reading and fingerprinting stores),
:mod:`.cli` (the real command in a subprocess: run, kill, its one-line error),
:mod:`.killpoints` (where a kill -9 lands), :mod:`.corruption` (damaging a copy of a
store), :mod:`.filesystems` (a size-limited file system), :mod:`.holders` (a real app
process holding a store open with the engine's own driver) and :mod:`.fuzz` (mutated
copies of the committed fixtures, read in a child process). Schema upgrades have their own suite, :mod:`.upgrade_conformance`, and
kill -9 harness, :mod:`.killharness`, both on the example schema of :mod:`.example`
(shipped in the package as ``example_schema/``).
"""
