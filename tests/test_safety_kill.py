"""The kill -9 harness: a real ``statemigrate convert`` killed at many points of its life.

After every kill: the final path holds nothing, or a complete store equal to the
source (or, with ``--overwrite``, the complete old store); the source's files are
unchanged; ``--resume`` then finishes and the result equals the source exactly.

Kill points are fractions of an uninterrupted run of the same pair (measured once per
pair), spread over the whole life of the process (start-up, opening, batches,
verification, finalisation), plus named crash points (fsutil.crash_point) for steps
too short to hit with a timer: between sync and rename, between the renames of a swap.
A timed point whose run finishes before its timer is counted as not-a-kill (the run must
then have done its whole job), and at least 75% of the timed points must land.

CI: 200,000 records, 26 timed points and the crash points, pairs taking turns.
``STATEMIGRATE_LONG=1``: 1,000,000 records, 60 points, every pair at every point.
``STATEMIGRATE_KILL_DESTINATIONS=rocksdb,sqlite``: only these destination engines.
"""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.cli import describe, run_and_kill, run_cli
from statemigrate.testing.killpoints import (
    CRASH_POINTS,
    LONG,
    OVERWRITE_CRASH_POINTS,
    SLOW_ENGINES,
    KillPoint,
    copies_natively,
    crash_points,
    engine_pairs,
    environment_for,
    spread_points,
)
from statemigrate.testing.stores import (
    build_store,
    digest_of,
    files_sha256,
    leftovers,
    spec,
    store_exists,
    store_file,
)

RECORDS = 1_000_000 if LONG else 200_000
# Destinations that take minutes for 200,000 records (helixdb: ~100 s per convert on the
# CI machine) get a 20,000-record source in CI, so the file stays a few minutes long;
# the long run gives them the full size too.
SLOW_DESTINATIONS = SLOW_ENGINES
SLOW_RECORDS = 20_000
TIMED_POINTS = 60 if LONG else 26
OVERWRITE_POINTS = 24 if LONG else 8
SOURCES = ["sqlite", "rocksdb"]
# Timed point id -> whether its kill landed (the run died of SIGKILL) in this session.
TIMED_KILLS: dict[str, bool] = {}
# Share of the timed points that must land: they spread up to 1.02 of a measured run,
# so the last few may see the run finish first.
LANDED_SHARE = 0.75
BATCH = ["--batch-records", "2000"]

# STATEMIGRATE_KILL_DESTINATIONS=a,b narrows the run to some engines (while working on them).
DESTINATIONS = [
    e for e in os.environ.get("STATEMIGRATE_KILL_DESTINATIONS", "").split(",") if e
] or engine_names()
PAIRS = engine_pairs(SOURCES, DESTINATIONS)
POINTS: list[KillPoint] = (
    spread_points(PAIRS, TIMED_POINTS, every_pair=LONG)
    + crash_points(PAIRS, CRASH_POINTS, every_pair=LONG)
    + spread_points(PAIRS, OVERWRITE_POINTS, every_pair=LONG, overwrite=True)
    + crash_points(PAIRS, OVERWRITE_CRASH_POINTS, every_pair=LONG, overwrite=True)
)


@pytest.fixture(scope="module")
def sources(tmp_path_factory):
    """One store of RECORDS records per source engine: path, digest, sha256 of its files."""
    base = tmp_path_factory.mktemp("kill-sources")
    out = {}
    for name in SOURCES:
        for size in {RECORDS, SLOW_RECORDS}:
            path = store_file(name, base, f"source-{size}")
            digest = build_store(name, path, size, seed=7)
            out[name, size] = (path, digest, files_sha256(name, path))
    return out


def records_for(destination: str) -> int:
    """How many records a kill run towards ``destination`` moves."""
    return SLOW_RECORDS if destination in SLOW_DESTINATIONS and not LONG else RECORDS


@pytest.fixture(scope="module")
def durations(sources, tmp_path_factory):
    """Seconds of one uninterrupted run per pair, measured on first use."""
    measured: dict[tuple[str, str], float] = {}
    base = tmp_path_factory.mktemp("kill-timing")

    def get(src: str, dst: str) -> float:
        if (src, dst) not in measured:
            final = store_file(dst, base, f"{src}-to-{dst}")
            started = time.monotonic()
            source = sources[src, records_for(dst)][0]
            run = run_cli(
                ["convert", "--quiet", *BATCH, spec(src, source), spec(dst, final)], timeout=600
            )
            measured[src, dst] = time.monotonic() - started
            assert run.returncode == 0, describe(run)
        return measured[src, dst]

    return get


def old_store(engine: str, final: Path) -> str:
    """An existing destination for --overwrite runs: different content, same engine."""
    return build_store(engine, final, 3_000, seed=99)


# The timed points and the check of their share run on one xdist worker, in this order
# (``--dist loadgroup``, Makefile): TIMED_KILLS is per process.
TIMED_GROUP = pytest.mark.xdist_group("timed-kills")


