"""Where the kill -9 tests stop a convert: crash points, fractions of a run, engine pairs.

A kill point names a pair of engines and either a fraction of an uninterrupted run
(the test sends SIGKILL then) or a named step at which the pipeline kills itself
(``fsutil.crash_point``, through the environment of :func:`environment_for`).
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from dataclasses import dataclass

from ..engines.base import Engine
from ..fsutil import CRASH_ENV, NO_EXCHANGE_ENV
from ..registry import engine_names, get_engine

# Steps where the pipeline can be made to SIGKILL itself (fsutil.crash_point).
CRASH_POINTS = (
    "locked",
    "created",
    "batch",
    "copied",
    "finished",
    "verifying",
    "verified",
    "synced",
    "place:new",
    "placed",
)
# Steps of replacing an existing destination (--overwrite).
OVERWRITE_CRASH_POINTS = ("place:swap", "place:exchanged", "place:aside", "place:renamed", "placed")

# The long run (`make test-long`, STATEMIGRATE_LONG=1): bigger stores, more kill points.
LONG = os.environ.get("STATEMIGRATE_LONG") == "1"

# Engines that take minutes to write 200,000 records (helixdb: ~100 s on the CI machine):
# tests that only need "long enough to interrupt" give them fewer records in CI.
SLOW_ENGINES = {"helixdb"}


@dataclass(frozen=True)
class KillPoint:
    """Where one kill lands: a pair of engines and a fraction of an uninterrupted run,
    or a named crash point."""

    source: str
    destination: str
    fraction: float | None = None
    crash_at: str | None = None
    overwrite: bool = False

    @property
    def id(self) -> str:
        where = f"{self.fraction:.3f}" if self.fraction is not None else self.crash_at
        return f"{self.source}-{self.destination}-{'overwrite-' if self.overwrite else ''}{where}"


def copies_natively(source: str, destination: str) -> bool:
    """Whether a plain convert of this pair takes the engine's own copy, not the batch loop.

    A same-engine convert without ``--tables`` or options, of an engine that has one
    (:meth:`Engine.native_copy`): it has no ``created`` or ``batch`` step and keeps no
    checkpoint (pipeline/native.py).
    """
    engine = get_engine(destination)
    return source == destination and engine.native_copy.__func__ is not Engine.native_copy.__func__  # type: ignore[attr-defined]


def engine_pairs(
    sources: Sequence[str], destinations: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """Every (source, destination) pair: each destination engine with each source engine."""
    dests = list(destinations if destinations is not None else engine_names())
    return [(s, d) for d in dests for s in sources]


def spread_points(
    pairs: Sequence[tuple[str, str]],
    count: int,
    *,
    every_pair: bool = False,
    overwrite: bool = False,
    end: float = 1.02,
) -> list[KillPoint]:
    """``count`` kill points at fractions spread evenly over (0, ``end``) of a run.

    Pairs take turns so that each pair is killed at fractions across the whole run; with
    ``every_pair`` every pair is killed at every fraction (the long run).
    """
    out = []
    for i in range(count):
        fraction = end * (i + 0.5) / count
        chosen = pairs if every_pair else [pairs[i % len(pairs)]]
        out += [KillPoint(s, d, fraction=fraction, overwrite=overwrite) for s, d in chosen]
    return out


def crash_points(
    pairs: Sequence[tuple[str, str]],
    names: Sequence[str],
    *,
    every_pair: bool = False,
    overwrite: bool = False,
) -> list[KillPoint]:
    """One kill per named crash point, pairs taking turns (or every pair)."""
    out = []
    for i, name in enumerate(names):
        chosen = pairs if every_pair else [pairs[(i * 7 + 3) % len(pairs)]]
        out += [KillPoint(s, d, crash_at=name, overwrite=overwrite) for s, d in chosen]
    return out


def environment_for(point: KillPoint) -> dict[str, str]:
    """The environment of a kill run: the crash point, if any.

    The steps of the rename-aside fallback of ``place()`` are reached only where the
    file system cannot swap two paths in one step; those runs turn the swap off.
    """
    env = {CRASH_ENV: point.crash_at} if point.crash_at else {}
    if point.crash_at in ("place:aside", "place:renamed"):
        env[NO_EXCHANGE_ENV] = "1"
    return env
