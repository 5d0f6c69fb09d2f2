"""LMDB's options (an app's own layout) and the entry points that read them.

With a ``layout`` option naming a ``[kv]`` prefix layout, readers and writers are the
layout's (:mod:`.layout`); otherwise the default layout's (one named database per table).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ...errors import SourceError
from ...model import TableInfo
from ..base import Engine, Reader, Writer, check_options
from ..options import EngineOptions, option, skip_foreign_tables_option


@dataclass(frozen=True)
class LmdbOptions(EngineOptions):
    """LMDB's options: an app's own layout (README: Your app's own layout)."""

    layout: str | None = option(
        None,
        "a layout file (TOML) saying how the app lays its state out in LMDB, such as "
        "key prefixes in one named database (README: Your app's own layout)",
        expects="the path of a layout file",
    )
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


class LmdbEntryPoints(Engine):
    """Opening a store in the layout the options name (the default one without)."""

    @classmethod
    def check_source(cls, path: Path) -> None:
        """Refuse a path that is not an LMDB store directory (exit 4)."""
        if not cls.detect(path):
            raise SourceError(
                f"{path}: not an LMDB store (a directory holding data.mdb, or a single-file "
                "environment)"
            )

    @classmethod
    def open_reader(cls, path: Path, options: Mapping[str, Any] | None = None) -> Reader:
        from .._kv_mapping import KvLayoutReader, kv_layout
        from . import LmdbEngine, LmdbReader

        assert issubclass(cls, LmdbEngine)
        opts = check_options(cls, options, "source")
        layout = kv_layout(cls, opts)  # a bad layout file is refused before the store is read
        cls.check_source(path)
        if layout is None:
            return LmdbReader(cls, path)
        from .layout import RawLmdbReader

        skip = bool(opts["skip_foreign_tables"])
        return KvLayoutReader(RawLmdbReader(cls, path), layout, skip)

    @classmethod
    def create_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        return cls._writer(path, True, options)

    @classmethod
    def open_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        return cls._writer(path, False, options)

    @classmethod
    def _writer(cls, path: Path, create: bool, options: Mapping[str, Any] | None) -> Writer:
        from .._kv_mapping import KvLayoutWriter, kv_layout
        from . import LmdbEngine, LmdbWriter

        assert issubclass(cls, LmdbEngine)
        opts = check_options(cls, options, "dest")
        layout = kv_layout(cls, opts)  # before anything is made
        subdir = cls.wanted_subdir(opts)
        if layout is None:
            return LmdbWriter(cls, path, create=create, subdir=subdir)
        from .layout import RawLmdbWriter

        return KvLayoutWriter(RawLmdbWriter(cls, path, create, subdir), layout, create)

    @classmethod
    def wanted_subdir(cls, opts: Mapping[str, Any]) -> bool | None:
        """The shape a writer is asked for: the ``subdir`` option, else the layout's
        ``[kv] subdir``, else None (a new store a directory, an existing one as it is)."""
        if opts.get("subdir") is not None:
            return bool(opts["subdir"])
        if opts.get("layout"):
            from ...layout import load_layout

            spec = load_layout(opts["layout"], cls.name, cls.layout_family).kv
            return getattr(spec, "subdir", None)
        return None

    @classmethod
    def guess_layout(cls, path: Path) -> str:
        """A layout file guessed from an existing store (``statemigrate layout init``)."""
        from . import LmdbEngine
        from .layout import guess_layout

        assert issubclass(cls, LmdbEngine)
        cls.check_source(path)
        return guess_layout(cls, path)

    @classmethod
    def check_tables(cls, tables: list[TableInfo], options: Mapping[str, Any] | None) -> None:
        """The names (as every engine), and what the destination's layout cannot hold."""
        from .._kv_mapping import check_kv_tables, kv_layout

        layout = kv_layout(cls, check_options(cls, options, "dest"))
        if layout is not None:
            check_kv_tables(layout, tables)
        super().check_tables(tables, options)
