"""The destination: its engine and path, what a convert may replace, the lock, placing.

A convert builds ``DST.partial`` beside ``DST`` under an exclusive lock on
``DST.lock`` and renames it into place once verified. Everything that can be refused
about the destination (the source itself, a store of another engine, a store an app
holds, side files an app left) is refused here before anything is created, and again
under the lock, where the answer holds.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path

from ..engines.base import Engine
from ..errors import DestinationError, StoreBusyError, UsageError
from ..fsutil import crash_point, is_within, kind_of, lexists, place, remove_path, store_size
from ..locks import busy_message
from .sidefiles import clear_side_files, refuse_stale_side_files

# Windows answers a file another process opened without sharing it with PermissionError.
_WINDOWS = os.name == "nt"


def partial_path(final: Path) -> Path:
    """Where a destination is built before it is renamed into place."""
    from ..engines._side_metadata import PARTIAL_SUFFIX  # lazy: the CLI loads no engine module

    return final.with_name(final.name + PARTIAL_SUFFIX)


def done_mark(partial: Path) -> Path:
    """Beside a ``.partial`` whose every batch is written and synced (writer.finish())."""
    return partial.with_name(partial.name + ".done")


def owned_paths(engine: type[Engine], final: Path) -> list[Path]:
    """Every path a convert to ``final`` may create, replace or remove.

    The store and its side files, the ``.partial`` and its side files, the lock, the
    finished mark and the names a replacement uses for a moment.
    """
    partial = partial_path(final)
    names = [final, partial, done_mark(partial)]
    names += [final.with_name(final.name + s) for s in (".lock", ".swap", ".replaced")]
    for store in (final, partial):
        names += [Path(str(store) + s) for s in engine.sidecar_suffixes]
    from ..engines._side_metadata import metadata_side_file  # lazy, as partial_path

    names.append(metadata_side_file(partial))
    return names


def refuse_in_place(
    src_engine: type[Engine], src_path: Path, dst_engine: type[Engine], final: Path
) -> None:
    """Refuse (exit 2) a destination that is the source, lies inside it, or holds it.

    Paths are compared as the kernel resolves them (symbolic links and ``..`` in every
    component, hard links and bind mounts by inode), and every path the convert
    writes (``DST.partial``, ``DST.lock`` …) is compared with the source and its side
    files. Runs before anything is created.

    Raises:
        UsageError: naming how the two meet.
    """
    sources = [src_path] + [Path(str(src_path) + s) for s in src_engine.sidecar_suffixes]
    for mine in owned_paths(dst_engine, final):
        for theirs in sources:
            if is_within(mine, theirs) and is_within(theirs, mine):
                if theirs != src_path:
                    raise UsageError(
                        f"{mine}: is the side file {theirs.name} of the source; convert "
                        "never writes over the source"
                    )
                raise UsageError("the destination is the source; convert never works in place")
            if is_within(mine, theirs):
                raise UsageError(
                    f"{final}: lies inside the source {src_path}; convert never writes into "
                    "the source"
                )
            if is_within(theirs, mine):
                raise UsageError(
                    f"{final}: holds the source {src_path}; convert never replaces the source"
                )


def check_space(engine: type[Engine], source: Path, dest_dir: Path, force: bool) -> None:
    """Refuse (exit 5) when the destination will not fit, unless forced."""
    need = int(store_size(source) * engine.space_factor)
    free = shutil.disk_usage(dest_dir).free
    if need > free and not force:
        raise DestinationError(
            f"{dest_dir}: not enough free space: the {engine.name} destination needs about "
            f"{need:,} bytes, {free:,} are free",
            hint="free some space, or pass --force to try anyway",
        )


def check_destination(engine: type[Engine], final: Path, *, overwrite: bool, resume: bool) -> bool:
    """Refuse what must never be replaced or written beside; say whether ``final`` exists.

    An existing ``final`` is replaced only with ``--overwrite`` and only when it is a
    store of the destination's engine (a symbolic link counts by what it leads to; the
    link is what gets replaced). A store that a process holds (any lock, shared ones
    included) is refused, and so are side files left by an app that did not close the
    old store cleanly (a SQLite ``-wal`` with frames, a hot ``-journal``): opened beside
    the new file, they would be applied to it. Changes nothing.

    Args:
        engine: the destination's engine.
        final: the destination path.
        overwrite: ``--overwrite`` was given.
        resume: ``--resume`` was given (``final`` may be the finished store).

    Returns:
        Whether something is at ``final`` (then a store of ``engine``).

    Raises:
        DestinationError: exists without --overwrite, not a store of the engine, an odd
            ``.partial`` or side file (exit 5).
        StoreBusyError: another process holds the store or a side file (exit 3).
    """
    partial = partial_path(final)
    _check_partial(engine, partial)
    existing = lexists(final)
    if existing:
        may_be_done = resume and not lexists(partial)
        if not overwrite and not may_be_done:
            raise DestinationError(
                f"{final}: already exists", hint="pass --overwrite to replace it"
            )
        if not _is_store_of(engine, final):
            if not overwrite:
                raise DestinationError(
                    f"{final}: already exists", hint="pass --overwrite to replace it"
                )
            raise DestinationError(
                f"{final}: not a {engine.name} store ({_what_is(final)}); --overwrite "
                "replaces only a store of the destination's engine"
            )
    refuse_if_held(engine, final)
    refuse_stale_side_files(engine, final)
    return existing


def _is_store_of(engine: type[Engine], path: Path) -> bool:
    try:
        return path.exists() and engine.detect(path)
    except (OSError, ValueError):
        return False


def _what_is(path: Path) -> str:
    """What is at ``path``, a symbolic link named by what it leads to."""
    try:
        what = kind_of(path)
    except OSError:
        return "a symbolic link to nothing"
    if os.path.islink(path):
        return f"a symbolic link to {what}"
    return what


def _check_partial(engine: type[Engine], partial: Path) -> None:
    """A ``.partial`` must be what a convert creates: a file or directory, never a link.

    Anything else there (a link, which ``--resume`` would write through; a FIFO, which
    would block; a directory where the engine makes a file) is not statemigrate's.
    """
    want = "a directory" if engine.store_directory(partial) else "a regular file"
    sides = [Path(str(partial) + s) for s in engine.sidecar_suffixes] + [done_mark(partial)]
    for p in [partial, *sides]:
        if not lexists(p):
            continue
        what = kind_of(p, follow=False)
        if what != (want if p == partial else "a regular file"):
            raise DestinationError(
                f"{p}: {what}, not something an interrupted conversion to {engine.name} "
                "leaves; statemigrate does not touch it",
                hint="move it away, then run the same command",
            )


def refuse_if_held(engine: type[Engine], final: Path) -> None:
    """Replacing a store that an app holds open would lose what it writes next: exit 3.

    Asked of the engine (:meth:`Engine.held_by`) whether ``final`` exists or not: an app
    may still hold the ``-wal``/``-shm`` of a store deleted under it.
    """
    holder = engine.held_by(final)
    if holder is not None:
        raise StoreBusyError(
            busy_message(final, holder), hint="stop the app, then run the same command"
        )


def remove_store(engine: type[Engine], path: Path) -> None:
    """Remove a store the convert made (``.partial``), its side files and its finished mark."""
    for p in engine.store_paths(path):
        remove_path(p)
    remove_path(done_mark(path))


def put_in_place(engine: type[Engine], partial: Path, final: Path) -> None:
    """Rename the built, synced ``partial`` to ``final``, then remove what it leaves.

    Checked again right before: no app holds the store being replaced, and no side
    file of it would be applied to the new one.

    Raises:
        StoreBusyError: an app holds the store being replaced (exit 3); on Windows also
            when it refuses the replacement, the built store kept for ``--resume``.
        DestinationError: a side file would be applied to the new store (exit 5).
    """
    refuse_if_held(engine, final)
    refuse_stale_side_files(engine, final)
    try:
        clear_side_files(engine, final)
        place(partial, final)
    except PermissionError as exc:
        if not _WINDOWS:
            raise
        # An app that opened the old store without sharing it (what Windows shows in
        # place of the locks probed above): busy. The built store waits for --resume.
        swap = final.with_name(final.name + ".swap")
        if lexists(swap) and not lexists(partial):
            os.rename(swap, partial)
        raise StoreBusyError(
            busy_message(final, -1),
            hint="stop the app that has it open, then run the same command with --resume",
        ) from exc
    crash_point("placed")
    for sidecar in engine.store_paths(partial):
        remove_path(sidecar)
    remove_path(done_mark(partial))
