"""The revision graph: Alembic's own ScriptDirectory and revision map.

A schema directory is an Alembic script directory (``script.py.mako``,
``versions/*.py``, an optional ``alembic.ini``), so ``alembic history`` and
``alembic revision`` work on it too. Branches, merges, ``head``/``heads``/``base``
and relative targets (``+1``, ``-1``) resolve exactly as Alembic resolves them: the
steps come from ``ScriptDirectory._upgrade_revs``/``_downgrade_revs`` and the stamped
heads move through Alembic's ``HeadMaintainer`` (with the SQL left out), the code
Alembic's own ``command.upgrade`` runs.
"""

from __future__ import annotations

import contextlib
import hashlib
import io
import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from .errors import SchemaError


@dataclass
class Step:
    """One revision to run: its id, direction, function, file and the heads after it."""

    revision: str
    upgrade: bool
    doc: str
    fn: Callable[[], None]
    path: str
    heads_after: list[str]

    @property
    def direction(self) -> str:
        return "upgrade" if self.upgrade else "downgrade"


def _heads_only() -> Any:
    from alembic.runtime.migration import HeadMaintainer

    class HeadsOnly(HeadMaintainer):
        """Alembic's head bookkeeping without its SQL (the stamp is written by us)."""

        def __init__(self, heads: Iterable[str]) -> None:
            self.heads = set(heads)

        def _insert_version(self, version: str) -> None:
            self.heads.add(version)

        def _delete_version(self, version: str) -> None:
            self.heads.remove(version)

        def _update_version(self, from_: str, to_: str) -> None:
            self.heads.remove(from_)
            self.heads.add(to_)

    return HeadsOnly


def _run_from_their_bytes(script: Any) -> dict[str, str]:
    """Make Alembic's ScriptDirectory ``script`` run each revision module from the bytes
    it read once; returns ``{path: checksum of those bytes}``, filled as it loads.

    Alembic imports a revision through the import system, which runs the ``.pyc`` in
    ``__pycache__`` whenever its recorded size and mtime match the source's: a file
    replaced by one of the same size with the old mtime would run the old code while
    the new file's checksum was recorded. Here each file is read once, its bytes are
    compiled and run (no bytecode read or written), and their checksum is kept for the
    stamp. Sourceless schemas (``.pyc`` files only) are loaded by Alembic as they are.
    """
    import importlib.abc
    import importlib.util
    import re

    from alembic import util
    from alembic.script import Script
    from alembic.script.revision import RevisionMap

    class FromBytes(importlib.abc.SourceLoader):
        """A loader of one module from given source bytes, with no bytecode cache."""

        def __init__(self, path: str, data: bytes) -> None:
            self.path = path
            self.data = data

        def get_filename(self, fullname: str) -> str:
            return self.path

        def get_data(self, path: str) -> bytes:
            if path != self.path:
                raise OSError(f"{path}: not read (only the source's bytes run)")
            return self.data

    revision_file = re.compile(r"(?!\.\#|__init__)(.*\.py)$")  # Alembic's, sources only
    legacy_id = re.compile(r"([a-f0-9]+)\.py$")
    checksums: dict[str, str] = {}

    def from_bytes(path: Path) -> Any:
        data = path.read_bytes()
        loader = FromBytes(str(path), data)
        spec = importlib.util.spec_from_file_location(
            re.sub(r"\W", "_", path.name), path, loader=loader
        )
        assert spec is not None
        module = importlib.util.module_from_spec(spec)
        loader.exec_module(module)
        if hasattr(module, "revision"):
            rev_id = module.revision
        else:  # as Alembic: the id from a legacy file's name
            legacy = legacy_id.match(path.name)
            if legacy is None:
                raise util.CommandError(
                    f"Could not determine revision id from filename {path.name}."
                )
            rev_id = legacy.group(1)
        checksums[str(path)] = bytes_checksum(data)
        return Script(module, rev_id, path)

    def load() -> Any:
        """Alembic's ``ScriptDirectory._load_revisions``, with each module from its bytes."""
        seen = set()
        for vers in script._version_locations:
            if not Path(vers).exists():
                continue
            for listed in Script._list_py_dir(script, vers):
                path = Path(vers, listed).resolve()
                if path in seen:
                    util.warn(f"File {path} loaded twice! ignoring.")
                    continue
                seen.add(path)
                if revision_file.match(path.name):
                    yield from_bytes(path)

    if not script.sourceless:
        script.revision_map = RevisionMap(load)
    return checksums


def bytes_checksum(data: bytes) -> str:
    """The checksum of a revision file's bytes, as recorded beside the stamp (SHA-256, hex)."""
    return hashlib.sha256(data).hexdigest()


def file_checksum(path: str | Path) -> str:
    """SHA-256 of a revision file's bytes (recorded beside the stamp, as Flyway does)."""
    return bytes_checksum(Path(path).read_bytes())


