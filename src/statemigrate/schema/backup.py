"""``--backup``: where an upgrade writes the engine-native backup of the store first."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..engines.base import Engine, Writer
from ..errors import DestinationError
from ..fsutil import fsync_tree


def write_backup(engine: type[Engine], writer: Writer, dest: Path) -> Path:
    """Back the store up at ``dest``, or beside it when ``dest`` is taken, and make the
    backup durable (its files and directory synced) before any revision runs: after a
    power loss during the upgrade the backup holds the state from before it, whole.

    A retry after a failed revision names the same ``--backup`` path: the first try's
    backup there holds the state from before the install, so it is kept and this one
    gets the UTC time in its name (``state.pre.20261130T135501Z.sqlite``).
    """
    if os.path.lexists(dest):
        dest = timestamped(dest)
    if not dest.parent.is_dir():
        raise DestinationError(f"{dest.parent}: no such directory for the backup")
    writer.backup(dest)
    try:
        for path in engine.store_paths(dest):
            fsync_tree(path)
    except OSError as exc:
        raise DestinationError(f"{dest}: cannot write the backup ({exc.strerror or exc})") from exc
    return dest


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
