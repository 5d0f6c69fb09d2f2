"""``upgrade --backup PATH`` when the backup itself cannot be written (issue 27, C3).

A full disk while the backup is written left an empty or truncated file at PATH; the
retry then kept it as "the state from before the first try" and put the real backup
under a timestamped name, so an installer restoring PATH restored garbage. The backup
is now written beside PATH (``PATH.partial``), synced, and renamed: a failed one leaves
nothing, a retry writes PATH itself.

The backup lives on a small tmpfs mounted for the test (we run as root) that the store
does not fit in; ``grow`` then frees space. The expectation is the store's digest taken
by ``statemigrate checksum`` before the upgrade, compared with the backup's own.
"""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.cli import describe, one_line_error, run_cli
from statemigrate.testing.example import EXAMPLE, seeded
from statemigrate.testing.filesystems import grow, small_filesystem
from statemigrate.testing.stores import store_path

IN_PLACE = [n for n in engine_names() if get_engine(n).capabilities.in_place]
EVENTS = 3000  # a store of a few hundred KB in every engine: more than the 64 KB below


def checksum(spec: str) -> str:
    run = run_cli(["checksum", spec])
    assert run.returncode == 0, describe(run)
    return run.stdout.strip().splitlines()[-1]


def upgrade(spec: str, backup: Path):
    return run_cli(["upgrade", "--quiet", spec, "--schema", EXAMPLE, "--backup", backup])


def backup_path(name: str, fs: Path) -> Path:
    return store_path(get_engine(name), fs, "before")


@pytest.mark.parametrize("name", IN_PLACE)
def test_a_backup_the_disk_cannot_hold_leaves_nothing_and_the_retry_writes_path(
    name: str, tmp_path: Path
) -> None:
    eng = get_engine(name)
    spec = seeded(eng, tmp_path, events=EVENTS)
    before = checksum(spec)
    with small_filesystem("64k") as fs:
        backup = backup_path(name, fs)
        failed = upgrade(spec, backup)
        assert failed.returncode == 5, describe(failed)
        line = one_line_error(failed)
        assert "backup" in line, line
        assert os.listdir(fs) == [], os.listdir(fs)  # no PATH, no PATH.partial
        assert checksum(spec) == before  # no revision ran

        grow(fs)
        retried = upgrade(spec, backup)
        assert retried.returncode == 0, describe(retried)
        assert sorted(os.listdir(fs)) == [backup.name]
        assert checksum(f"{name}:{backup}") == before


@pytest.mark.parametrize("name", IN_PLACE)
def test_a_partial_backup_a_killed_run_left_is_replaced(name: str, tmp_path: Path) -> None:
    """A ``PATH.partial`` left by a run killed while writing the backup is ours: the next
    run removes it and writes PATH (not a timestamped name beside the leftover)."""
    eng = get_engine(name)
    spec = seeded(eng, tmp_path, events=20)
    before = checksum(spec)
    backup = backup_path(name, tmp_path / "backups")
    backup.parent.mkdir()
    leftover = backup.with_name(backup.name + ".partial")
    leftover.mkdir() if eng.capabilities.directory else leftover.write_bytes(b"half")
    run = upgrade(spec, backup)
    assert run.returncode == 0, describe(run)
    assert sorted(os.listdir(backup.parent)) == [backup.name]
    assert checksum(f"{name}:{backup}") == before
