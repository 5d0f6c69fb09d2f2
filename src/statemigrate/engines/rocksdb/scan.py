"""RocksDB scans that confirm their end: rocksdict hides its iterator's status.

Every read checks each block against its checksum; a scan that stops at a damaged block
looks like the end of the data, so the end is confirmed with a second iterator
(:func:`confirm_scan_end`). Used by the reader and the writer of ``engines.rocksdb``.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

from ...errors import SourceError
from ...model import VERSION_PREFIX_DECODE, Batch, TableInfo
from ..access import take_batches


def checked_read_options() -> Any:
    """Read options that check every block read against its checksum."""
    import rocksdict

    ro = rocksdict.ReadOptions()
    ro.set_verify_checksums(True)
    return ro


def seek_past(it: Any, last: bytes, where: str) -> None:
    """Step iterator ``it`` onto the key after ``last``, the last key a scan returned.

    Raises:
        SourceError: ``last`` is not there any more (a damaged store); or the driver's
            error reading.
    """
    it.seek(last)
    if not (it.valid() and it.key() == last):
        it.status()
        raise SourceError(f"{where}: the last key read is gone (damaged store)")
    it.next()


def confirm_scan_end(view: Any, last: bytes | None, after: bytes | None, where: str) -> None:
    """Raise unless a scan that ended after ``last`` reached the real end.

    rocksdict's ``items()`` stops at the first position its iterator cannot read (a
    block that fails its checksum) exactly as at the end of the data, and hides the
    iterator's status. A second iterator over the same data is positioned on the
    last key the scan returned and stepped once: at the real end it is invalid with
    an OK status; after a damaged block its status raises the engine's error.

    Args:
        view: the column family (or snapshot) the scan read.
        last: the last key the scan returned, or None when it returned nothing.
        after: where the scan started (exclusive), or None for the start.
        where: the store and table, for the message.

    Raises:
        SourceError: the scan stopped early; or the driver's error reading.
    """
    it = view.iter(checked_read_options())
    try:
        if last is not None:
            seek_past(it, last, where)
        elif after is not None:
            it.seek(after)
            if it.valid() and it.key() == after:
                it.next()
        else:
            it.seek_to_first()
        stopped_early = it.valid()
        it.status()
        if stopped_early:
            raise SourceError(f"{where}: the scan stopped before the last record")
    finally:
        del it


def checked_items(view: Any, where: str) -> Iterator[tuple[bytes, bytes]]:
    """Every pair of a (small) column family, the scan confirmed to have reached the end."""
    last = None
    for key, value in view.items(read_opt=checked_read_options()):
        last = key
        yield key, value
    confirm_scan_end(view, last, None, where)


def scan_batches(
    view: Any, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
) -> Iterator[Batch]:
    """Bounded batches of a column family in key order, strictly after ``after``.

    Rows are taken and versions decoded in the native extension, one call per batch,
    from one snapshot; the caller confirms the end (:func:`confirm_scan_end`).
    """
    snapshot = view.snapshot()
    try:
        items = snapshot.items(from_key=after, read_opt=checked_read_options())
        decode = VERSION_PREFIX_DECODE if table.versioned else "as_is"
        skip = after  # from_key starts at the key itself
        for batch in take_batches(items, max_records, max_bytes, decode):
            if skip is not None:
                if batch[0][0] == skip:
                    batch = batch[1:]
                skip = None
            if batch:
                yield batch
        del items
    finally:
        del snapshot
