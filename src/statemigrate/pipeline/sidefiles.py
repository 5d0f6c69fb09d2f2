"""Side files beside a destination (``-wal``, ``-shm``, ``-journal``): what they hold.

An engine declares its side files (``Engine.sidecar_suffixes``) and says what one
holds (``Engine.side_file_state``: the SQLite family reads its formats): a write-ahead
log with frames holds committed pages its store has not taken in yet; a "hot" rollback
journal, a write cut short. Either is applied to whatever file the driver next finds
at the store's path.
"""

from __future__ import annotations

from pathlib import Path

from ..engines.base import Engine
from ..errors import DestinationError
from ..fsutil import kind_of, lexists, remove_path


def refuse_stale_side_files(engine: type[Engine], final: Path) -> None:
    """Refuse (exit 5) side files beside ``final`` that SQLite would apply to a new file.

    Checked after the holders: these belong to no running process, they are what an
    app that crashed left. They hold the old store's committed data (a ``-wal``) or
    the way back from a write cut short (a hot ``-journal``); SQLite applies either
    to whatever file it finds at ``final``. Neither is removed nor applied here: the
    app (or ``sqlite3``) finishes them on its next open, then the convert can run.
    """
    for side in (Path(str(final) + s) for s in engine.sidecar_suffixes):
        if not lexists(side):
            continue
        what = kind_of(side, follow=False)
        if what != "a regular file":
            raise DestinationError(
                f"{side}: {what} where the destination's side file would be; "
                "statemigrate does not touch it",
                hint="move it away, then run the same command",
            )
        state = engine.side_file_state(side)
        if state is None:
            continue
        if not lexists(final):
            raise DestinationError(
                f"{side}: left beside a missing {final} by an app that did not close it "
                "cleanly; it would be applied to the new store",
                hint="move it away (it holds data of the store that was there), then retry",
            )
        if state == "committed":
            raise DestinationError(
                f"{side}: the app that wrote {final} did not close it cleanly (its "
                "write-ahead log holds committed data)",
                hint=f"open {final} with the app (or sqlite3) once so it checkpoints, then retry",
            )
        raise DestinationError(
            f"{side}: the app that wrote {final} stopped in the middle of a write (a hot "
            "rollback journal)",
            hint=f"open {final} with the app (or sqlite3) once so it rolls back, then retry",
        )


def clear_side_files(engine: type[Engine], final: Path) -> None:
    """Remove the side files of the store being replaced once they hold nothing.

    Run right before placing, after :func:`refuse_stale_side_files`: what is left (a
    ``-shm`` index, an empty ``-wal``, a finished journal) belongs to the old store and
    must not meet the new one.
    """
    for side in (Path(str(final) + s) for s in engine.sidecar_suffixes):
        if lexists(side):
            side.unlink()


def check_built_side_files(engine: type[Engine], partial: Path) -> None:
    """The built store is one file at placement: its own side files must hold nothing,
    and those that hold nothing are removed now.

    Only the main file is renamed into place; a writer that left committed pages in
    its ``-wal`` would lose them there. An empty one (Turso leaves its ``-wal`` so) is
    removed before the rename, so that a kill right after the rename leaves no
    ``DST.partial-wal`` beside the new store (only the lock and the done mark).
    """
    for side in (Path(str(partial) + s) for s in engine.sidecar_suffixes):
        if not lexists(side):
            continue
        if engine.side_file_state(side) is not None:
            raise DestinationError(
                f"{side}: the built store was not checkpointed into {partial}",
                hint="the destination was not put in place",
            )
        remove_path(side)
