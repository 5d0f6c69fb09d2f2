"""A layout's metadata kept out of the store (``metadata = "none"``): a side file.

What a writer records (a convert's checkpoint, table kinds) goes to a JSON file beside
the store being built (``DST.partial``; nowhere else), replaced atomically and synced after the records it describes
(a checkpoint never runs ahead of what is written: a resume from an older one writes
the same records again). The convert removes it with the ``.partial`` it serves, when
it places the store (``Engine.store_paths`` lists it): the placed store is the app's
shape exactly. Every layout family uses it (:mod:`._kv_mapping`, :mod:`._sql_layout`).
"""

from __future__ import annotations

import contextlib
import json
import os
from collections.abc import Mapping
from pathlib import Path

from ..errors import DestinationError, SourceError

__all__ = ["PARTIAL_SUFFIX", "metadata_side_file", "read_side_metadata", "write_side_metadata"]

# The name a convert builds its destination under (``DST.partial``): only such a store
# has a side file, which goes when the store is placed.
PARTIAL_SUFFIX = ".partial"


def metadata_side_file(store: Path) -> Path:
    """Where a layout with ``metadata = "none"`` keeps what a writer records."""
    return store.with_name(store.name + ".sm-meta.json")


def read_side_metadata(store: Path) -> dict[str, bytes]:
    """The entries of the store's side file (none when there is no side file).

    Raises:
        SourceError: a side file that is not statemigrate's (exit 4).
    """
    side = metadata_side_file(store)
    try:
        raw = json.loads(side.read_text(encoding="utf-8"))
        return {str(k): bytes.fromhex(v) for k, v in raw.items()}
    except FileNotFoundError:
        return {}
    except (OSError, ValueError, AttributeError, TypeError) as exc:
        raise SourceError(f"{side}: not statemigrate's metadata ({exc})") from exc


def write_side_metadata(store: Path, metadata: Mapping[str, bytes | None], describe: str) -> None:
    """Apply ``metadata`` (None deletes) to the store's side file, atomically and synced.

    Args:
        store: the store the entries describe.
        metadata: the entries to set or delete.
        describe: the layout, for the refusal below.

    Raises:
        DestinationError: a schema revision, which a store without metadata cannot
            record (exit 5).
    """
    if not metadata:
        return
    if not store.name.endswith(PARTIAL_SUFFIX):
        # Only a store being built has a side file: beside an app's store it would stay.
        raise DestinationError(
            f"{store}: {describe} keeps no metadata in the store (metadata 'none'), so "
            f"statemigrate cannot record {', '.join(sorted(metadata))} in it (a schema "
            "revision, an upgrade's journal)",
            hint='set metadata = "store" (or "inline" for a key-value prefix layout) in the '
            "layout file to upgrade this store in place",
        )
    current = read_side_metadata(store)
    for k, v in metadata.items():
        if v is None:
            current.pop(k, None)
        else:
            current[k] = v
    side = metadata_side_file(store)
    if not current:
        with contextlib.suppress(FileNotFoundError):
            side.unlink()
        return
    tmp = side.with_name(side.name + ".tmp")
    data = json.dumps({k: v.hex() for k, v in current.items()}).encode()
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    fd = os.open(tmp, flags, 0o600)
    try:
        os.write(fd, data)
        os.fsync(fd)
    finally:
        os.close(fd)
    os.replace(tmp, side)
