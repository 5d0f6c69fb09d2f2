"""Reading the built store back: it must hold exactly what was copied."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..digest import Digest
from ..engines.base import Engine
from ..errors import DestinationError, SourceError
from ..fsutil import crash_point
from ..model import TableInfo, facts_differ
from ..progress import Progress
from ..stores.walk import digest_store

if TYPE_CHECKING:
    from .job import Job

NOT_IN_PLACE = "the destination was not put in place"


@dataclass(frozen=True)
class Built:
    """A built store to read back: where it is, its engine, the writer's ``options`` that
    apply to reading (a layout file), and the run's progress, stop poll and hint."""

    engine: type[Engine]
    path: Path
    progress: Progress
    should_stop: Callable[[], bool] | None
    hint: str | None
    options: dict[str, Any] | None = None

    @classmethod
    def of(cls, job: Job, path: Path | None = None, *, quiet: bool = False) -> Built:
        """The job's ``.partial`` (or ``path``), with the job's progress and resume hint
        (``quiet``: no progress, no hint)."""
        return cls(
            job.dst_engine,
            job.partial if path is None else path,
            Progress() if quiet else job.progress,
            job.should_stop,
            None if quiet else job.resume_hint,
            job.dst_engine.options.for_reading_back(job.dst_options),
        )


def check_built(
    built: Built,
    chosen: list[TableInfo],
    expected: Mapping[str, Digest] | Callable[[], Mapping[str, Digest]],
) -> None:
    """The built store holds exactly the chosen tables, with their kinds and digests.

    ``expected`` may be a callable, called once the built store has been read (a
    source still being digested on another thread meanwhile).

    Raises:
        DestinationError: it does not, or it does not read back (exit 5).
    """
    got = read_back(built, chosen)
    if callable(expected):
        expected = expected()
    for t in chosen:
        if got[t.name] != expected[t.name]:
            raise DestinationError(
                f"{built.path}: verification failed for table {t.name!r}: "
                f"{got[t.name].count} records read back, {expected[t.name].count} written",
                hint=NOT_IN_PLACE,
            )


def read_back(
    built: Built, chosen: list[TableInfo], sizes: dict[str, int] | None = None
) -> dict[str, Digest]:
    """:func:`read_built`, a built store that does not read back being the destination's
    failure (exit 5), not the source's."""
    try:
        return read_built(built, chosen, sizes)
    except SourceError as exc:
        raise DestinationError(f"verification failed: {exc.message}", hint=NOT_IN_PLACE) from exc


def read_partial(job: Job, chosen: list[TableInfo]) -> dict[str, Digest]:
    """The job's ``.partial`` read back (:func:`read_back`): its digests, each table's
    payload bytes into ``job.sizes``. The verification of a copy made of the source's own
    bytes (:attr:`~statemigrate.engines.base.NativeCopy.own_bytes`): the one walk."""
    return read_back(Built.of(job), chosen, job.sizes)


def check_partial(
    job: Job,
    chosen: list[TableInfo],
    expected: Mapping[str, Digest] | Callable[[], Mapping[str, Digest]],
) -> None:
    """:func:`check_built` on the job's ``.partial``, with its progress, stop poll and hint."""
    check_built(Built.of(job), chosen, expected)


def read_built(
    built: Built, chosen: list[TableInfo], sizes: dict[str, int] | None = None
) -> dict[str, Digest]:
    """The built store's digests, once its tables and their kinds are the chosen ones
    (each table's payload bytes into ``sizes`` when given)."""
    partial = built.path
    with built.engine.open_reader(partial, built.options) as reader:
        found = {t.name: t for t in reader.tables()}
        want = {t.name: t for t in chosen}
        if set(found) != set(want):
            raise DestinationError(
                f"{partial}: verification failed: tables differ ({sorted(set(found) ^ set(want))})",
                hint=NOT_IN_PLACE,
            )
        for name, t in want.items():
            if found[name].kind is not t.kind:
                raise DestinationError(
                    f"{partial}: verification failed: table {name!r} lost its kind"
                )
            lost = facts_differ(t, found[name])
            if lost is not None:  # a DUPSORT database read back as a plain one …
                raise DestinationError(
                    f"{partial}: verification failed: table {name!r}: {lost}"
                    " (A: the source, B: the copy)",
                    hint=NOT_IN_PLACE,
                )
        crash_point("verifying")
        return digest_store(
            reader, chosen, str(partial), built.progress, built.should_stop, built.hint, sizes=sizes
        )
