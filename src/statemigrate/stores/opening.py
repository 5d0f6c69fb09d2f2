"""Naming and opening a store: the destination a path names, a source opened for reading.

Every verb names stores the same way (``ENGINE:PATH``, a detected engine, a suffix) and
opens a source the same way (a file-system refusal is the source's, exit 4; a store
another statemigrate is writing is busy, exit 3).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..engines.base import Engine, Reader
from ..errors import SourceError, UsageError
from ..registry import StorePath, engine_for_suffix, parse_store, resolve_source

__all__ = ["Source", "open_source", "resolve_destination"]


@dataclass(frozen=True)
class Source:
    """An existing store to read: its engine, its path, the reader's options.

    Made by :meth:`named` from what a caller gave (``ENGINE:PATH``, or a path and an
    engine that is detected when not given); opened by :meth:`open`.
    """

    engine: type[Engine]
    path: Path
    options: Mapping[str, Any] | None = None

    @classmethod
    def named(
        cls, store: StorePath, engine: str | None = None, options: Mapping[str, Any] | None = None
    ) -> Source:
        """The store a caller named (see :func:`~statemigrate.registry.resolve_source`)."""
        eng, path = resolve_source(store, engine)
        return cls(eng, path, options)

    def open(self) -> Reader:
        """Its reader, at one consistent snapshot (:func:`open_source`)."""
        return open_source(self.engine, self.path, self.options)


def resolve_destination(spec: StorePath, engine: str | None) -> tuple[type[Engine], Path]:
    """The destination's engine (given, ``ENGINE:PATH``, or from the file suffix) and path."""
    eng, path = parse_store(spec, engine)
    if path.name in ("", ".", ".."):
        raise UsageError(f"{spec}: name the destination's file or directory, not {path}")
    if eng is None:
        eng = engine_for_suffix(path)
        if eng is None:
            raise UsageError(
                f"cannot tell the destination engine of {path}",
                hint=f"name it as ENGINE:PATH (sqlite:{path}), or with --to ENGINE",
            )
    return eng, path


def open_source(engine: type[Engine], path: Path, options: Mapping[str, Any] | None) -> Reader:
    """The engine's reader, with a file-system refusal turned into a source error (exit 4).

    A store that cannot be opened while another statemigrate writes it (an upgrade
    whose engine changes files under a reader's private image) is busy, not damaged.

    Raises:
        StoreBusyError: the open failed and another statemigrate holds the store's
            writer lock (exit 3, its pid).
        SourceError: the open failed otherwise (exit 4).
    """
    try:
        try:
            return engine.open_reader(path, options)
        except PermissionError as exc:
            raise SourceError(f"{path}: permission denied ({exc.filename or path})") from exc
        except OSError as exc:
            raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    except SourceError:
        from .lockfile import refuse_if_written

        refuse_if_written(path, "statemigrate is writing it")
        raise
