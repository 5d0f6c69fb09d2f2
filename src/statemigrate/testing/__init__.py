"""Test support shipped with the package: the conformance suite any engine can run.

Third-party engines run the same suite: ``from statemigrate.testing.conformance import
CASES`` and call each case with their engine class and a temporary directory. The
safety helpers are :mod:`.safety` (store builders, the kill harness, corruption helpers,
a small file system), :mod:`.holders` (a real app process holding a store open with the
engine's own driver) and :mod:`.fuzz` (mutated copies of the committed fixtures, read in
a child process).
"""
