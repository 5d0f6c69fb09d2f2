"""Test support shipped with the package: the conformance suite any engine can run.

Third-party engines run the same suite: ``from statemigrate.testing.conformance import
CASES`` and call each case with their engine class and a temporary directory.
"""
