"""The store an upgrade works on: found or made, locked, never under a running app.

Every writing verb opens the store through :func:`open_writer`: under its lock, with
nothing created wider than the store, refused (exit 3) while another process holds it,
and a full disk met by any engine's driver reported as exit 5.
"""

from __future__ import annotations

import contextlib
import errno
import json
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..digest import Digest
from ..engines.base import META_REVISION, Engine, Reader, Writer
from ..errors import DestinationError, StateMigrateError, StoreBusyError, UsageError
from ..model import TableInfo, TableKind
from ..perms import no_wider_than
from ..progress import Progress
from ..registry import StorePath, parse_store, resolve_source
from ..stores.lockfile import writer_lock
from ..stores.opening import resolve_destination
from ..stores.walk import store_digest_of
from .errors import StoreMissingError

MISSING_HINT = "check the path"
CREATE_HINT = "check the path; on a first install, `statemigrate upgrade --create` makes the store"


def is_missing(store: StorePath, engine: str | None) -> bool:
    """Whether nothing at all is at the store's path (not even a dangling link)."""
    _eng, path = parse_store(store, engine)
    return not (path.exists() or path.is_symlink())


def resolve_store(
    store: StorePath, engine: str | None, missing_hint: str = MISSING_HINT
) -> tuple[type[Engine], Path]:
    """The store's engine and path; a path where nothing is gets its own error (exit 4)."""
    if is_missing(store, engine):
        _eng, path = parse_store(store, engine)
        raise StoreMissingError(
            f"{path}: no store here (no such file or directory); nothing was created",
            hint=missing_hint,
        )
    return resolve_source(store, engine)


def in_place_engine(
    store: StorePath, engine: str | None, missing_hint: str = MISSING_HINT
) -> tuple[type[Engine], Path]:
    """The store's engine and path, for a verb that writes it.

    Refused if the engine cannot upgrade in place (exit 2), and before anything reads
    it if its writer would write through a link (exit 5, :meth:`Engine.refuse_linked_side_files`).
    """
    eng, path = resolve_store(store, engine, missing_hint)
    require_in_place(eng)
    eng.refuse_linked_side_files(path)
    return eng, path


def require_in_place(eng: type[Engine]) -> None:
    """Refuse (exit 2) an engine without schema upgrades in place."""
    if not eng.capabilities.in_place:
        raise UsageError(
            f"the {eng.name} engine does not support schema upgrades in place",
            hint="convert the store to an engine that does (statemigrate engines lists them), upgrade, convert back",
        )


def new_store_engine(store: str, engine: str | None) -> tuple[type[Engine], Path]:
    """The engine of a store ``--create`` will make: named, or from the path's suffix."""
    eng, path = resolve_destination(store, engine)
    require_in_place(eng)
    if not path.parent.is_dir():
        raise DestinationError(f"{path.parent}: no such directory; nothing was created")
    return eng, path


def create_store(eng: type[Engine], path: Path, options: Mapping[str, Any] | None = None) -> bool:
    """Make a new, empty store at ``path`` under its lock (a first install).

    Returns False when another run made it meanwhile. A failure removes what it began,
    so a rerun starts from nothing again.
    """
    import shutil

    with _refusing_full_disk(path), writer_lock(path):
        if path.exists() or path.is_symlink():
            return False
        try:
            writer = eng.open_for_writing(path, options, create=True)
            try:
                writer.finish()
            finally:
                writer.close()
        except BaseException:
            for p in eng.store_paths(path):
                shutil.rmtree(p, ignore_errors=True) if p.is_dir() else p.unlink(missing_ok=True)
            raise
    return True


FULL_DISK_ERRNOS = (errno.ENOSPC, errno.EDQUOT, errno.EFBIG, errno.EROFS, errno.EIO)
FULL_DISK_WORDS = ("no space left", "disk is full", "disk full", "quota exceeded", "read-only file")
FULL_DISK_HINT = (
    "free some space, then run the same command (the store is at the last revision "
    "that completed, with its data)"
)


def _is_full_disk(exc: BaseException) -> bool:
    text = str(exc).lower()
    if isinstance(exc, OSError) and exc.errno in FULL_DISK_ERRNOS:
        return True
    return any(w in text for w in FULL_DISK_WORDS)


