"""statemigrate: move an embedded state store between engines, upgrade it, prove nothing was lost.

The verbs (:mod:`statemigrate.api`): :func:`convert`, :func:`verify`,
:func:`verify_manifest`, :func:`checksum`, :func:`inspect`, :func:`open_store`,
:func:`engines`, and for schema upgrades :func:`upgrade`, :func:`downgrade`,
:func:`stamp`, :func:`current`, :func:`check`, :func:`history`, :func:`revision`,
:func:`finish_interrupted`; ``op``, the operations a revision calls; the errors
(:class:`StateMigrateError` and its subclasses, each with its exit code);
:class:`Progress` and :class:`ProgressEvent`, what ``progress=`` takes and gives.

Everything is imported on first use: importing the package, or one of its engines,
loads no verb, no engine driver, not click, tqdm or the native extension.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    __version__: str
    from .api import (
        check,
        checksum,
        convert,
        current,
        downgrade,
        engines,
        finish_interrupted,
        history,
        init,
        inspect,
        layout,
        open_store,
        revision,
        stamp,
        upgrade,
        verify,
        verify_manifest,
    )
    from .errors import (
        DestinationError,
        InterruptedByUser,
        LayoutNotNeeded,
        LinkRefusedError,
        MissingDriverError,
        SourceError,
        StateMigrateError,
        StoreBusyError,
        UpgradeInterruptedError,
        UsageError,
    )
    from .progress import Progress, ProgressEvent
    from .schema import op
    from .schema.errors import (
        OffRevisionError,
        RevisionFailedError,
        RevisionUnknownError,
        SchemaError,
        StoreMissingError,
    )

# Where the public names live, light modules first; each is resolved on first access
# (PEP 562), so that asking for an error class does not load the verbs.
_HOMES = (".errors", ".schema.errors", ".progress", ".api")


def _version() -> str:
    """One source, rust/Cargo.toml, through the installed package's metadata."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("statemigrate")
    except PackageNotFoundError:  # running from a source tree without metadata
        return "0+unknown"


def __getattr__(name: str) -> Any:
    if name == "op":  # the module revisions import: ``from statemigrate import op``
        value: Any = importlib.import_module(".schema.op", __name__)
    elif name == "__version__":
        value = _version()
    elif name in __all__:
        homes = (importlib.import_module(home, __name__) for home in _HOMES)
        value = next(getattr(module, name) for module in homes if hasattr(module, name))
    else:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    globals()[name] = value  # looked up once
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(__all__))


__all__ = [
    "DestinationError",
    "InterruptedByUser",
    "LayoutNotNeeded",
    "LinkRefusedError",
    "MissingDriverError",
    "OffRevisionError",
    "Progress",
    "ProgressEvent",
    "RevisionFailedError",
    "RevisionUnknownError",
    "SchemaError",
    "SourceError",
    "StateMigrateError",
    "StoreBusyError",
    "StoreMissingError",
    "UpgradeInterruptedError",
    "UsageError",
    "__version__",
    "check",
    "checksum",
    "convert",
    "current",
    "downgrade",
    "engines",
    "finish_interrupted",
    "history",
    "init",
    "inspect",
    "layout",
    "op",
    "open_store",
    "revision",
    "stamp",
    "upgrade",
    "verify",
    "verify_manifest",
]
