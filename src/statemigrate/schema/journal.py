"""Per-revision atomicity: tables built aside, one atomic switch, a journal to finish it.

Why copy-on-write at table level: it is the one route that needs nothing of an
engine beyond creating, writing, reading and dropping tables, and it keeps every
revision all-or-nothing even where DDL is not transactional (RocksDB creates and
drops column families outside its WriteBatches). A revision's operations never
touch the store's tables: they build new tables under private names
(``__sm_tmp__N``). The **commit point** is one atomic metadata write holding the new
stamp and the journal: the list of idempotent steps (move a table into place, drop
an old one) that turn the private tables into the new state. ``upgrade`` and
``downgrade`` finish a journal found in the metadata before anything else.

Which tables are private is recorded, never guessed from their names: before a
revision creates a private table it commits the table's name in the metadata entry
``upgrade_pending`` (durable before the table exists), and the commit point moves
that list into the journal. Recovery drops exactly the tables those entries name, so
a user's own table that happens to be called ``__sm_tmp__1`` (converted in from
another store) is never taken for a leftover. Read-only commands only report an
unfinished upgrade (:func:`interrupted`); they never finish it.

Why no logical-to-physical name map (the alternative for engines that cannot rename,
like RocksDB): the app's own backend opens its column family ``events`` by name
(DESIGN.md, "Default layouts"); a map would leak into every reader, statemigrate's and
the app's. So where an engine cannot rename, "move" copies the private table into
the name, then drops it — slower, invisible to readers.

Engines with transactional DDL (SQLite) run the whole revision in one transaction:
the same steps, but a crash rolls everything back and no journal is ever seen.

The steps (each one idempotent, progress recorded in the journal after each, with a
``sync()`` before it is recorded, so a step is never skipped or run on a changed
table):

- ``move SRC DST``: if SRC exists, drop DST if it exists and rename (or copy and
  drop) SRC to DST; if SRC is gone the move finished before.
- ``drop T``: drop T if it exists.
"""

from __future__ import annotations

import json
import os
import signal
from typing import Any

from ..engines.base import Writer
from ..model import TableInfo, TableKind
from ..stores.interrupted import META_JOURNAL, META_PENDING, load_entry

META_CHECKSUMS = "revision_checksums"  # JSON {revision: sha256 of its file when applied}
TMP_PREFIX = "__sm_tmp__"

CRASH_AT_ENV = "STATEMIGRATE_UPGRADE_CRASH_AT"
CRASH_LOG_ENV = "STATEMIGRATE_UPGRADE_CRASH_LOG"
_crash_count = 0


def crash_point(label: str) -> None:
    """A point where the kill -9 harness may stop this process (tests only).

    ``STATEMIGRATE_UPGRADE_CRASH_AT=N`` sends SIGKILL to this process at the N-th
    point; ``STATEMIGRATE_UPGRADE_CRASH_LOG=FILE`` appends each point's label to FILE.
    (Counted rather than named like ``fsutil.crash_point``: an upgrade passes the
    same step once per batch, and the harness spreads its kills over all of them.)
    """
    global _crash_count
    at = os.environ.get(CRASH_AT_ENV)
    log = os.environ.get(CRASH_LOG_ENV)
    if not at and not log:
        return
    _crash_count += 1
    if log:
        with open(log, "a") as f:
            f.write(f"{_crash_count} {label}\n")
    if at and int(at) == _crash_count:
        os.kill(os.getpid(), signal.SIGKILL)


def is_private(name: str) -> bool:
    """Whether a table is one of the private tables an upgrade builds aside."""
    return name.startswith(TMP_PREFIX)


def plan_switch(
    view: dict[str, TableInfo], original: dict[str, TableInfo], fresh: Any
) -> list[dict[str, Any]]:
    """The steps that turn the store's ``original`` tables into ``view``.

    Args:
        view: logical name -> the physical table that holds its new content.
        original: the store's tables before the revision (physical = logical).
        fresh: returns a new private table name (for moving an original aside).
    """
    steps: list[dict[str, Any]] = []
    finals: list[tuple[str, TableInfo]] = []
    referenced = {t.name for t in view.values()}
    for logical, phys in sorted(view.items()):
        if phys.name == logical:
            continue  # unchanged table
        if phys.name in original:
            # A renamed original: straight to its new name, unless that name is an
            # original too (a swap, a rename over a dropped table): then aside first.
            if logical in original:
                tmp = fresh()
                steps.append({"op": "move", "src": phys.name, "dst": tmp, "kind": phys.kind.value})
                finals.append((logical, TableInfo(tmp, phys.kind)))
            else:
                steps.append(
                    {"op": "move", "src": phys.name, "dst": logical, "kind": phys.kind.value}
                )
        else:
            finals.append((logical, phys))
    for name in sorted(original):
        if name not in referenced:
            steps.append({"op": "drop", "table": name})
    for logical, phys in finals:
        steps.append({"op": "move", "src": phys.name, "dst": logical, "kind": phys.kind.value})
    return steps


