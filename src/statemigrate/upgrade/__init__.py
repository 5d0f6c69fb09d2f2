"""Old import paths of schema upgrades, kept for revision scripts and engines' tests.

The machinery is :mod:`statemigrate.schema`, the verbs are :mod:`statemigrate.api`'s,
and ``statemigrate.upgrade`` is the function :func:`statemigrate.api.upgrade`.
``statemigrate.upgrade.runner`` (``errors``, ``journal``, ``op``, ``scripts``,
``sort``, ``staging``) are the :mod:`statemigrate.schema` modules under their old names, and
this package still exports what it did (``from statemigrate.upgrade import upgrade``).

Nothing in the verbs or the CLI imports this package. Python binds an imported
subpackage on its parent, so importing anything under this name rebinds
``statemigrate.upgrade`` from the function to this package: the package stays callable
(it calls the function) for as long as it exists. Its test kit (``conformance``,
``killharness``) lives in :mod:`statemigrate.testing` now; only old imports keep it.
"""

from __future__ import annotations

import importlib
import sys
import types
from typing import Any

# Where each name this package exported lives now. Resolved on first use: the schema
# modules are loaded only by the names asked for.
_EXPORTS = {
    "CurrentReport": "statemigrate.schema.reports",
    "UpgradeReport": "statemigrate.schema.reports",
    "OffRevisionError": "statemigrate.schema.errors",
    "RevisionFailedError": "statemigrate.schema.errors",
    "RevisionUnknownError": "statemigrate.schema.errors",
    "SchemaError": "statemigrate.schema.errors",
    "StoreMissingError": "statemigrate.schema.errors",
    "UpgradeInterruptedError": "statemigrate.schema.errors",
    "check": "statemigrate.api",
    "current": "statemigrate.api",
    "downgrade": "statemigrate.api",
    "finish_interrupted": "statemigrate.api",
    "history": "statemigrate.api",
    "revision": "statemigrate.api",
    "stamp": "statemigrate.api",
    "upgrade": "statemigrate.api",
}


def __getattr__(name: str) -> Any:
    if name in _EXPORTS:
        return getattr(importlib.import_module(_EXPORTS[name]), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


class _CallableModule(types.ModuleType):
    """This package, callable as :func:`statemigrate.api.upgrade` (see the docstring)."""

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        from ..api import upgrade

        return upgrade(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
