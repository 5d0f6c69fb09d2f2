"""redb's typed options: the file format written and the key types asserted bytewise."""

from __future__ import annotations

from dataclasses import dataclass

from ..options import EngineOptions, option
from .header import WRITABLE_FORMATS


@dataclass(frozen=True)
class RedbOptions(EngineOptions):
    """The redb engine's options (``--dest-option redb_format=N``, ``bytewise_key_types=T``)."""

    redb_format: int | None = option(
        None,
        "file format written: 3 (redb 2.6+/3.x/4.x) or 2 (redb 2.x); default: as the source was",
        applies="dest",
        expects="2 or 3 (the redb engine writes file formats 2 and 3)",
        choices=WRITABLE_FORMATS,
        flag="--redb-format",
    )
    bytewise_key_types: tuple[str, ...] = option(
        (),
        "a custom key type asserted to sort bytewise, so the batch loop can write it back "
        "(repeatable; redb -> redb by redb's own copy keeps the app's order and needs none)",
        applies="dest",
        flag="--bytewise-key",
    )