def _exists(writer: Writer, name: str) -> bool:
    return any(t.name == name for t in writer.list_tables())


def copy_table(
    writer: Writer, src: TableInfo, dst: TableInfo, batch_records: int, batch_bytes: int
) -> None:
    """Copy every record of ``src`` into the new, empty table ``dst`` (same kind)."""
    writer.create_table(dst)
    for batch in writer.read_batches(src, max_records=batch_records, max_bytes=batch_bytes):
        writer.write_batch(dst, batch)
        crash_point(f"copy {src.name} -> {dst.name}")


def run_step(
    writer: Writer, step: dict[str, Any], can_rename: bool, batch_records: int, batch_bytes: int
) -> None:
    """Run one journal step (idempotent)."""
    if step["op"] == "drop":
        writer.drop_table(step["table"])
        return
    src, dst, kind = step["src"], step["dst"], TableKind(step["kind"])
    if not _exists(writer, src):
        return  # moved before a crash: the journal records progress only after sync
    writer.drop_table(dst)
    if can_rename:
        writer.rename_table(src, dst)
    else:
        copy_table(writer, TableInfo(src, kind), TableInfo(dst, kind), batch_records, batch_bytes)
        writer.sync()  # the copy is durable before its source goes
        crash_point(f"copied {src} -> {dst}")
        writer.drop_table(src)


def finish_journal(
    writer: Writer, journal: dict[str, Any], can_rename: bool, batch_records: int, batch_bytes: int
) -> None:
    """Run the journal's remaining steps, then remove it (its stamp is already in place).

    Private tables the revision recorded (``journal["private"]``) that no step left in
    place are dropped before the journal goes, so none outlives its record.
    """
    steps = journal["steps"]
    for i in range(int(journal.get("done", 0)), len(steps)):
        crash_point(f"step {i} {steps[i]['op']}")
        run_step(writer, steps[i], can_rename, batch_records, batch_bytes)
        writer.sync()
        journal["done"] = i + 1
        writer.put_metadata({META_JOURNAL: json.dumps(journal).encode()})
        writer.sync()
    if _drop_recorded(writer, recorded_tables(journal)):
        writer.sync()
    crash_point("journal done")
    writer.put_metadata({META_JOURNAL: None})
    writer.sync()


def recorded_tables(entry: dict[str, Any]) -> set[str]:
    """The private tables a journal (``private``) or a pending entry (``tables``) records.

    Not the names in the journal's steps: a step may move a user's own table whose name
    has the prefix, or rebuild it under that name.
    """
    names = set(entry.get("private", ())) | set(entry.get("tables", ()))
    return {n for n in names if is_private(n)}


def _drop_recorded(writer: Writer, names: set[str]) -> list[str]:
    """Drop those of ``names`` that exist; returns them."""
    present = sorted(t.name for t in writer.list_tables() if t.name in names)
    for name in present:
        writer.drop_table(name)
    return present


def recover(writer: Writer, can_rename: bool, batch_records: int, batch_bytes: int) -> str | None:
    """Finish a committed journal, or drop the tables an uncommitted revision recorded.

    Only tables named by the journal or by the ``upgrade_pending`` entry are dropped;
    a table that merely starts with ``__sm_tmp__`` is left alone.

    Args:
        writer: the store, open for writing (its lock held).
        can_rename: the engine renames tables (else a move copies).
        batch_records: records per batch at most, for copies.
        batch_bytes: payload bytes per batch at most, for copies.

    Returns:
        What was done ("finished the interrupted switch to revision REV", "removed the
        tables of an interrupted revision …"), or None when nothing was unfinished.
    """
    meta = writer.metadata()
    journal = load_entry(meta, META_JOURNAL)
    pending = load_entry(meta, META_PENDING)
    done = None
    if journal is not None:
        finish_journal(writer, journal, can_rename, batch_records, batch_bytes)
        done = f"finished the interrupted switch to revision {journal['revision']}"
    if pending is not None:
        dropped = _drop_recorded(writer, recorded_tables(pending))
        if dropped:
            writer.sync()
        writer.put_metadata({META_PENDING: None})
        writer.sync()
        done = done or (
            f"removed the tables of an interrupted revision {pending.get('revision', '')} "
            "(the store is at its old revision, with its old data)"
        )
    return done


def needs_recovery(meta: dict[str, bytes]) -> bool:
    """Whether an upgrade left work to finish or roll back (read from any reader's metadata)."""
    return META_JOURNAL in meta or META_PENDING in meta


def unrecorded_private(meta: dict[str, bytes], tables: list[TableInfo]) -> list[str]:
    """Tables named with the private prefix that no journal or pending entry records.

    They are not an upgrade's (a user's table converted in from another store, or a
    leftover of a version of statemigrate that did not record its tables): recovery
    leaves them alone and ``check`` reports them.
    """
    recorded: set[str] = set()
    for key in (META_JOURNAL, META_PENDING):
        entry = load_entry(meta, key)
        if entry is not None:
            recorded |= recorded_tables(entry)
    return sorted(t.name for t in tables if is_private(t.name) and t.name not in recorded)
