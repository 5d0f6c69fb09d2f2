"""The context ``op`` is bound to in ``--dry-run``: it records the operations, changes nothing."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from typing import Any

from ..engines.base import Engine
from ..model import TableInfo
from .errors import RevisionFailedError


class Recorder:
    """The context of ``--dry-run``: records the operations, changes nothing."""

    def __init__(self, engine: type[Engine], revision: str, tables: list[TableInfo]) -> None:
        self.engine = engine
        self.revision = revision
        self.names = {t.name for t in tables}
        self.log: list[str] = []

    def __getattr__(self, op: str) -> Callable[..., Any]:
        def record(*args: Any, **kwargs: Any) -> None:
            shown = [getattr(a, "__name__", None) or repr(a)[:60] for a in args]
            shown += [f"{k}={v!r}" for k, v in kwargs.items()]
            self.log.append(f"{op} {', '.join(shown)}")
            if op in ("create_table", "copy_table"):
                self.names.add(args[-1] if op == "copy_table" else args[0])
            elif op == "drop_table":
                self.names.discard(args[0])
            elif op == "rename_table":
                self.names.discard(args[0])
                self.names.add(args[1])
            elif op == "execute" and not self.engine.capabilities.sql:
                raise RevisionFailedError(
                    f"revision {self.revision}: op.execute needs a SQL engine; "
                    f"the {self.engine.name} engine is not one"
                )

        return record

    def one_pass(self) -> contextlib.AbstractContextManager[None]:
        self.log.append("one_pass")
        return contextlib.nullcontext()

    def records(self, table: str) -> Iterator[tuple]:
        self.log.append(f"records {table!r}")
        return iter(())

    def has_table(self, name: str) -> bool:
        return name in self.names

    def tables(self) -> list[str]:
        return sorted(self.names)
