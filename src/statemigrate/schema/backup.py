"""``--backup``: where an upgrade writes the engine-native backup of the store first."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..engines.base import Engine, Writer
from ..errors import DestinationError
from ..fsutil import fsync_tree, place, remove_path


def write_backup(engine: type[Engine], writer: Writer, dest: Path) -> Path:
    """Back the store up at ``dest``, or beside it when ``dest`` is taken, and make the
    backup durable (its files and directory synced) before any revision runs: after a
    power loss during the upgrade the backup holds the state from before it, whole.

    The backup is written to ``dest.partial`` (beside it), synced, then renamed to its
    name and the directory synced: a name that holds a backup holds a whole one. A
    failed backup's ``.partial`` is removed (exit 5); one a killed run left is ours and
    removed before starting.

    A retry after a failed revision names the same ``--backup`` path: the first try's
    backup there holds the state from before the install, so it is kept and this one
    gets the UTC time in its name (``state.pre.20261130T135501Z.sqlite``).
    """
    if not dest.parent.is_dir():
        raise DestinationError(f"{dest.parent}: no such directory for the backup")
    _remove_partial(engine, dest)  # a killed run's, at the name asked for
    if os.path.lexists(dest):
        dest = timestamped(dest)
    partial = partial_path(dest)
    _remove_partial(engine, dest)
    try:
        writer.backup(partial)
        made = engine.store_paths(partial)
        for path in made:
            fsync_tree(path)
        # Side files first: the name itself appears last, when everything is there
        # (each rename synced in its directory).
        for path in sorted(made, key=lambda p: p == partial):
            place(path, Path(str(dest) + str(path)[len(str(partial)) :]))
    except BaseException as exc:
        _remove_partial(engine, dest)
        if isinstance(exc, OSError):
            raise DestinationError(
                f"{dest}: cannot write the backup ({exc.strerror or exc})"
            ) from exc
        if isinstance(exc, DestinationError):  # an engine's own (a full disk …)
            raise DestinationError(
                f"{dest}: cannot write the backup ({exc.message})", hint=exc.cli_hint
            ) from exc
        raise
    return dest


def partial_path(dest: Path) -> Path:
    """Where the backup for ``dest`` is written until it is whole: ``dest.partial``."""
    return dest.with_name(dest.name + ".partial")


def _remove_partial(engine: type[Engine], dest: Path) -> None:
    partial = partial_path(dest)
    for path in (partial, *engine.store_paths(partial)):
        remove_path(path)  # a link is removed, never followed


def timestamped(dest: Path) -> Path:
    """A free name beside ``dest`` carrying the UTC time, before a suffix such as
    ``.sqlite`` (not before ``.0`` of ``state.pre-2.0``: that is part of the name)."""
    stamp = time.strftime("%Y%m%dT%H%M%SZ", time.gmtime())
    stem, suffix = (dest.stem, dest.suffix) if dest.suffix[1:].isalpha() else (dest.name, "")
    for n in range(1000):
        name = f"{stem}.{stamp}{f'-{n}' if n else ''}{suffix}"
        if not os.path.lexists(dest.with_name(name)):
            return dest.with_name(name)
    raise DestinationError(f"{dest}: backup destination already exists")
