"""The digest walk: every verb reads a store's tables through here, once.

Each batch is digested natively (``_native.batch_digest``, the one caller, or a held
batch's own ``digest``), which also checks that keys ascend strictly and that records
are of the model; a reader whose
engine walks its own files answers whole tables at once (:meth:`Reader.native_digests`).
Convert, verify, checksum and the schema upgrades all take their digests here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from ..digest import Digest, store_digest
from ..engines.base import Reader
from ..errors import InterruptedByUser, SourceError
from ..model import Batch, TableInfo, TableKind
from ..progress import Progress, table_total

__all__ = ["batch_facts", "digest_checked", "digest_store", "digests_answered", "store_digest_of"]


def batch_facts(batch: list, versioned: bool, after: bytes | None) -> tuple[Digest, int, int]:
    """A batch's digest, payload bytes and the index of its first record not strictly
    after the one before it (``after`` before the first), or -1: the one native walk.

    Raises:
        TypeError, ValueError, OverflowError: a record outside the model.
    """
    from .. import _native

    if isinstance(batch, _native.HeldBatch):  # records held by an engine's binding
        count, total, unsorted, nbytes = batch.digest(versioned)
    else:
        count, total, unsorted, nbytes = _native.batch_digest(batch, versioned)
    if unsorted < 0 and after is not None and batch and batch[0][0] <= after:
        unsorted = 0
    return Digest(count, total), nbytes, unsorted


def digest_checked(
    batch: list, table: TableInfo, after: bytes | None, where: str
) -> tuple[Digest, int]:
    """The batch's digest and payload bytes, refusing records out of strictly ascending key order."""
    try:
        digest, nbytes, unsorted = batch_facts(batch, table.versioned, after)
    except (ValueError, TypeError, OverflowError) as exc:
        raise SourceError(
            f"{where}: table {table.name!r} holds a record outside the model ({exc})"
        ) from exc
    if unsorted >= 0:
        raise SourceError(f"{where}: table {table.name!r} is not read in key order")
    return digest, nbytes


def digest_store(
    reader: Reader,
    tables: list[TableInfo],
    where: str,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    hint: str | None = None,
    sizes: dict[str, int] | None = None,
) -> dict[str, Digest]:
    """Per-table digests of a store, streaming; ``should_stop`` is polled between batches.

    ``sizes``, when given, receives each table's payload bytes (keys and values).
    """
    out = {}
    native = reader.native_digests(tables)
    if native is not None:
        return digests_answered(tables, native, progress, sizes)
    for table in tables:
        total = Digest()
        last = None
        nbytes_total = 0
        if progress:
            progress.start_table(table.name, table_total(progress, reader, table))
        for batch in reader.read_batches(table):
            if should_stop is not None and should_stop():
                raise InterruptedByUser("interrupted; the work done so far is kept", hint=hint)
            d, nbytes = digest_checked(batch, table, last, where)
            total = total + d
            nbytes_total += nbytes
            last = batch[-1][0]
            if progress:
                progress.advance(d.count, nbytes)
        if progress:
            progress.end_table()
        out[table.name] = total
        if sizes is not None:
            sizes[table.name] = nbytes_total
    return out


def digests_answered(
    tables: list[TableInfo],
    native: list[tuple[int, int, int]],
    progress: Progress | None,
    sizes: dict[str, int] | None,
) -> dict[str, Digest]:
    """:func:`digest_store`'s answer from a reader's :meth:`~Reader.native_digests`."""
    out = {}
    for table, (count, total, nbytes) in zip(tables, native, strict=True):
        if progress:
            progress.start_table(table.name, count)
            progress.advance(count, nbytes)
            progress.end_table()
        out[table.name] = Digest(count, total)
        if sizes is not None:
            sizes[table.name] = nbytes
    return out


def store_digest_of(
    tables: list[TableInfo],
    read_batches: Callable[[TableInfo], Iterable[Batch]],
    where: str,
    progress: Progress | None = None,
    counts: dict[str, int] | None = None,
    digests: dict[str, tuple[TableKind, Digest]] | None = None,
) -> str:
    """The store digest of ``tables``, each read through ``read_batches`` (a writer's,
    which sees its own writes), every batch checked as :func:`digest_checked` checks.

    ``counts``: tables' record counts known before, as progress totals; each table's
    count read is put in it. ``digests``, when given, receives each table's kind and
    digest."""
    progress = progress or Progress()
    parts = []
    for table in tables:
        total = Digest()
        last = None
        progress.start_table(table.name, None if counts is None else counts.get(table.name))
        for batch in read_batches(table):
            d, nbytes = digest_checked(batch, table, last, where)
            total = total + d
            last = batch[-1][0] if batch else last
            progress.advance(d.count, nbytes)
        progress.end_table()
        if counts is not None:
            counts[table.name] = total.count
        if digests is not None:
            digests[table.name] = (table.kind, total)
        parts.append((table.name, table.kind, total))
    return store_digest(parts)