def _refusal(exc: Exception, path: Path) -> DestinationError | None:
    """A full disk (or a file system that refuses writes) met by a driver, as exit 5; else None.

    Drivers report it in their own types (apsw's FullError, rocksdict's bare
    Exception "IO error: No space left on device", an OSError): one line, exit 5,
    the store at the last revision that completed.
    """
    if isinstance(exc, StateMigrateError) or not _is_full_disk(exc):
        return None
    text = str(exc).split("\n")[0] or type(exc).__name__
    return DestinationError(f"{path}: the store cannot be written: {text}", hint=FULL_DISK_HINT)


@contextlib.contextmanager
def _refusing_full_disk(path: Path) -> Iterator[None]:
    """Full-disk errors of any engine's writer leave as DestinationError (exit 5), with a hint."""
    try:
        yield
    except DestinationError as exc:
        if exc.hint is None and _is_full_disk(exc):
            exc.hint = FULL_DISK_HINT
        raise
    except Exception as exc:
        refusal = _refusal(exc, path)
        if refusal is None:
            raise
        raise refusal from exc


def _refuse_if_held(eng: type[Engine], path: Path) -> None:
    """Another process with the store open would go on through its old view of it: exit 3.

    Shared locks count (``readers=True``): an app idle on an LMDB environment or on a
    SQLite file in WAL mode holds only those, and its next write after the upgrade would
    go through its old view. Checked before our writer opens (a flock of our own would
    look like another holder).
    """
    from ..locks import busy_message

    pid = eng.held_by(path)
    if pid is not None:
        raise StoreBusyError(
            busy_message(path, pid), hint="stop the app, then run the same command"
        )


@contextlib.contextmanager
def open_writer(
    eng: type[Engine], path: Path, options: Mapping[str, Any] | None = None
) -> Iterator[Writer]:
    """The store's writer, under its lock, while no other process holds the store.

    Raises:
        StoreBusyError: another process has the store open (exit 3).
        DestinationError: the disk is full or refuses writes (exit 5).
    """
    # What the upgrade creates (lock, new files, spills, --backup) is no wider than the store.
    with _refusing_full_disk(path), no_wider_than(path), writer_lock(path):
        _refuse_if_held(eng, path)
        writer = eng.open_for_writing(path, options)
        try:
            yield writer
        except BaseException:
            with contextlib.suppress(Exception):  # the error in flight says what happened
                writer.close()
            raise
        writer.close()


def atomic(eng: type[Engine], writer: Writer) -> Any:
    """One transaction where the engine's DDL is transactional; else nothing (the journal)."""
    return writer.transaction() if eng.capabilities.transactional_ddl else contextlib.nullcontext()


def stamped_revisions(
    eng: type[Engine], path: Path, meta: dict[str, bytes], options: Mapping[str, Any] | None = None
) -> list[str]:
    """The store's stamped revisions: ours, or else those Alembic's own tools wrote."""
    raw = meta.get(META_REVISION)
    if raw is None and eng.capabilities.sql:
        # A store stamped by Alembic's own tools only: its reader reads alembic_version.
        with contextlib.suppress(StateMigrateError):
            try:
                reader = eng.open_reader(path, {**(options or {}), "skip_foreign_tables": True})
            except UsageError:
                reader = eng.open_reader(path, options)
            with reader:
                raw = reader.metadata().get(META_REVISION)
    return sorted(json.loads(raw)) if raw else []


def digest_writer(
    writer: Writer,
    progress: Progress | None = None,
    counts: dict[str, int] | None = None,
    digests: dict[str, tuple[TableKind, Digest]] | None = None,
) -> str:
    """The store digest, read through the writer (it sees what the writer sees).

    ``counts``: each table's record count, for progress: the totals given, the counts
    read put in it. ``digests`` receives each table's kind and digest."""
    return store_digest_of(
        writer.list_tables(), writer.read_batches, str(writer.path), progress, counts, digests
    )


def peek(
    eng: type[Engine], path: Path, options: Mapping[str, Any] | None = None
) -> tuple[dict[str, bytes], list[TableInfo], Reader]:
    """Open a read-only view: deciding what to do must change nothing (dry run, at head, too new)."""
    try:
        reader = eng.open_reader(path, {**(options or {}), "skip_foreign_tables": True})
    except UsageError:
        reader = eng.open_reader(path, options)
    return reader.metadata(), reader.list_tables(), reader
