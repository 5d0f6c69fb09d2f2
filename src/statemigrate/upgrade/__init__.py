"""Schema upgrades in place: Alembic revisions that run on every engine, atomically.

``statemigrate.upgrade(store, schema)`` (this package is callable: it is also
:func:`upgrade`), :func:`downgrade`, :func:`stamp`, :func:`current`, :func:`check`,
:func:`history`, :func:`revision`, :func:`finish_interrupted`. A revision changes state through
``from statemigrate import op`` (:mod:`statemigrate.upgrade.op`).

Modules: :mod:`.scripts` (the Alembic revision graph), :mod:`.op` (what a revision
calls), :mod:`.staging` (copy-on-write tables while a revision runs),
:mod:`.journal` (the atomic switch and recovery), :mod:`.sort` (external sort for
``rekey``), :mod:`.runner` (the verbs).
"""

from __future__ import annotations

import sys
import types
from typing import Any

from .errors import (
    OffRevisionError,
    RevisionFailedError,
    RevisionUnknownError,
    SchemaError,
    StoreMissingError,
    UpgradeInterruptedError,
)
from .runner import (
    CurrentReport,
    UpgradeReport,
    check,
    current,
    downgrade,
    finish_interrupted,
    history,
    revision,
    stamp,
    upgrade,
)


class _CallableModule(types.ModuleType):
    """``statemigrate.upgrade`` is both this package and the :func:`upgrade` function.

    Importing the package binds it as ``statemigrate.upgrade`` (Python sets submodules
    on their parent), which would hide the function ``statemigrate/__init__.py``
    exposes under that name; calling the package calls the function.
    """

    def __call__(self, *args: Any, **kwargs: Any) -> UpgradeReport:
        return upgrade(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule

__all__ = [
    "CurrentReport",
    "OffRevisionError",
    "RevisionFailedError",
    "RevisionUnknownError",
    "SchemaError",
    "StoreMissingError",
    "UpgradeInterruptedError",
    "UpgradeReport",
    "check",
    "current",
    "downgrade",
    "finish_interrupted",
    "history",
    "revision",
    "stamp",
    "upgrade",
]
