"""The redb engine: its facts, file formats, options and the doors to its reader and writer."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any, ClassVar

from ...errors import DestinationError, SourceError
from ...model import TableInfo
from ..base import AppHolder, Capabilities, Engine, NativeCopy, Reader, StoreFacts, Writer
from ..options import EngineOptions, Side
from .header import DEFAULT_FORMAT, FORMAT_WRITERS, MAGIC, REDB_FACTS, WRITABLE_FORMATS, read_header
from .options import RedbOptions
from .reader import RedbReader
from .tables import _Target, _written_by_redb2, choose_format, respelt, table_info
from .writer import RedbWriter


class RedbEngine(Engine):
    """redb files of format 1, 2 and 3 (read); 2 and 3 written, as the source was by default."""

    name: ClassVar[str] = "redb"
    extra: ClassVar[str] = "redb"
    driver_module: ClassVar[str] = "statemigrate._native"
    description: ClassVar[str] = "redb 1.x/2.x/4.x files through the bundled native binding"
    capabilities: ClassVar[Capabilities] = Capabilities(
        atomic_multi_table=True,
        read_only_open=True,
        multi_process_readers=False,
        directory=False,
        typed_keys=True,
        in_place=True,
        transactional_ddl=False,
    )
    options: ClassVar[type[EngineOptions]] = RedbOptions
    facts: ClassVar[StoreFacts] = REDB_FACTS
    reader_options: ClassVar[Side | None] = None  # its writer's options are accepted, as before
    space_factor: ClassVar[float] = 2.0
    suffixes: ClassVar[tuple[str, ...]] = (".redb",)
    # The file open through redb's Database::open (the project's binding of the crate:
    # the same call an app's redb makes, in the file's format), one read done.
    app_holder = AppHolder(
        "from pathlib import Path\n"
        "from statemigrate import _native\n"
        "from statemigrate.engines.redb import read_header\n"
        "fmt = read_header(Path(sys.argv[1]))['format']\n"
        "db = _native.RedbWriter(sys.argv[1], fmt, False)\n"
        "db.list_tables()\n",
        blocks_readers=True,
    )

    @classmethod
    def detect(cls, path: Path) -> bool:
        """A file starting with redb's magic number (read with plain I/O)."""
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            return f.read(len(MAGIC)) == MAGIC

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        """The file format (from the primary commit slot) and which redb versions write it."""
        return read_header(path)

    @classmethod
    def table_type(cls, facts: Any) -> str | None:
        """``u64 → (u16, &[u8])``, ``multimap``, ``custom order``."""
        if not isinstance(facts, dict):
            return None

        def words(t: dict[str, Any] | None) -> str:
            return str(t.get("name", "?")).replace(",", ", ") if t else "?"

        kind = "multimap " if facts.get("multimap") else ""
        text = f"{kind}{words(facts.get('key'))} → {words(facts.get('value'))}"
        return text + (", custom order" if facts.get("order") == "custom" else "")

    @classmethod
    def _source_format(cls, path: Path) -> int:
        info = read_header(path)
        fmt = int(info["format"])
        if fmt not in FORMAT_WRITERS:
            known = "; ".join(f"{k} ({v})" for k, v in FORMAT_WRITERS.items())
            raise SourceError(
                f"{path}: unsupported redb file format {fmt}; this build reads formats {known}"
            )
        return fmt

    @classmethod
    def _open_reader(cls, path: Path, opts: RedbOptions) -> Reader:
        """Open at one snapshot, read-only (redb 4.x) or through a copy-on-write view."""
        native = cls.require_driver()
        fmt = cls._source_format(path)
        try:
            with cls.facts.mapped(path, writing=False):
                handle = native.RedbReader(str(path), fmt)
        except SourceError as exc:
            if "unsupported redb file format" in exc.message:
                raise SourceError(
                    f"{path}: unsupported redb file format {fmt} (written by {FORMAT_WRITERS[fmt]})"
                ) from exc
            raise
        return RedbReader(path, handle)

    @classmethod
    def _open_writer(cls, path: Path, opts: RedbOptions, create: bool) -> Writer:
        """A writer of a new redb file, created at its first write (see :class:`RedbWriter`):
        in ``redb_format`` if given, else the format the tables were read from (their
        meta), else the newest (3); or of an existing file, in the format it has."""
        native = cls.require_driver()
        if create:
            if path.exists():
                raise DestinationError(f"{path}: already exists")
            return RedbWriter(path, native, opts)
        fmt = cls._source_format(path)
        if fmt not in WRITABLE_FORMATS:
            raise DestinationError(
                f"{path}: redb file format {fmt} ({FORMAT_WRITERS[fmt]}) cannot be written"
            )
        redb2 = fmt == 3 and cls._written_by_redb2(path, fmt)
        with cls.facts.mapped(path, writing=True):
            handle = native.RedbWriter(str(path), fmt, False, redb2)
        return RedbWriter(path, native, opts, handle, redb2)

    @classmethod
    def _written_by_redb2(cls, path: Path, fmt: int) -> bool:
        """Whether a format-3 file's own tables are spelt as redb 2.6 spells them.

        Such a file is written through redb 2.6 again: redb 3.0 and later rewrite
        its allocator state in a way redb 2.6 no longer opens.
        """
        native = cls.require_driver()
        with cls.facts.mapped(path, writing=False):
            reader = native.RedbReader(str(path), fmt)
            try:
                descs = reader.list_tables()
            finally:
                reader.close()
        return any(_written_by_redb2(table_info(d, fmt).meta) for d in descs)

    @classmethod
    def native_copy(
        cls, reader: Reader, options: Mapping[str, Any] | None = None
    ) -> NativeCopy | None:
        """The file's bytes copied under the reader's lock, made a clean file of the redb
        version that writes its format (:meth:`RedbReader.copy_into`); with ``redb_format``
        3, a format-2 file is then upgraded by redb 2.6's own ``Database::upgrade``.

        Declined where the batch path would write something else: a format-1 file, a
        format going back (3 to 2), and with an explicit ``redb_format`` any table whose
        types the batch path may spell anew (:func:`respelt`: composites, versioned values,
        redb 3.x's and 4.x's own classifications). ``bytewise_key_types`` changes nothing
        here, and none is needed: the copy keeps the app's own order.
        """
        if not isinstance(reader, RedbReader):
            return None
        opts = cls.parse_options(options, "dest")
        source = reader.format
        target = opts.redb_format or source
        if source not in WRITABLE_FORMATS or target < source:
            return None
        metas = [t.meta for t in reader.list_tables() if t.meta]
        if opts.redb_format is not None and any(respelt(m) for m in metas):
            return None
        redb2 = source == 3 and any(_written_by_redb2(m) for m in metas)
        upgrade = target > source
        method = "redb file copy, upgraded by redb 2.6" if upgrade else "redb file copy"

        def run(path: Path) -> None:
            reader.copy_into(path, redb2=redb2, upgrade=upgrade)

        return NativeCopy(method, run, digest_alongside=True)

    @classmethod
    def check_tables(cls, tables: list[TableInfo], options: Mapping[str, Any] | None) -> None:
        """Refuse, before anything is created, every table a new redb file cannot hold.

        Names first (the engine's rules), then the types: the file format the tables
        would be written in (see :func:`choose_format`), user-defined key types not
        asserted bytewise, types the writer cannot produce; one error lists them all.

        Raises:
            DestinationError: exit 5, every offending table with its type and the
                option that would allow it.
        """
        super().check_tables(tables, options)
        opts = cls.parse_options(options, "dest")
        first = None
        try:
            fmt, redb2 = choose_format(opts.redb_format, [t.meta for t in tables])
        except DestinationError as exc:
            # Refused as a whole (format 1): the tables are checked for the newest
            # format, so that the user learns everything at once.
            first, fmt, redb2 = exc, DEFAULT_FORMAT, False
        _Target(cls.require_driver(), fmt, redb2, opts).check(tables, "redb destination", first)

    @classmethod
    def check_own_copy(cls, tables: list[TableInfo], options: Mapping[str, Any] | None) -> None:
        """The names alone: redb's own copy keeps every table as the app's redb stored it,
        in the app's own key order (no ``--bytewise-key`` needed), and is declined
        wherever the types would be spelt anew (:meth:`native_copy`)."""
        cls.check_table_names(tables)
