"""The external sort of ``op.rekey``: the project's one sort, in Rust (``_native.ExternalSort``).

Memory stays bounded by ``run_bytes`` whatever the table's size: sorted runs spill
to anonymous files in a private directory beside the store (same file system, same
free space, readable by its owner only), made by the first spill and removed when the
sort ends; a leftover of a killed run is removed by the next. The merge yields records
in ascending key order; two records with one key come out side by side, where the
caller refuses them.
"""

from __future__ import annotations

import secrets
import shutil
from collections.abc import Iterable, Iterator
from pathlib import Path

from .. import _native
from ..model import BATCH_BYTES, BATCH_RECORDS

SORT_DIR_INFIX = ".sm-sort-"


def sorted_batches(
    batches: Iterable[list],
    beside: Path,
    *,
    versioned: bool = False,
    run_bytes: int | None = None,
    batch_records: int = BATCH_RECORDS,
    batch_bytes: int = BATCH_BYTES,
) -> Iterator[list]:
    """The records of ``batches`` in ascending key order, in bounded batches.

    Equal keys are not detected here: the caller's strictly-ascending check (the
    native digest) finds them in the output, at no cost per record in Python.

    Args:
        batches: lists of records in any order: ``(key, value)``, or
            ``(key, value, version)`` when ``versioned``.
        beside: the store's path; run files go in a directory next to it.
        versioned: the records carry a u64 version.
        run_bytes: keys and values held in memory at most before a run is spilled
            (None: 64 MiB, or ``$STATEMIGRATE_SORT_RUN_BYTES``, which tests set tiny).
        batch_records: records per yielded batch at most.
        batch_bytes: payload bytes per yielded batch at most.

    Raises:
        ValueError: a record is not of that shape (bytes, and a u64 version).
        OSError: a run could not be written (a full disk …), with its errno.
    """
    # Made by the first spill (mode 0700, refused if the name exists by then): a sort
    # that never spills leaves nothing beside the store.
    tmp = beside.parent / f"{beside.name}{SORT_DIR_INFIX}{secrets.token_hex(8)}"
    sort = None
    try:
        sort = _native.ExternalSort(versioned, str(tmp), run_bytes, make_directory=True)
        for batch in batches:
            sort.push(batch)
        sort.finish()
        while batch := sort.take(batch_records, batch_bytes):
            yield batch
    finally:
        del sort  # its run files close (and, where the OS needs it, go) first
        shutil.rmtree(tmp, ignore_errors=True)


def leftovers(store: Path) -> list[Path]:
    """The sort directories beside ``store`` (a killed run's, or a running sort's)."""
    return sorted(store.parent.glob(store.name + SORT_DIR_INFIX + "*"))


def remove_leftovers(store: Path) -> None:
    """Remove sort directories that a killed run left beside ``store`` (hold its lock)."""
    for p in leftovers(store):
        shutil.rmtree(p, ignore_errors=True)
