"""statemigrate: move an embedded state store between engines, upgrade it, prove nothing was lost.

The public API: :func:`convert`, :func:`verify`, :func:`verify_manifest`,
:func:`checksum`, :func:`inspect`, :func:`open_store`, :func:`engines`. Imports are
lazy so that ``import statemigrate`` loads no engine driver.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"

_API = {"convert", "verify", "verify_manifest", "checksum", "inspect", "open_store", "engines"}


def __getattr__(name: str) -> Any:
    if name in _API:
        from . import api

        return getattr(api, name)
    if name == "upgrade":
        from . import upgrade as _upgrade

        return _upgrade.upgrade
    if name == "op":
        from .upgrade import op as _op

        return _op
    raise AttributeError(f"module 'statemigrate' has no attribute {name!r}")


__all__ = sorted(_API) + ["upgrade", "op", "__version__"]
