"""The batch loop: records flow from the source's reader to the destination's writer.

Each batch is read in key order, digested natively (which also checks the order),
and committed by the writer together with the checkpoint that says how far the copy
got; a resume goes on after the checkpoint's last key. No step looks at an engine's
name: limits come from the destination's declared capabilities.
"""

from __future__ import annotations

import json
from operator import itemgetter

from ..checkpoint import Checkpoint, is_checkpoint_entry
from ..digest import Digest
from ..engines.base import META_CHECKPOINT, META_TABLE_PREFIX, Engine, Reader, Writer
from ..errors import InterruptedByUser
from ..fsutil import crash_point
from ..model import Batch, TableInfo
from ..prefetch import prefetch
from ..progress import table_total
from ..stores.walk import digest_checked
from .job import Job


def check_keys(engine: type[Engine], reader: Reader, tables: list[TableInfo]) -> None:
    """Refuse (exit 5), before anything is written, a key the destination cannot store.

    Only a destination with key limits (``Capabilities.min_key_len``/``max_key_len``)
    pays for the read, and only for a table whose key lengths the source cannot give
    (:meth:`~Reader.key_length_bounds`) or breaks a limit; each batch's shortest and
    longest keys are measured at C speed
    (:func:`key_length_bounds`), and only a batch that breaks a limit is looked at
    record by record, to name its first offender.

    Raises:
        DestinationError: naming the first key, in key order, outside the limits.
    """
    caps = engine.capabilities
    if caps.min_key_len == 0 and caps.max_key_len is None:
        return
    lo, hi = caps.min_key_len, caps.max_key_len if caps.max_key_len is not None else 2**63
    for table in tables:
        known = reader.key_length_bounds(table)
        if known is not None and lo <= known[0] and known[1] <= hi:
            continue  # measured by the engine: every key fits
        for batch in reader.read_batches(table):
            shortest, longest = key_length_bounds(batch)
            if shortest < lo or longest > hi:
                for rec in batch:
                    if not lo <= len(rec[0]) <= hi:
                        engine.check_key(table, rec[0])


def key_length_bounds(batch: Batch) -> tuple[int, int]:
    """The lengths of the shortest and the longest key of ``batch`` ((0, 0) when empty).

    Measured by C loops over the batch (map, min, max): no Python step per record.
    """
    lengths = list(map(len, map(_KEY, batch)))
    if not lengths:
        return 0, 0
    return min(lengths), max(lengths)


_KEY = itemgetter(0)


def carried_metadata(
    source_meta: dict[str, bytes], chosen: list[TableInfo], checkpoint: Checkpoint
) -> dict[str, bytes | None]:
    """The metadata a new destination starts with: the source's, each table's, the checkpoint.

    A checkpoint or per-table entry the source carries (it was itself converted) is
    not copied; the chosen tables' own metadata is written afresh.
    """
    carried: dict[str, bytes | None] = {
        k: v
        for k, v in source_meta.items()
        if not is_checkpoint_entry(k) and not k.startswith(META_TABLE_PREFIX)
    }
    carried.update(
        {META_TABLE_PREFIX + t.name: json.dumps(t.meta).encode() for t in chosen if t.meta}
    )
    carried.update(checkpoint.entries())
    return carried


def copy_tables(
    job: Job, reader: Reader, writer: Writer, chosen: list[TableInfo], cp: Checkpoint
) -> dict[str, Digest]:
    """Stream every table into the writer, committing the checkpoint with each batch.

    Tables the checkpoint holds as done are skipped; the table in progress goes on
    after its last key. The job's ``should_stop`` is polled after every commit; its
    ``sizes`` receives the payload bytes this run copied of each table.

    Args:
        job: the convert (batch bounds, progress, should_stop, the source's name).
        reader: the source, at one snapshot.
        writer: the destination being built.
        chosen: the tables to copy, in name order.
        cp: the checkpoint, updated as batches commit.

    Returns:
        Each table's digest, as read from the source.

    Raises:
        InterruptedByUser: ``should_stop`` said so (exit 6; resumable).
        SourceError: a batch outside the model or out of key order (exit 4).
    """
    digests: dict[str, Digest] = {}
    existing = {t.name for t in writer.list_tables()}
    for table in chosen:
        if table.name not in cp.done:
            if cp.table != table.name:
                if table.name not in existing:
                    writer.create_table(table)
                cp.table, cp.last_key, cp.so_far = table.name, None, Digest()
            total, job.sizes[table.name] = _copy_table(job, reader, writer, table, cp)
            writer.put_metadata(cp.finish_table(table.name, total))
            _stop_if_told(job)
        digests[table.name] = cp.done[table.name]
    return digests


def _copy_table(
    job: Job, reader: Reader, writer: Writer, table: TableInfo, cp: Checkpoint
) -> tuple[Digest, int]:
    """Copy one table from the checkpoint's last key on; its whole digest, the bytes copied."""
    after, total = cp.last_key, cp.so_far
    copied = 0
    progress, where = job.progress, str(job.src_path)
    progress.start_table(table.name, table_total(progress, reader, table))
    batches = reader.read_batches(
        table,
        after,
        max_records=job.batch_records,
        max_bytes=job.batch_bytes,
        held=writer.takes_held(reader),
    )
    for batch in prefetch(batches) if reader.threadsafe_reads else batches:
        d, nbytes = digest_checked(batch, table, after, where)
        total = total + d
        after = batch[-1][0]
        cp.last_key, cp.so_far = after, total
        writer.write_batch(table, batch, {META_CHECKPOINT: cp.progress_bytes()})
        crash_point("batch")
        copied += nbytes
        progress.advance(d.count, nbytes)
        _stop_if_told(job)
    progress.end_table()
    return total, copied


def _stop_if_told(job: Job) -> None:
    if job.should_stop():
        raise InterruptedByUser("interrupted; the work done so far is kept", hint=job.resume_hint)
