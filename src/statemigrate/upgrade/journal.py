"""Per-revision atomicity: tables built aside, one atomic switch, a journal to finish it.

Why copy-on-write at table level: it is the one route that needs nothing of an
engine beyond creating, writing, reading and dropping tables, and it keeps every
revision all-or-nothing even where DDL is not transactional (RocksDB creates and
drops column families outside its WriteBatches). A revision's operations never
touch the store's tables: they build new tables under private names
(``__sm_tmp__N``). The **commit point** is one atomic metadata write holding the new
stamp and the journal: the list of idempotent steps (move a table into place, drop
an old one) that turn the private tables into the new state. The next open finishes
a journal found in the metadata before anything else; without a journal, private
tables are leftovers of a revision that never committed and are dropped.

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

META_JOURNAL = "upgrade_journal"
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
    """Run the journal's remaining steps, then remove it (its stamp is already in place)."""
    steps = journal["steps"]
    for i in range(int(journal.get("done", 0)), len(steps)):
        crash_point(f"step {i} {steps[i]['op']}")
        run_step(writer, steps[i], can_rename, batch_records, batch_bytes)
        writer.sync()
        journal["done"] = i + 1
        writer.put_metadata({META_JOURNAL: json.dumps(journal).encode()})
        writer.sync()
    crash_point("journal done")
    writer.put_metadata({META_JOURNAL: None})
    writer.sync()


def recover(writer: Writer, can_rename: bool, batch_records: int, batch_bytes: int) -> str | None:
    """Finish a committed journal, or drop what an uncommitted revision left.

    Returns:
        What was done ("finished the switch to REV", "removed leftovers of an
        interrupted revision"), or None when the store was clean.
    """
    raw = writer.metadata().get(META_JOURNAL)
    done = None
    if raw is not None:
        journal = json.loads(raw)
        finish_journal(writer, journal, can_rename, batch_records, batch_bytes)
        done = f"finished the interrupted switch to revision {journal['revision']}"
    leftovers = [t.name for t in writer.list_tables() if is_private(t.name)]
    for name in leftovers:
        writer.drop_table(name)
    if leftovers:
        writer.sync()
        done = (
            done
            or "removed the leftovers of an interrupted revision (the store is at its old revision)"
        )
    return done


def needs_recovery(meta: dict[str, bytes], tables: list[TableInfo]) -> bool:
    """Whether a store holds a journal or private tables (read from any reader)."""
    return META_JOURNAL in meta or any(is_private(t.name) for t in tables)
