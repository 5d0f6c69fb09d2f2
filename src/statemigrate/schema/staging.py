"""The context ``op`` is bound to while a revision runs: copy-on-write tables.

A revision never writes the store's own tables. Each operation that changes a table
builds its new content in a private table (see :mod:`.journal`) and points the
table's logical name at it; single-record ``put``/``delete`` collect in an overlay
that is merged in one streaming pass when the table is next read, or at the end.
Inside ``op.one_pass()`` copies and rewrites of one table run in one pass over it.
:meth:`Staging.commit` then writes the new stamp and the switch journal in one atomic
metadata write and runs the switch. ``--dry-run`` binds :class:`.recorder.Recorder`
instead.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable, Iterator
from typing import Any

from ..digest import Digest
from ..engines.base import META_REVISION, META_TABLE_PREFIX
from ..errors import UsageError
from ..model import TableInfo, TableKind, check_table_name
from .errors import RevisionFailedError
from .job import RevisionRun
from .journal import (
    META_CHECKSUMS,
    META_JOURNAL,
    META_PENDING,
    TMP_PREFIX,
    crash_point,
    finish_journal,
    plan_switch,
)
from .sink import Pass, Sink
from .sort import sorted_batches


class Staging:
    """Runs one revision's operations against a writer, copy-on-write."""

    def __init__(
        self,
        run: RevisionRun,
        revision: str,
        *,
        to: list[str] | None = None,
        direction: str = "upgrade",
    ) -> None:
        self.engine = run.engine
        self.writer = writer = run.writer
        self.path = run.path
        self.revision = revision
        self.batch_records = run.batch_records
        self.batch_bytes = run.batch_bytes
        self.counter = run.counter  # shared across a run: private names never repeat
        self.to = list(to or [])
        self.direction = direction
        self.progress = run.progress  # a bar or log line per table written
        # Progress totals: the store's tables' record counts where known (shared across
        # a run, carried over each commit), and what this revision wrote in its tables.
        self.counts = run.counts
        self.run = run
        self.sinks: dict[str, Sink] = {}  # private table -> the operation writing it
        self.written: dict[str, int] = {}
        self.private: list[str] = []  # every private name this revision took, in order
        self.original = {t.name: t for t in writer.list_tables()}
        self.view: dict[str, TableInfo] = dict(self.original)
        self.overlay: dict[str, dict[bytes, tuple | None]] = {}
        # copies and rewrites queued for one pass over their common source (_flush)
        self.passes: list[Pass] = []
        self.passes_source: TableInfo | None = None
        self.drop_after_passes: list[str] = []
        self.inflight: dict[str, TableInfo] = {}  # during a pass: table written -> its source
        self.one_pass_depth = 0  # inside op.one_pass(): copies and rewrites wait for its end
        self.log: list[str] = []

    # -- helpers ---------------------------------------------------------------

    def _fail(self, message: str) -> RevisionFailedError:
        return RevisionFailedError(f"revision {self.revision}: {message}")

    def _fresh_name(self) -> str:
        """A private name no table of the store has (a user's table may use the prefix)."""
        while True:
            self.counter[0] += 1
            name = f"{TMP_PREFIX}{self.counter[0]}"
            if name not in self.original and name not in self.view:
                self.private.append(name)
                return name

    def _pending_entry(self) -> bytes:
        return json.dumps(
            {
                "revision": self.revision,
                "to": self.to,
                "direction": self.direction,
                "tables": self.private,
            }
        ).encode()

    def _new_private(self, kind: TableKind) -> TableInfo:
        """Create a private table, its name committed (and durable) in the metadata first."""
        table = TableInfo(self._fresh_name(), kind)
        self.writer.put_metadata({META_PENDING: self._pending_entry()})
        if not self.engine.capabilities.transactional_ddl:
            self.writer.sync()  # the record is durable before the table can exist
        self.writer.create_table(table)
        return table

    def _is_ours(self, table: TableInfo) -> bool:
        return table.name in self.private

    def _table(self, name: str) -> TableInfo:
        if name not in self.view:
            raise self._fail(
                f"no table {name!r} (tables: {', '.join(sorted(self.view)) or 'none'})"
            )
        return self.view[name]

    def _check_new_name(self, name: str) -> None:
        try:
            check_table_name(name)
        except UsageError as exc:
            raise self._fail(exc.message) from exc
        if name.startswith(TMP_PREFIX):
            raise self._fail(f"table names starting with {TMP_PREFIX!r} are reserved")
        if name in self.view:
            raise self._fail(f"table {name!r} already exists")

    def _replace(self, name: str, new: TableInfo) -> None:
        """Point ``name`` at ``new``; a private table it pointed at is no longer needed."""
        old = self.view.get(name)
        self.view[name] = new
        if old is not None and self._is_ours(old) and old.name != new.name:
            if self.passes_source is not None and self.passes_source.name == old.name:
                self.drop_after_passes.append(old.name)  # queued passes read it still
            else:
                self.writer.drop_table(old.name)

    def _batches(self, name: str) -> Iterator[list]:
        self._flush()
        self._materialize(name)
        table = self._table(name)
        # Read from inside a queued operation's function: a table that pass is writing
        # reads as it was before (its source), never half-written.
        table = self.inflight.get(table.name, table)
        return self.writer.read_batches(
            table, max_records=self.batch_records, max_bytes=self.batch_bytes
        )

    def _sink(
        self, dst: TableInfo, what: str, duplicates: str | None = None, table: str | None = None
    ) -> Sink:
        sink = self.sinks[dst.name] = Sink(
            self.engine,
            self.writer,
            dst,
            what,
            self._fail,
            self.revision,
            duplicates=duplicates,
            table=table,
        )
        return sink

    def _count(self, table: TableInfo, name: str | None = None) -> int | None:
        """The records ``table`` (as stored) holds, where known; None with changes
        pending in ``name``'s overlay."""
        if name is not None and self.overlay.get(name):
            return None
        if self._is_ours(table):
            return self.written.get(table.name)
        return self.counts.get(table.name)

    def _carry_digests(self) -> None:
        """At the commit: each table's digest under its name as the switch leaves it, so
        that the digest after the run needs no walk. A table still the store's own has
        the digest it had; one an operation wrote, the digest of the records written."""
        known = self.run.digests
        if known is None:
            return
        carried: dict[str, tuple[TableKind, Digest]] = {}
        for name, t in self.view.items():
            if self._is_ours(t):
                sink = self.sinks.get(t.name)
                carried[name] = (t.kind, sink.digest if sink is not None else Digest())
            elif t.name in known:
                carried[name] = known[t.name]
            else:
                self.run.digests = None  # a table nothing digested: the walk decides
                return
        known.clear()
        known.update(carried)

    def _carry_counts(self) -> None:
        """At the commit: the counts under the tables' names as the switch leaves them."""
        known = {name: self._count(t, name) for name, t in self.view.items()}
        self.counts.clear()
        self.counts.update({name: n for name, n in known.items() if n is not None})

    def _write(
        self,
        dst: TableInfo,
        batches: Iterator[list],
        what: str,
        duplicates: str | None = None,
        table: str | None = None,
        total: int | None = None,
    ) -> None:
        """Write batches into ``dst``, checked (see :class:`.sink.Sink`); ``total``: the
        records its source holds, where known (progress)."""
        sink = self._sink(dst, what, duplicates, table)
        self.progress.start_table(what, total)
        written = 0
        for batch in batches:
            if batch:
                written += len(batch)
                self.progress.advance(len(batch), sink.put(batch))
        self.written[dst.name] = written
        self.progress.end_table()

    def _defer(
        self,
        src: TableInfo,
        dst: TableInfo,
        fn: Callable[..., Any] | None,
        batch: bool,
        what: str,
        table: str,
    ) -> None:
        """Queue a copy or rewrite of ``src`` into ``dst``: it runs at once, or inside
        ``op.one_pass()`` in one pass with the others that read ``src`` (:meth:`_flush`)."""
        if self.passes and self.passes_source is not None and self.passes_source.name != src.name:
            self._flush()
        self.passes_source = src
        self.passes.append(Pass(fn, batch, self._sink(dst, what, table=table)))

    def _flush(self) -> None:
        """Run the queued copies and rewrites: one read of their source feeds them all.

        Inside ``op.one_pass()`` a revision that copies a table and rewrites it (0003 of
        the example) reads it once. Anything that reads a table, drops one or ends the
        block runs the queue first, so every operation sees what the ones before it left.
        """
        passes, self.passes = self.passes, []
        source, self.passes_source = self.passes_source, None
        if not passes or source is None:
            return
        what = " and ".join(p.sink.what for p in passes)
        self.progress.start_table(what, self._count(source))
        self.inflight = {p.sink.dst.name: source for p in passes}
        written = dict.fromkeys((p.sink.dst.name for p in passes), 0)
        try:
            for records in self.writer.read_batches(
                source, max_records=self.batch_records, max_bytes=self.batch_bytes
            ):
                nbytes = 0
                for p in passes:
                    out = p.apply(records, len(passes) > 1)
                    written[p.sink.dst.name] += len(out)
                    nbytes += p.sink.put(out)
                self.progress.advance(len(records), nbytes)
        finally:
            self.inflight = {}
        self.written.update(written)
        self.progress.end_table()
        drops, self.drop_after_passes = self.drop_after_passes, []
        for name in drops:
            self.writer.drop_table(name)

    def _materialize(self, name: str) -> None:
        """Merge pending single-record puts/deletes into a new private table."""
        pending = self.overlay.pop(name, None)
        if not pending:
            return
        self._flush()
        src = self._table(name)
        dst = self._new_private(src.kind)
        changes = sorted(pending.items())

        def merged() -> Iterator[list]:
            i = 0
            for batch in self.writer.read_batches(
                src, max_records=self.batch_records, max_bytes=self.batch_bytes
            ):
                out = []
                for rec in batch:
                    while i < len(changes) and changes[i][0] < rec[0]:
                        if changes[i][1] is not None:
                            out.append(changes[i][1])
                        i += 1
                    if i < len(changes) and changes[i][0] == rec[0]:
                        if changes[i][1] is not None:
                            out.append(changes[i][1])
                        i += 1
                    else:
                        out.append(rec)
                yield out
            yield [c[1] for c in changes[i:] if c[1] is not None]

        self._write(dst, merged(), f"put/delete in {name!r}", table=name)
        self._replace(name, dst)

    # -- the operations (see statemigrate.schema.op) --------------------------

    def create_table(self, name: str, versioned: bool = False) -> None:
        self._check_new_name(name)
        self.log.append(f"create_table {name!r}{' versioned' if versioned else ''}")
        self.view[name] = self._new_private(TableKind.VERSIONED if versioned else TableKind.PLAIN)

    def drop_table(self, name: str) -> None:
        self._flush()
        self._table(name)
        self.log.append(f"drop_table {name!r}")
        self.overlay.pop(name, None)
        old = self.view.pop(name)
        if self._is_ours(old):
            self.writer.drop_table(old.name)

    def rename_table(self, old: str, new: str) -> None:
        self._table(old)
        self._check_new_name(new)
        self.log.append(f"rename_table {old!r} -> {new!r}")
        self.view[new] = self.view.pop(old)
        if old in self.overlay:
            self.overlay[new] = self.overlay.pop(old)

    def copy_table(
        self,
        source: str,
        destination: str,
        fn: Callable[..., Any] | None = None,
        batch: bool = False,
    ) -> None:
        self._materialize(source)
        src = self._table(source)
        self._check_new_name(destination)
        how = f" with {getattr(fn, '__name__', 'fn')}" if fn is not None else ""
        self.log.append(f"copy_table {source!r} -> {destination!r}{how}")
        dst = self._new_private(src.kind)
        self._defer(src, dst, fn, batch, f"copy_table {source!r}", destination)
        self.view[destination] = dst
        if not self.one_pass_depth:
            self._flush()

    def rewrite(self, table: str, fn: Callable[..., Any], batch: bool = False) -> None:
        self._materialize(table)
        src = self._table(table)
        self.log.append(f"rewrite {table!r} with {getattr(fn, '__name__', 'fn')}")
        dst = self._new_private(src.kind)
        self._defer(src, dst, fn, batch, f"rewrite of {table!r}", table)
        self._replace(table, dst)
        if not self.one_pass_depth:
            self._flush()

    @contextlib.contextmanager
    def one_pass(self) -> Iterator[None]:
        """``op.one_pass()``: copies and rewrites in the block wait for its end (see op)."""
        self.log.append("one_pass")
        self.one_pass_depth += 1
        try:
            yield
        finally:
            self.one_pass_depth -= 1
        if not self.one_pass_depth:  # not reached when the block raised
            self._flush()

    def rekey(self, table: str, fn: Callable[..., Any]) -> None:
        src = self._table(table)
        self.log.append(f"rekey {table!r} with {getattr(fn, '__name__', 'fn')}")
        dst = self._new_private(src.kind)

        def rekeyed() -> Iterator[list]:
            for records in self._batches(table):
                keys = list(map(fn, records))
                out: list[tuple[Any, ...]]
                if src.versioned:
                    out = [(k, r[1], r[2]) for k, r in zip(keys, records) if k is not None]
                else:
                    out = [(k, r[1]) for k, r in zip(keys, records) if k is not None]
                if not all(isinstance(r[0], bytes) for r in out):
                    bad = next(r[0] for r in out if not isinstance(r[0], bytes))
                    raise self._fail(
                        f"rekey of {table!r}: fn returned {type(bad).__name__}, not bytes"
                    )
                yield out

        self._write(
            dst,
            sorted_batches(
                rekeyed(),
                self.path,
                versioned=src.versioned,
                batch_records=self.batch_records,
                batch_bytes=self.batch_bytes,
            ),
            f"rekey of {table!r}",
            duplicates=f"rekey of {table!r} gives two records the key",
            table=table,
            total=self._count(src, table),
        )
        self._replace(table, dst)

    def set_versioned(self, table: str, initial_version: int = 0) -> None:
        src = self._table(table)
        if src.versioned:
            raise self._fail(f"table {table!r} is already versioned")
        if not 0 <= initial_version < 2**64:
            raise self._fail(f"initial_version {initial_version} is not an unsigned 64-bit integer")
        self.log.append(f"set_versioned {table!r} initial_version={initial_version}")
        dst = self._new_private(TableKind.VERSIONED)
        self._write(
            dst,
            ([(r[0], r[1], initial_version) for r in b] for b in self._batches(table)),
            f"set_versioned {table!r}",
            total=self._count(src, table),
        )
        self._replace(table, dst)

    def set_plain(self, table: str) -> None:
        src = self._table(table)
        if not src.versioned:
            raise self._fail(f"table {table!r} is already plain")
        self.log.append(f"set_plain {table!r}")
        dst = self._new_private(TableKind.PLAIN)
        self._write(
            dst,
            ([(r[0], r[1]) for r in b] for b in self._batches(table)),
            f"set_plain {table!r}",
            total=self._count(src, table),
        )
        self._replace(table, dst)

    def put(self, table: str, key: bytes, value: bytes, version: int | None = None) -> None:
        t = self._table(table)
        if t.versioned != (version is not None):
            need = "needs a version" if t.versioned else "is plain: give no version"
            raise self._fail(f"put into {table!r}: the table {need}")
        if not isinstance(key, bytes) or not isinstance(value, bytes):
            raise self._fail(f"put into {table!r}: key and value must be bytes")
        self.log.append(f"put {table!r} key {key[:32].hex()}")
        rec = (key, value, version) if t.versioned else (key, value)
        self.overlay.setdefault(table, {})[key] = rec

    def delete(self, table: str, key: bytes) -> None:
        self._table(table)
        self.log.append(f"delete {table!r} key {key[:32].hex()}")
        self.overlay.setdefault(table, {})[key] = None

    def execute(self, sql: str) -> None:
        caps = self.engine.capabilities
        if not (caps.sql and caps.transactional_ddl):
            raise self._fail(
                f"op.execute needs a SQL engine; the {self.engine.name} engine is not one "
                "(write the revision with the other op functions to run on every engine)"
            )
        self.log.append(f"execute {sql[:60]!r}")
        # Inside the revision's one transaction: put the view in place, run the SQL
        # on the real tables, then carry on from what the SQL left.
        self._switch_now()
        self.writer.execute_sql(sql)
        self.counts.clear()  # what the SQL did to the tables is not known
        self.run.digests = None  # nor their digests: the walk after the run decides
        self.original = {t.name: t for t in self.writer.list_tables()}
        self.view = dict(self.original)

    def records(self, table: str) -> Iterator[tuple]:
        for batch in self._batches(table):
            yield from batch

    def has_table(self, name: str) -> bool:
        return name in self.view

    def tables(self) -> list[str]:
        return sorted(self.view)

    # -- the switch ------------------------------------------------------------

    def _finish_ops(self) -> list[dict[str, Any]]:
        self._flush()
        for name in list(self.overlay):
            self._materialize(name)
        return plan_switch(self.view, self.original, self._fresh_name)

    def _switch_now(self) -> None:
        steps = self._finish_ops()
        finish_journal(
            self.writer,
            {"revision": self.revision, "steps": steps, "private": list(self.private)},
            True,
            self.batch_records,
            self.batch_bytes,
        )

    def commit(self, heads_after: list[str], checksums: dict[str, str]) -> None:
        """The commit point (stamp + journal, one atomic write), then the switch."""
        steps = self._finish_ops()
        self._carry_counts()
        self._carry_digests()
        meta = self.writer.metadata()
        updates: dict[str, bytes | None] = {}
        # Per-table metadata (typed keys …) follows its table: dropped or rebuilt
        # tables lose it (their keys may have changed), renamed ones keep it.
        for name in self.original:
            entry = meta.get(META_TABLE_PREFIX + name)
            if entry is None:
                continue
            keeper = [n for n, t in self.view.items() if t.name == name]
            if keeper != [name]:
                updates[META_TABLE_PREFIX + name] = None
            if keeper and keeper != [name]:
                updates[META_TABLE_PREFIX + keeper[0]] = entry
        journal = {
            "revision": self.revision,
            "to": self.to,
            "direction": self.direction,
            "steps": steps,
            "done": 0,
            "private": list(self.private),
        }
        self.writer.sync()  # every private table durable before the commit point
        crash_point(f"{self.revision} before commit")
        updates.update(
            {
                META_REVISION: json.dumps(heads_after).encode(),
                META_CHECKSUMS: json.dumps(checksums, sort_keys=True).encode(),
                META_JOURNAL: json.dumps(journal).encode(),
                META_PENDING: None,  # the journal records the private tables from here on
            }
        )
        self.writer.put_metadata(updates)
        self.writer.sync()
        crash_point(f"{self.revision} committed")
        finish_journal(
            self.writer,
            journal,
            self.engine.capabilities.rename_table,
            self.batch_records,
            self.batch_bytes,
        )
