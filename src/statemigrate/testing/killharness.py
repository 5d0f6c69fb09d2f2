"""The kill -9 harness for in-place upgrades (tests only).

A store of the example schema at 0001 is upgraded to head by the CLI in a child
process that SIGKILLs itself at the N-th crash point (``journal.crash_point``: after
every batch written, before and after each commit, around each switch step). After
each kill:

- ``finish_interrupted`` finishes or rolls back what the kill left (``current`` only
  reports it), then ``current`` names a revision R, and the store's digest equals the
  digest of an uninterrupted upgrade to R;
- no private table and no sort directory is left;
- re-running ``upgrade`` finishes, and the digest equals the uninterrupted head's.

Half the kill points fall on switch steps (commit, moves, drops, between revisions),
half are spread evenly over the rest (the batches); ``points=None`` kills at every one.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path

from .. import api
from ..registry import get_engine
from ..schema.journal import CRASH_AT_ENV, CRASH_LOG_ENV, TMP_PREFIX
from ..schema.sort import leftovers
from .example import EXAMPLE, digest, seed_module, table_names
from .stores import store_path

# Seconds an upgrade child may run before the harness fails as a hang (a hang guard far
# above any upgrade of the harness's stores, not a time bound).
HANG_GUARD = 1800

SWITCH_LABELS = ("before commit", "committed", "step ", "copied", "journal done", " done")


@dataclass
class HarnessResult:
    """What the harness found."""

    engine: str
    events: int
    crash_points: int = 0
    kills: list[dict] = field(default_factory=list)
    failures: list[str] = field(default_factory=list)
    seconds: float = 0.0

    @property
    def landed(self) -> int:
        """How many kills landed (the child died of SIGKILL at its crash point)."""
        return sum(1 for k in self.kills if k["landed"])


def _copy(engine_name: str, src: Path, dst: Path) -> None:
    eng = get_engine(engine_name)
    for p in eng.store_paths(src):
        target = dst.with_name(dst.name + p.name[len(src.name) :])
        if p.is_dir():
            shutil.copytree(p, target)
        else:
            shutil.copy2(p, target)


def _remove(engine_name: str, path: Path) -> None:
    for p in get_engine(engine_name).store_paths(path):
        shutil.rmtree(p) if p.is_dir() else p.unlink()
    lock = path.with_name(path.name + ".lock")
    lock.unlink(missing_ok=True)


def _upgrade_cmd(spec: str, schema: Path) -> list[str]:
    return [
        sys.executable,
        "-m",
        "statemigrate.cli",
        "upgrade",
        spec,
        "--schema",
        str(schema),
        "--no-digest",
        "--json",
    ]


def _run_upgrade(spec: str, schema: Path, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    """The upgrade CLI in a child, under the hang guard (a hang fails as AssertionError)."""
    try:
        return subprocess.run(
            _upgrade_cmd(spec, schema),
            env=env,
            capture_output=True,
            text=True,
            check=False,
            timeout=HANG_GUARD,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the upgrade of {spec} hung for {HANG_GUARD}s (hang guard)") from exc


def _evenly(items: list[int], k: int) -> list[int]:
    if k <= 0 or not items:
        return []
    if k >= len(items):
        return list(items)
    return [items[round(i * (len(items) - 1) / max(k - 1, 1))] for i in range(k)]


def choose_points(labels: list[str], count: int | None) -> list[int]:
    """``count`` kill points: half on switch steps (commit, moves, drops), half spread over the rest.

    ``count=None`` takes every crash point.
    """
    every = list(range(1, len(labels) + 1))
    if count is None or count >= len(every):
        return every
    switch = [i + 1 for i, label in enumerate(labels) if any(s in label for s in SWITCH_LABELS)]
    picked = set(_evenly(switch, min(len(switch), count // 2)))
    rest = [p for p in every if p not in picked]
    picked |= set(_evenly(rest, count - len(picked)))
    return sorted(picked)


def run_harness(
    engine_name: str, tmp: Path, *, events: int = 200_000, points: int | None = 25
) -> HarnessResult:
    """Kill an upgrade at ``points`` (or more) crash points and check every outcome.

    Args:
        engine_name: the engine.
        tmp: a scratch directory.
        events: records in the event log of the example store.
        points: how many kill points (None: every crash point of the run).
    """
    started = time.monotonic()
    eng = get_engine(engine_name)
    result = HarnessResult(engine_name, events)
    pristine = store_path(eng, tmp, "pristine")
    seed_module().seed(f"{eng.name}:{pristine}", events)

    # The uninterrupted upgrade, one revision at a time: the digest at each revision.
    ref = store_path(eng, tmp, "reference")
    _copy(eng.name, pristine, ref)
    ref_spec = f"{eng.name}:{ref}"
    expected = {"0001": digest(ref_spec)}
    while True:
        report = api.upgrade(ref_spec, EXAMPLE, to="+1", digests=False)
        expected[report.to_revisions[0]] = digest(ref_spec)
        if report.to_revisions == ["0005"]:
            break
    head = expected["0005"]
    _remove(eng.name, ref)

    # Count the crash points of a full run.
    work = store_path(eng, tmp, "work")
    spec = f"{eng.name}:{work}"
    log = tmp / "crash-points.log"
    _copy(eng.name, pristine, work)
    env = dict(os.environ, **{CRASH_LOG_ENV: str(log)})
    env.pop(CRASH_AT_ENV, None)
    counted = _run_upgrade(spec, EXAMPLE, env)
    if counted.returncode != 0:
        raise AssertionError(f"the uninterrupted upgrade failed: {counted.stderr[-2000:]}")
    labels = [line.split(" ", 1)[1] for line in log.read_text().splitlines()]
    result.crash_points = len(labels)
    _remove(eng.name, work)
    chosen = choose_points(labels, points)

    for point in chosen:
        _copy(eng.name, pristine, work)
        env = dict(os.environ, **{CRASH_AT_ENV: str(point)})
        env.pop(CRASH_LOG_ENV, None)
        run = _run_upgrade(spec, EXAMPLE, env)
        landed = run.returncode == -signal.SIGKILL
        kill = {
            "point": point,
            "label": labels[point - 1],
            "returncode": run.returncode,
            "landed": landed,
        }
        where = f"{engine_name} kill at point {point} ({labels[point - 1]})"
        if not landed:  # not a kill: the point tested nothing, which is a failure
            result.failures.append(
                f"{where}: the child was not killed (exit {run.returncode}): {run.stderr[-300:]}"
            )
        try:
            kill["recovered"] = api.finish_interrupted(spec)
            found = api.current(spec)
            rev = found.current[0] if found.current else "base"
            kill["revision"] = rev
            if digest(spec) != expected.get(rev):
                result.failures.append(
                    f"{where}: at {rev} but the digest is not that of an upgrade to {rev}"
                )
            private = [n for n in table_names(spec) if n.startswith(TMP_PREFIX)]
            sorts = leftovers(work)
            if private or sorts:
                result.failures.append(f"{where}: leftovers after recovery: {private} {sorts}")
            again = api.upgrade(spec, EXAMPLE, digests=False)
            if again.to_revisions != ["0005"] or digest(spec) != head:
                result.failures.append(
                    f"{where}: re-running upgrade did not reach the uninterrupted head"
                )
        except Exception as exc:  # noqa: BLE001 - reported with the kill point that caused it
            result.failures.append(f"{where}: {type(exc).__name__}: {exc}")
        result.kills.append(kill)
        _remove(eng.name, work)
    result.seconds = time.monotonic() - started
    return result
