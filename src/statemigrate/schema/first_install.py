"""``upgrade --create``: where a first install may make its store, and making it there.

An installer often makes the store's directory first (``mkdir -p``, a mounted volume,
``chown app:``) and then runs ``statemigrate upgrade --create``. For an engine whose
store is a directory, an empty directory at the path is a missing store: the new store
is built in a private folder inside it (the same file system, a mount point included),
given the directory's owner, then its files are moved up into the directory, which
keeps its own mode and owner. A directory holding anything else is not the tool's to
fill and is refused as before; so is an empty directory where a single-file engine's
store is named.

A run killed while the files move leaves that private folder behind; the directory
then held nothing but what the run made (it was empty, under the store's lock), so the
next ``--create`` empties it and starts over.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ..engines.base import Engine
from ..errors import StateMigrateError
from ..fsutil import fsync_tree
from ..perms import keep_owner, no_wider_than
from ..registry import StorePath
from .store import create_store, is_missing

# The private folder a new store is built in, inside the empty directory it will fill.
BUILDING = ".statemigrate-creating"


def is_vacant(store: StorePath, engine: str | None) -> bool:
    """Whether ``--create`` may make the store at ``store``: nothing is there, or an
    empty directory (or one an interrupted ``--create`` left) where the store of a
    directory engine goes."""
    if is_missing(store, engine):
        return True
    from ..stores.opening import resolve_destination

    try:
        eng, path = resolve_destination(store, engine)
    except StateMigrateError:
        return False
    return _fillable(eng, path)


def make_store(eng: type[Engine], path: Path, options: Mapping[str, Any] | None = None) -> bool:
    """Make a new, empty store at ``path``: where nothing is, or in the empty directory
    there (see the module).

    Returns:
        True when this run made it; False when another run made it meanwhile.
    """
    if not (path.exists() or path.is_symlink()):
        return create_store(eng, path, options)
    from ..stores.lockfile import writer_lock

    with writer_lock(path):
        if not _fillable(eng, path):
            return False  # another run made the store meanwhile, or put something there
        _empty(path)  # what an interrupted run left: nothing else was there
        building = path / BUILDING
        try:
            building.mkdir()
            inner = building / "store"
            with no_wider_than(path):
                create_store(eng, inner, options)
            keep_owner(inner, path)
            for entry in sorted(os.listdir(inner)):
                os.rename(inner / entry, path / entry)
            shutil.rmtree(building)
            fsync_tree(path)
        except BaseException:
            _empty(path)  # the directory was empty: everything in it is this run's
            raise
    return True


def _fillable(eng: type[Engine], path: Path) -> bool:
    """Whether ``path`` is a directory (not a link) where ``eng``'s store goes, holding
    nothing or only what an interrupted ``--create`` left."""
    if not eng.capabilities.directory or path.is_symlink() or not path.is_dir():
        return False
    try:
        names = os.listdir(path)
    except OSError:
        return False
    return not names or BUILDING in names


def _empty(path: Path) -> None:
    """Remove everything inside the directory ``path`` (links are removed, not followed)."""
    for entry in os.scandir(path):
        if entry.is_dir(follow_symlinks=False):
            shutil.rmtree(entry.path)
        else:
            os.unlink(entry.path)