class Schema:
    """A schema directory and its revision graph."""

    def __init__(self, directory: str | os.PathLike[str]) -> None:
        try:
            from alembic.config import Config
            from alembic.script import ScriptDirectory
        except ImportError as exc:
            raise SchemaError(
                "schema upgrades need Alembic", hint="pip install 'statemigrate[upgrade]'"
            ) from exc
        self.dir = Path(directory)
        if not (self.dir / "versions").is_dir():
            raise SchemaError(f"{self.dir}: not a schema directory (no versions/ folder)")
        ini = self.dir / "alembic.ini"
        with self._errors():
            if ini.is_file():
                cfg = Config(str(ini))
                if not cfg.get_main_option("script_location"):
                    cfg.set_main_option("script_location", str(self.dir))
                self.script = ScriptDirectory.from_config(cfg)
            else:
                self.script = ScriptDirectory(str(self.dir))
            self._checksums = _run_from_their_bytes(self.script)
            _ = self.script.revision_map.heads  # load now: a broken file fails here, clearly

    def _errors(self) -> Any:
        from alembic.util import CommandError

        @contextlib.contextmanager
        def wrap() -> Any:
            try:
                yield
            except SchemaError:
                raise
            except CommandError as exc:
                raise SchemaError(f"{self.dir}: {exc}") from exc
            except Exception as exc:  # RevisionError, ResolutionError, a broken revision file
                name = type(exc).__name__
                raise SchemaError(f"{self.dir}: {name}: {exc}") from exc

        return wrap()

    @property
    def heads(self) -> list[str]:
        """The schema's head revisions."""
        return sorted(self.script.get_heads())

    def knows(self, revision: str) -> bool:
        """Whether ``revision`` is in this schema's graph."""
        from alembic.script.revision import RevisionError

        try:
            return self.script.revision_map.get_revision(revision) is not None
        except RevisionError:
            return False

    def resolve(self, target: str) -> list[str]:
        """Revision ids that ``target`` names (``head``, ``heads``, ``base``, an id or prefix)."""
        if target == "base":
            return []
        with self._errors():
            return sorted(r.revision for r in self.script.get_revisions(target) if r is not None)

    def path_of(self, revision: str) -> str:
        """The file of a revision."""
        return str(self.script.get_revision(revision).path)

    def checksum(self, revision: str) -> str:
        """The checksum of a revision's file: of the bytes its module was run from."""
        path = self.path_of(revision)
        return self._checksums.get(path) or file_checksum(path)

    def steps(self, current: list[str], target: str, upgrade: bool) -> list[Step]:
        """The revisions to run from the stamped ``current`` heads to ``target``, in order."""
        heads = _heads_only()(current)
        cur = tuple(current)
        out = []
        with self._errors():
            if upgrade:
                raw = self.script._upgrade_revs(target, cur)  # type: ignore[arg-type]  # heads tuple, as Alembic's runtime passes
            else:
                raw = self.script._downgrade_revs(target, cur)  # type: ignore[arg-type]
            for step in raw:
                heads.update_to_step(step)
                module = step.revision.module
                fn = module.upgrade if step.is_upgrade else module.downgrade
                out.append(
                    Step(
                        step.revision.revision,
                        step.is_upgrade,
                        step.revision.doc or "",
                        fn,
                        str(step.revision.path),
                        sorted(heads.heads),
                    )
                )
        return out

    def stamp_heads(self, current: list[str], target: str) -> list[str]:
        """The heads after stamping ``target`` over ``current`` (Alembic's stamp rules)."""
        heads = _heads_only()(current)
        with self._errors():
            for step in self.script._stamp_revs(target, tuple(current)):
                heads.update_to_step(step)
        return sorted(heads.heads)

    def ancestry(self, heads: list[str]) -> list[str]:
        """The revisions at or below ``heads``."""
        if not heads:
            return []
        with self._errors():
            return sorted(
                {
                    r.revision
                    for r in self.script.revision_map.iterate_revisions(tuple(heads), "base")
                }
            )

    def history(self) -> list[dict[str, Any]]:
        """Every revision, newest first: id, down revisions, message, head/merge/branch point."""
        rows = []
        with self._errors():
            for rev in self.script.walk_revisions():
                down = rev.down_revision
                rows.append(
                    {
                        "revision": rev.revision,
                        "down_revision": list(down)
                        if isinstance(down, tuple)
                        else ([down] if down else []),
                        "message": rev.doc or "",
                        "is_head": rev.is_head,
                        "is_merge": rev.is_merge_point,
                        "is_branch_point": rev.is_branch_point,
                        "path": str(rev.path),
                    }
                )
        return rows

    def new_revision(self, message: str, head: str = "head", rev_id: str | None = None) -> str:
        """Write a new revision file from ``script.py.mako``; returns its path."""
        from alembic import util

        # Alembic reports "Generating … done" on stdout; the library prints nothing.
        with self._errors(), contextlib.redirect_stdout(io.StringIO()):
            script = self.script.generate_revision(rev_id or util.rev_id(), message, head=head)
        if script is None:
            raise SchemaError(f"{self.dir}: no revision was written")
        return str(script.path)
