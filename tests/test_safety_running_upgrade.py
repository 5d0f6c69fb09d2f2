"""A store read while another statemigrate runs an upgrade on it (issue 27, Messages).

The upgrade is a real second process, held in the middle of a revision (after it created
a private table: its ``upgrade_pending`` entry is committed) by ``fsutil.HOLD_ENV``. A
``convert``, ``checksum`` or ``verify`` of the store meanwhile either reads the revision
before the upgrade (engines whose DDL is transactional keep the whole revision in one
transaction that no reader sees) or is refused as busy: exit 3, "store is in use by
another process (pid N)" with the upgrade's pid. Never "the upgrade was interrupted"
(exit 4): it is running, and `statemigrate upgrade` would only be refused as busy.
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import pytest

from statemigrate.fsutil import HOLD_ENV
from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.cli import cli_command, describe, one_line_error, run_cli
from statemigrate.testing.example import digest, schema_with, seeded

IN_PLACE = [n for n in engine_names() if get_engine(n).capabilities.in_place]
HANG_GUARD = 120.0  # seconds: a hang guard only (the upgrade reaches its hold in about one)

HELD = '''"""Held mid-revision by the test."""
from statemigrate import op
from statemigrate.fsutil import crash_point

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade():
    op.create_table("held")
    op.put("held", b"k", b"v")
    crash_point("held revision")


def downgrade():
    op.drop_table("held")
'''

READS = {
    "convert": ["convert", "--quiet", "{store}", "{out}"],
    "checksum": ["checksum", "--json", "{store}"],
    "verify": ["verify", "{store}", "{copy}"],
}


def schema(tmp: Path) -> Path:
    """The example schema's first revision, then one that holds its process."""
    made = schema_with(tmp, {"0002_held.py": HELD})
    for f in (made / "versions").glob("000[2-9]_*.py"):
        if f.name != "0002_held.py":
            f.unlink()
    return made


@pytest.mark.parametrize("verb", sorted(READS))
@pytest.mark.parametrize("engine", IN_PLACE)
def test_a_read_beside_a_running_upgrade_is_busy_or_the_old_revision(
    tmp_path: Path, engine: str, verb: str
) -> None:
    eng = get_engine(engine)
    store = seeded(eng, tmp_path, events=20)
    before = digest(store)
    copy = tmp_path / "before.jsonl"
    made = run_cli(["convert", "--quiet", store, copy])
    assert made.returncode == 0, describe(made)
    marker = tmp_path / "held"
    env = dict(os.environ, **{HOLD_ENV: f"held revision:{marker}"})
    upgrade = subprocess.Popen(
        [*cli_command(), "upgrade", "--quiet", "--schema", str(schema(tmp_path)), store],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not marker.exists():
            assert upgrade.poll() is None, upgrade.communicate()
            assert time.monotonic() < deadline, "the upgrade never reached its hold"
            time.sleep(0.01)
        out = tmp_path / f"out.{engine}"
        args = [
            a.replace("{store}", store).replace("{out}", str(out)).replace("{copy}", str(copy))
            for a in READS[verb]
        ]
        run = run_cli(args, timeout=HANG_GUARD)
    finally:
        marker.unlink(missing_ok=True)
        _out, err = upgrade.communicate(timeout=HANG_GUARD)
    assert upgrade.returncode == 0, err
    if run.returncode == 0:
        # Only where the revision is one transaction no reader sees.
        assert eng.capabilities.transactional_ddl, describe(run)
        if verb == "convert":
            assert digest(f"{engine}:{out}") == before
        if verb == "checksum":
            assert json.loads(run.stdout)["digest"] == before
        return
    assert run.returncode == 3, describe(run)
    line = one_line_error(run)
    assert f"store is in use by another process (pid {upgrade.pid})" in line, line
    assert "interrupted" not in run.stderr, run.stderr


def test_the_hold_is_mid_revision(tmp_path: Path) -> None:
    """The held upgrade has committed its pending entry (the state a reader called
    'interrupted'): the upgrade is killed at its hold (its background threads may still
    be compacting while it is held), then the store is read with the engine's reader."""
    eng = get_engine("fjall2")
    store = seeded(eng, tmp_path, events=20)
    marker = tmp_path / "held"
    env = dict(os.environ, **{HOLD_ENV: f"held revision:{marker}"})
    upgrade = subprocess.Popen(
        [*cli_command(), "upgrade", "--quiet", "--schema", str(schema(tmp_path)), store],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + HANG_GUARD
        while not marker.exists():
            assert upgrade.poll() is None, upgrade.communicate()
            assert time.monotonic() < deadline, "the upgrade never reached its hold"
            time.sleep(0.01)
        upgrade.kill()
    finally:
        marker.unlink(missing_ok=True)
        upgrade.communicate(timeout=HANG_GUARD)
    assert upgrade.returncode == -9
    with eng.open_reader(Path(store.split(":", 1)[1])) as reader:
        assert "upgrade_pending" in reader.metadata()
