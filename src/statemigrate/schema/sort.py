"""An external sort for ``op.rekey``: sorted runs spill to files, then a k-way merge.

Memory stays bounded by ``run_records`` whatever the table's size. The run files
live in a private directory beside the store (same file system, same free space),
removed when the sort ends; a leftover from a killed run is removed by the next.
Runs are written with :mod:`marshal` (records are tuples of bytes and ints, read back
by the same interpreter; 2-3x faster than pickle both ways), and merged as whole
tuples: the key comes first, so tuple order is key order (equal keys, which the
caller refuses, fall back to comparing values).
"""

from __future__ import annotations

import heapq
import marshal
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from operator import itemgetter
from pathlib import Path

from ..engines.base import take_batches
from ..model import BATCH_BYTES, BATCH_RECORDS

SORT_DIR_INFIX = ".sm-sort-"
CHUNK = 10_000


def _write_run(directory: Path, index: int, records: list) -> Path:
    path = directory / f"run-{index:05d}"
    with open(path, "wb") as f:
        for i in range(0, len(records), CHUNK):
            chunk = marshal.dumps(records[i : i + CHUNK])
            f.write(len(chunk).to_bytes(8, "little"))
            f.write(chunk)
    return path


def _read_run(path: Path) -> Iterator[tuple]:
    with open(path, "rb") as f:
        while size := f.read(8):
            yield from marshal.loads(f.read(int.from_bytes(size, "little")))


def sorted_batches(
    batches: Iterable[list],
    beside: Path,
    *,
    run_records: int = 250_000,
    batch_records: int = BATCH_RECORDS,
    batch_bytes: int = BATCH_BYTES,
) -> Iterator[list]:
    """The records of ``batches`` in ascending key order, in bounded batches (taken natively).

    Equal keys are not detected here: the caller's strictly-ascending check (the
    native digest) finds them in the output, at no cost per record in Python.

    Args:
        batches: lists of records in any order.
        beside: the store's path; run files go in a directory next to it.
        run_records: records held in memory at most before a run is spilled.
        batch_records: records per yielded batch at most.
        batch_bytes: payload bytes per yielded batch at most.
    """
    key = itemgetter(0)
    buf: list = []
    runs: list[Path] = []
    tmp: Path | None = None
    try:
        for batch in batches:
            buf.extend(batch)
            if len(buf) >= run_records:
                if tmp is None:
                    tmp = Path(
                        tempfile.mkdtemp(prefix=beside.name + SORT_DIR_INFIX, dir=beside.parent)
                    )
                buf.sort(key=key)
                runs.append(_write_run(tmp, len(runs), buf))
                buf = []
        buf.sort(key=key)
        if not runs:
            yield from take_batches(buf, batch_records, batch_bytes)
            return
        if buf:
            runs.append(_write_run(tmp, len(runs), buf))  # type: ignore[arg-type]
        buf = []
        merged = heapq.merge(*(_read_run(p) for p in runs))
        yield from take_batches(merged, batch_records, batch_bytes)
    finally:
        if tmp is not None:
            shutil.rmtree(tmp, ignore_errors=True)


def remove_leftovers(store: Path) -> None:
    """Remove sort directories that a killed run left beside ``store``."""
    for p in store.parent.glob(store.name + SORT_DIR_INFIX + "*"):
        shutil.rmtree(p, ignore_errors=True)
