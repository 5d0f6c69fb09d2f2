"""LMDB's typed options: an app's own layout, foreign databases, a single-file store.

The engine (:class:`statemigrate.engines.lmdb.LmdbEngine`) reads them: with a ``layout``
naming a ``[kv]`` layout its readers and writers are the layout's (over the raw ones of
:mod:`.layout`), otherwise the default layout's (one named database per table).
"""

from __future__ import annotations

from dataclasses import dataclass

from ..options import EngineOptions, layout_option, option, skip_foreign_tables_option


@dataclass(frozen=True)
class LmdbOptions(EngineOptions):
    """LMDB's options: an app's own layout (README: Your app's own layout)."""

    layout: str | None = layout_option("in LMDB, such as key prefixes in one named database")
    subdir: bool | None = option(
        None,
        "false: write a single-file environment (MDB_NOSUBDIR, "
        "Postfix's FILE.lmdb) instead of a directory holding data.mdb; default: as the "
        "layout says ([kv] subdir), else a directory (an existing store: as it is)",
        applies="dest",
    )
    skip_foreign_tables: bool = skip_foreign_tables_option(
        "with a layout: leave out records and named databases the layout does not claim "
        "instead of refusing"
    )
