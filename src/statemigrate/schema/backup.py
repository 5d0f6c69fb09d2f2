"""``--backup``: where an upgrade writes the engine-native backup of the store first."""

from __future__ import annotations

import os
import time
from pathlib import Path

from ..engines.base import Writer
from ..errors import DestinationError


def write_backup(writer: Writer, dest: Path) -> Path:
    """Back the store up at ``dest``, or beside it when ``dest`` is taken.

    A retry after a failed revision names the same ``--backup`` path: the first try's
    backup there holds the state from before the install, so it is kept and this one
    gets the UTC time in its name (``state.pre.20261130T135501Z.sqlite``).
    """
    if os.path.lexists(dest):
        dest = timestamped(dest)
    if not dest.parent.is_dir():
        raise DestinationError(f"{dest.parent}: no such directory for the backup")
    writer.backup(dest)
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
