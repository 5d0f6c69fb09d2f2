"""Where a revision's operation writes a private table: records checked, then written
(:class:`Sink`), and a copy or rewrite queued for a shared pass (:class:`Pass`).

Every batch an operation produces is checked before it is written: records of the
table's shape (bytes, and a u64 version in a versioned table), keys strictly
ascending across batches (``op.rewrite`` must keep the order; ``op.rekey``'s sort
output repeats a key only when two records were given one), and keys the engine can
hold. The check runs in Rust (:func:`statemigrate.stores.walk.batch_facts`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ..digest import Digest
from ..engines.base import Engine, Writer
from ..errors import DestinationError
from ..model import TableInfo
from ..stores.walk import batch_facts
from .errors import RevisionFailedError
from .journal import crash_point


class Sink:
    """One private table being written by one operation.

    Args:
        engine: the store's engine (its key limits).
        writer: the store's writer.
        dst: the private table written.
        what: the operation, as errors and crash points name it ("rewrite of 'events'").
        fail: makes the error of the revision from a message.
        revision: the revision, for crash points.
        duplicates: the message when the input is sorted but a key repeats.
        table: the logical name, for errors about keys the engine refuses.
    """

    def __init__(
        self,
        engine: type[Engine],
        writer: Writer,
        dst: TableInfo,
        what: str,
        fail: Callable[[str], RevisionFailedError],
        revision: str,
        *,
        duplicates: str | None = None,
        table: str | None = None,
    ) -> None:
        self.engine = engine
        self.writer = writer
        self.dst = dst
        self.what = what
        self.fail = fail
        self.revision = revision
        self.duplicates = duplicates
        self.named = TableInfo(table or dst.name, dst.kind)
        self.last: bytes | None = None
        self.digest = Digest()  # of every record written: the private table's digest

    def put(self, batch: list) -> int:
        """Check and write one batch; returns its payload bytes."""
        if not batch:
            return 0
        dst = self.dst
        try:
            digest, nbytes, unsorted = batch_facts(batch, dst.versioned, self.last)
        except (TypeError, ValueError, OverflowError) as exc:
            shape = "(key, value, version)" if dst.versioned else "(key, value)"
            raise self.fail(
                f"{self.what} produced a record that is not {shape} of bytes ({exc})"
            ) from exc
        if unsorted >= 0:
            key = batch[unsorted][0]
            if self.duplicates is not None:
                raise self.fail(f"{self.duplicates} {key[:64].hex() or '(empty)'}")
            raise self.fail(
                f"{self.what} produced key {key[:64].hex()} out of order or twice; "
                "op.rewrite must keep keys in order (use op.rekey to change it)"
            )
        caps = self.engine.capabilities
        if caps.min_key_len or caps.max_key_len is not None:
            for rec in batch:
                try:
                    self.engine.check_key(self.named, rec[0])
                except DestinationError as exc:
                    raise self.fail(exc.message) from exc
        self.writer.write_batch(dst, batch)
        self.digest = self.digest + digest
        self.last = batch[-1][0]
        crash_point(f"{self.revision} {self.what}")
        return int(nbytes)


@dataclass
class Pass:
    """A queued copy or rewrite: its function and where it writes."""

    fn: Callable[..., Any] | None
    batch: bool
    sink: Sink

    def apply(self, records: list, shared: bool) -> list:
        """The records this operation writes for one batch of its source.

        ``shared``: other operations get the same batch (a batch function gets a
        copy of the list, so one that changes its argument changes only its own).
        """
        if self.fn is None:
            return records
        if self.batch:
            return [r for r in self.fn(list(records) if shared else records) if r is not None]
        return [r for r in map(self.fn, records) if r is not None]
