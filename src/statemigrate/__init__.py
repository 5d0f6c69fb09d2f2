"""statemigrate: move an embedded state store between engines, upgrade it, prove nothing was lost.

The public API: :func:`convert`, :func:`verify`, :func:`verify_manifest`,
:func:`checksum`, :func:`inspect`, :func:`open_store`, :func:`engines`, and for
schema upgrades :func:`upgrade` and the ``op`` object revisions use. Importing the
package loads no engine driver and not the native extension.
"""

from __future__ import annotations

from typing import Any

from .api import checksum, convert, engines, inspect, open_store, verify, verify_manifest

try:  # one source: rust/Cargo.toml, through the installed package's metadata
    from importlib.metadata import version as _version

    __version__ = _version("statemigrate")
except Exception:  # noqa: BLE001 - running from a source tree without metadata
    __version__ = "0+unknown"


def __getattr__(name: str) -> Any:
    # Upgrades import Alembic; load them only when asked for.
    if name == "op":
        from .upgrade import op as _op

        return _op
    if name == "upgrade":
        # The package is callable (it is also the upgrade() function).
        import importlib

        return importlib.import_module(".upgrade", __name__)
    raise AttributeError(f"module 'statemigrate' has no attribute {name!r}")


__all__ = [
    "__version__",
    "checksum",
    "convert",
    "engines",
    "inspect",
    "op",
    "open_store",
    "upgrade",
    "verify",
    "verify_manifest",
]
