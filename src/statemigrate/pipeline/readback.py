"""Reading the built store back: it must hold exactly what was copied."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..digest import Digest
from ..engines.base import Engine
from ..errors import DestinationError, SourceError
from ..fsutil import crash_point
from ..model import TableInfo
from ..progress import Progress
from ..stores.walk import digest_store

if TYPE_CHECKING:
    from .job import Job


def check_built(
    dst_engine: type[Engine],
    partial: Path,
    chosen: list[TableInfo],
    expected: Mapping[str, Digest] | Callable[[], Mapping[str, Digest]],
    progress: Progress,
    should_stop: Callable[[], bool] | None,
    hint: str | None,
    options: dict[str, Any] | None = None,
) -> None:
    """The built store holds exactly the chosen tables, with their kinds and digests,
    read with the writer's ``options`` that apply to reading (a layout file).

    ``expected`` may be a callable, called once the built store has been read (a
    source still being digested on another thread meanwhile).

    Raises:
        DestinationError: it does not, or it does not read back (exit 5).
    """
    got = read_back(dst_engine, partial, chosen, progress, should_stop, hint, options)
    if callable(expected):
        expected = expected()
    for t in chosen:
        if got[t.name] != expected[t.name]:
            raise DestinationError(
                f"{partial}: verification failed for table {t.name!r}: "
                f"{got[t.name].count} records read back, {expected[t.name].count} written",
                hint="the destination was not put in place",
            )


def read_back(
    dst_engine: type[Engine],
    partial: Path,
    chosen: list[TableInfo],
    progress: Progress,
    should_stop: Callable[[], bool] | None,
    hint: str | None,
    options: dict[str, Any] | None = None,
    sizes: dict[str, int] | None = None,
) -> dict[str, Digest]:
    """:func:`read_built`, a built store that does not read back being the destination's
    failure (exit 5), not the source's."""
    try:
        return read_built(dst_engine, partial, chosen, progress, should_stop, hint, options, sizes)
    except SourceError as exc:
        raise DestinationError(
            f"verification failed: {exc.message}", hint="the destination was not put in place"
        ) from exc


def read_partial(job: Job, chosen: list[TableInfo]) -> dict[str, Digest]:
    """The job's ``.partial`` read back (:func:`read_back`): its digests, each table's
    payload bytes into ``job.sizes``. The verification of a copy made of the source's own
    bytes (:attr:`~statemigrate.engines.base.NativeCopy.own_bytes`): the one walk."""
    return read_back(
        job.dst_engine,
        job.partial,
        chosen,
        job.progress,
        job.should_stop,
        job.resume_hint,
        job.dst_engine.options.for_reading_back(job.dst_options),
        job.sizes,
    )


def check_partial(
    job: Job,
    chosen: list[TableInfo],
    expected: Mapping[str, Digest] | Callable[[], Mapping[str, Digest]],
) -> None:
    """:func:`check_built` on the job's ``.partial``, with its progress, stop poll and hint."""
    check_built(
        job.dst_engine,
        job.partial,
        chosen,
        expected,
        job.progress,
        job.should_stop,
        job.resume_hint,
        job.dst_engine.options.for_reading_back(job.dst_options),
    )


def read_built(
    dst_engine: type[Engine],
    partial: Path,
    chosen: list[TableInfo],
    progress: Progress,
    should_stop: Callable[[], bool] | None,
    hint: str | None,
    options: dict[str, Any] | None = None,
    sizes: dict[str, int] | None = None,
) -> dict[str, Digest]:
    """The built store's digests, once its tables and their kinds are the chosen ones
    (each table's payload bytes into ``sizes`` when given)."""
    with dst_engine.open_reader(partial, options) as reader:
        built = {t.name: t for t in reader.tables()}
        want = {t.name: t for t in chosen}
        if set(built) != set(want):
            raise DestinationError(
                f"{partial}: verification failed: tables differ ({sorted(set(built) ^ set(want))})",
                hint="the destination was not put in place",
            )
        for name, t in want.items():
            if built[name].kind is not t.kind:
                raise DestinationError(
                    f"{partial}: verification failed: table {name!r} lost its kind"
                )
        crash_point("verifying")
        return digest_store(reader, chosen, str(partial), progress, should_stop, hint, sizes=sizes)
