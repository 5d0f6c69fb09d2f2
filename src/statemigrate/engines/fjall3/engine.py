"""fjall 3.x (on-disk format 3): one keyspace per table (see :mod:`._fjall`).

fjall 3 stores keyspace names (1-255 bytes of UTF-8) in its own metadata keyspace, not
as file names, so every table name of the model is a keyspace name as it is. fjall 3
takes a BSD lock (flock) on the store's ``lock`` file while a process has it open: a
store an app holds is refused (exit 3) with the app's pid.
"""

from __future__ import annotations

import dataclasses
from typing import ClassVar

from ...locks import LockProbe, SideFile
from .._fjall import FjallEngine, fjall_app_code, fjall_description
from ..base import AppHolder, StoreFacts


class Fjall3Engine(FjallEngine):
    """fjall 3.x stores through the bundled native binding."""

    name: ClassVar[str] = "fjall3"
    description: ClassVar[str] = fjall_description(3, "keyspace")
    major: ClassVar[int] = 3
    suffixes: ClassVar[tuple[str, ...]] = (".fjall3", ".fjall")
    # fjall 3 takes a flock on its lock file.
    app_holder = AppHolder(fjall_app_code(3), blocks_readers=True)
    volatile_files: ClassVar[tuple[str, ...]] = ("lock",)
    # Opened read-write at every open (the lock, then flocked); journals are truncated
    # where recovery ends.
    side_files: ClassVar[tuple[SideFile, ...]] = (
        SideFile("lock", "fjall's lock file", made=True),
        SideFile("*.jnl", "a fjall journal"),
    )
    facts: ClassVar[StoreFacts] = dataclasses.replace(
        FjallEngine.facts,
        locks=(LockProbe("lock", "flock"),),
        busy_hint="stop the application that uses it",
    )
