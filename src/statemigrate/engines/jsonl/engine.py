"""The jsonl engine: its facts, detection and the doors to its reader and writer."""

from __future__ import annotations

from pathlib import Path

from ...errors import SourceError
from ..base import AppHolder, Capabilities, Engine, Reader, SideFile, Writer
from ..options import EngineOptions
from .format import CHECKPOINT_SUFFIX, JSONL_FACTS
from .reader import JsonlReader
from .writer import JsonlWriter


class JsonlEngine(Engine):
    """The portable JSON-lines dump."""

    name = "jsonl"
    extra = "jsonl"
    driver_module = "json"
    description = "portable JSON-lines dump with batch and footer checksums"
    facts = JSONL_FACTS
    capabilities = Capabilities(
        atomic_multi_table=True,
        read_only_open=True,
        multi_process_readers=True,
        directory=False,
    )
    sidecar_suffixes = (CHECKPOINT_SUFFIX,)
    # The checkpoint is read, and replaced by the temporary file written beside it.
    side_files = (
        SideFile(CHECKPOINT_SUFFIX, "the dump's checkpoint"),
        SideFile(CHECKPOINT_SUFFIX + ".tmp", "the dump's next checkpoint"),
    )
    suffixes = (".jsonl",)
    app_holder = AppHolder(
        "f = open(sys.argv[1], 'rb')\nf.readline()\n",
        unseen="a dump file carries no lock: a process reading it cannot be seen",
    )
    space_factor = 1.5

    @classmethod
    def detect(cls, path: Path) -> bool:
        if not path.is_file():
            return False
        with open(path, "rb") as f:
            return f.read(15) == b'{"statemigrate"'

    @classmethod
    def _open_reader(cls, path: Path, opts: EngineOptions) -> Reader:
        if path.is_dir():
            raise SourceError(f"{path}: is a directory, not a JSON-lines dump")
        return JsonlReader(path)

    @classmethod
    def _open_writer(cls, path: Path, opts: EngineOptions, create: bool) -> Writer:
        return JsonlWriter(path, create=create)
