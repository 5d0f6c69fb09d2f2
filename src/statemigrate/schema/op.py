"""``from statemigrate import op``: the operations a revision's upgrade()/downgrade() call.

They are bound at run time to the store being upgraded (or to a recorder in
``--dry-run``), so one revision runs on every engine. A record is ``(key, value)``
in a plain table and ``(key, value, version)`` in a versioned one; keys and values
are bytes. Example::

    from statemigrate import op

    def upgrade():
        op.create_table("settings", versioned=True)
        op.rekey("events", lambda rec: rec[0][-8:] + rec[0][:-9])
        op.rewrite("events", lambda rec: (rec[0], rec[1].upper()))

    def downgrade():
        ...
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from ..errors import UsageError
from ..model import shown_name
from .errors import RevisionFailedError

Record = tuple  # (key, value) or (key, value, version)

_bound: list[Any] = []


def _ctx() -> Any:
    if not _bound:
        raise UsageError(
            "statemigrate.op is only usable inside a revision's upgrade() or downgrade() "
            "while statemigrate runs it (statemigrate upgrade STORE --schema DIR)"
        )
    return _bound[-1]


def _check_name(ctx: Any, name: str) -> None:
    """Refuse a new table name the store's engine cannot hold beside its tables.

    Checked before the operation runs (``--dry-run`` too), with the engine's declared
    rules (:meth:`~statemigrate.engines.base.Engine.table_name_problems`): on a SQL
    engine ``A`` beside ``a``, ``sqlite_x`` or ``alembic_version`` would fail only at
    the switch, or clash with the revision stamp.
    """
    existing = list(ctx.tables())
    if name in existing:
        return  # the context reports an existing table itself
    problem = ctx.engine.table_name_problems([*existing, name]).get(name)
    if problem is not None:
        raise RevisionFailedError(
            f"revision {ctx.revision}: the {ctx.engine.name} engine cannot hold table "
            f"{shown_name(name)} ({problem})"
        )


class bind:
    """Bind the operations to a context for the duration of a ``with`` block."""

    def __init__(self, ctx: Any) -> None:
        self.ctx = ctx

    def __enter__(self) -> Any:
        _bound.append(self.ctx)
        return self.ctx

    def __exit__(self, *exc: object) -> None:
        _bound.pop()


def create_table(name: str, versioned: bool = False) -> None:
    """Create an empty table (plain, or versioned: records carry a u64 version)."""
    _check_name(_ctx(), name)
    _ctx().create_table(name, versioned)


def drop_table(name: str) -> None:
    """Drop a table and all its records."""
    _ctx().drop_table(name)


def rename_table(old: str, new: str) -> None:
    """Rename a table (``new`` must not exist, nor differ from ``old`` only where the engine
    ignores it, such as the case of letters in SQL)."""
    _check_name(_ctx(), new)
    _ctx().rename_table(old, new)


def copy_table(
    source: str, destination: str, fn: Callable[..., Any] | None = None, *, batch: bool = False
) -> None:
    """Create ``destination`` as a copy of ``source`` (same kind), optionally rewritten.

    Args:
        source: the table to copy.
        destination: the new table (must not exist).
        fn: as in :func:`rewrite`, applied while copying (one pass instead of two).
        batch: as in :func:`rewrite`.
    """
    _check_name(_ctx(), destination)
    _ctx().copy_table(source, destination, fn, batch=batch)


def rewrite(table: str, fn: Callable[[Record], Record | None], *, batch: bool = False) -> None:
    """Replace each record by ``fn(record)``, or drop it when ``fn`` returns None.

    The keys ``fn`` returns must stay in ascending order (use :func:`rekey` to change
    the order). Records stream in batches; memory stays bounded.

    Args:
        table: the table to rewrite.
        fn: maps a record to a record (or None). With ``batch=True`` it maps a list
            of records to a list of records instead (fewer Python calls).
        batch: see ``fn``.
    """
    _ctx().rewrite(table, fn, batch=batch)


def one_pass() -> contextlib.AbstractContextManager[None]:
    """A block whose copies and rewrites of one table run in one pass over it.

    ``with op.one_pass():`` then ``op.copy_table("events", "payloads", f)`` and
    ``op.rewrite("events", g)`` read ``events`` once, feeding ``f`` and ``g`` batch by
    batch, interleaved, when the block ends (or sooner, when something in it reads a
    table or drops one). Outside the block each operation runs to its end before the
    next line. So inside it, a function must not rely on another's having seen the whole
    table, and Python code in the block sees none of their effects before its end.
    """
    return _ctx().one_pass()  # type: ignore[no-any-return]


def rekey(table: str, fn: Callable[[Record], bytes | None]) -> None:
    """Give each record the key ``fn(record)`` (None drops it); records are re-sorted.

    Sorting spills to files beside the store past a bound, so memory stays bounded
    on any table size. Two records with the same new key are an error.
    """
    _ctx().rekey(table, fn)


def set_versioned(table: str, initial_version: int = 0) -> None:
    """Make a plain table versioned; every record gets ``initial_version``."""
    _ctx().set_versioned(table, initial_version=initial_version)


def set_plain(table: str) -> None:
    """Make a versioned table plain (the versions are dropped)."""
    _ctx().set_plain(table)


def put(table: str, key: bytes, value: bytes, version: int | None = None) -> None:
    """Insert or replace one record (``version`` is required in a versioned table)."""
    _ctx().put(table, key, value, version)


def delete(table: str, key: bytes) -> None:
    """Delete one record (nothing happens when the key is absent)."""
    _ctx().delete(table, key)


def execute(sql: str) -> None:
    """Run SQL text; only SQL engines accept it (others raise an error naming the revision)."""
    _ctx().execute(sql)


def records(table: str) -> Iterator[Record]:
    """The table's records in key order, as the revision has left them so far."""
    return _ctx().records(table)  # type: ignore[no-any-return]


def has_table(name: str) -> bool:
    """Whether the table exists (as the revision has left the store so far)."""
    return bool(_ctx().has_table(name))


def tables() -> list[str]:
    """The names of the tables, as the revision has left the store so far."""
    return list(_ctx().tables())


__all__ = [
    "copy_table",
    "create_table",
    "delete",
    "drop_table",
    "execute",
    "has_table",
    "one_pass",
    "put",
    "records",
    "rekey",
    "rename_table",
    "rewrite",
    "set_plain",
    "set_versioned",
    "tables",
]