@pytest.mark.parametrize(
    "point",
    [
        pytest.param(p, id=p.id, marks=[TIMED_GROUP] if p.fraction is not None else [])
        for p in POINTS
    ],
)
def test_kill_then_resume(point: KillPoint, sources, durations, tmp_path: Path) -> None:
    dst = point.destination
    src_path, src_digest, src_sha = sources[point.source, records_for(dst)]
    final = store_file(dst, tmp_path, "dst with space")  # non-ASCII: test_safety_hostile
    args = ["convert", "--quiet", *BATCH, spec(point.source, src_path), spec(dst, final)]
    old_digest = None
    if point.overwrite:
        old_digest = old_store(dst, final)
        args.append("--overwrite")

    if point.fraction is not None:
        killed = run_and_kill(args, point.fraction * durations(point.source, dst))
        # A run that finished before its timer is not a kill: counted as such here, and
        # test_enough_timed_kills_landed requires that most timed points did land.
        TIMED_KILLS[point.id] = killed.killed_by(signal.SIGKILL)
    else:
        killed = run_and_kill(args, 120, env=environment_for(point))
        # Every named step must be reached, else the point tests nothing; without a swap
        # a file replaces a file in one rename, and only directories stand aside.
        aside_step = point.crash_at in ("place:aside", "place:renamed")
        reached = not aside_step or get_engine(dst).capabilities.directory
        # A same-engine convert the engine copies natively (pipeline/native.py) has no
        # batch loop: its own kill points are in tests/test_native_copy.py.
        if point.crash_at in ("created", "batch") and copies_natively(point.source, dst):
            reached = False
        assert killed.killed_by(signal.SIGKILL) == reached, describe(killed)
    assert killed.killed_by(signal.SIGKILL) or killed.returncode == 0, describe(killed)
    if not killed.killed_by(signal.SIGKILL):  # not a kill: the whole job must be done
        assert digest_of(dst, final) == src_digest and leftovers(final) == [], describe(killed)

    # The final path: nothing, or complete and verified (new), or the old one intact.
    if store_exists(dst, final):
        got = digest_of(dst, final)
        allowed = {src_digest} | ({old_digest} if old_digest else set())
        assert got in allowed, f"{final} holds a store that is neither the old nor the new one"
    elif point.overwrite:
        # Only a directory store being replaced without a swap stands aside, intact, and
        # the next run puts it back (fsutil.recover_placement).
        aside = final.with_name(final.name + ".replaced")
        assert point.crash_at == "place:aside" and aside.exists(), "the old destination disappeared"
        assert digest_of(dst, aside) == old_digest
    assert files_sha256(point.source, src_path) == src_sha, "the source was modified"

    # --resume finishes (or, when the store is already in place, there is nothing to do:
    # a kill just after the rename may leave the lock file and the done mark, both empty
    # and removed by the next convert of this destination).
    if point.overwrite or not store_exists(dst, final):
        resumed = run_cli(args + ["--resume"], timeout=600)
        assert resumed.returncode == 0, describe(resumed)
        assert leftovers(final) == [], leftovers(final)
    else:
        harmless = {final.name + ".lock", final.name + ".partial.done"}
        assert set(leftovers(final)) <= harmless, leftovers(final)
    assert digest_of(dst, final) == src_digest
    assert files_sha256(point.source, src_path) == src_sha, "the source was modified"


@TIMED_GROUP
def test_enough_timed_kills_landed(request: pytest.FixtureRequest) -> None:
    """Most timed points must kill the run, not watch it finish (only the ones near the
    end of a run may finish first). Runs after the points of this session, in the same
    process: every timed point selected must have run here, else the share below would be
    of some of them only (a pytest that ignores ``xdist_group`` spreads the group)."""
    assert TIMED_KILLS, "no timed kill point ran in this session: select them with this check"
    selected = {
        item.callspec.id
        for item in request.session.items
        if item.originalname == "test_kill_then_resume"
        and item.get_closest_marker("xdist_group") is not None
    }
    assert set(TIMED_KILLS) == selected, (
        f"{len(selected - set(TIMED_KILLS))} timed points ran in another process: the "
        "xdist_group of the timed kills was not kept together (pytest-xdist --dist loadgroup)"
    )
    landed = sum(TIMED_KILLS.values())
    missed = sorted(p for p, hit in TIMED_KILLS.items() if not hit)
    assert landed >= LANDED_SHARE * len(TIMED_KILLS), f"only {landed} kills landed; missed {missed}"


def test_points_cover_every_destination_and_enough_of_the_run() -> None:
    timed = [p for p in POINTS if p.fraction is not None and not p.overwrite]
    assert len(timed) >= 25
    assert {p.destination for p in POINTS} == set(DESTINATIONS)
    assert len({p.source for p in POINTS}) >= 2
    assert min(p.fraction for p in timed) < 0.05 and max(p.fraction for p in timed) > 0.95
