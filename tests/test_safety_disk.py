"""Full disks: the pre-flight estimate refuses with both figures; a disk that fills anyway
gives exit 5 in one line, leaves the final path untouched and the .partial resumable.

The destination lives on a size-limited tmpfs mounted for the test (we run as root).
If mounting is refused, the test fails loudly: it never skips.
"""

from __future__ import annotations

import re

import pytest

from statemigrate.registry import engine_names
from statemigrate.testing.cli import describe, one_line_error, run_cli
from statemigrate.testing.filesystems import grow, small_filesystem
from statemigrate.testing.stores import (
    build_store,
    digest_of,
    leftovers,
    spec,
    store_exists,
    store_file,
)

RECORDS = 120_000  # ~3 MB of incompressible payload: more than the 2 MB file system holds

# Bugs found in engines owned by others (reported, not fixed here): strict xfail.
BUGS: dict[str, str] = {}


def engines_marked() -> list:
    return [
        pytest.param(
            n,
            id=n,
            marks=[pytest.mark.xfail(strict=True, raises=AssertionError, reason=BUGS[n])]
            if n in BUGS
            else [],
        )
        for n in engine_names()
    ]


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    path = store_file("sqlite", tmp_path_factory.mktemp("disk-source"), "source")
    return path, build_store("sqlite", path, RECORDS, seed=11)


@pytest.mark.parametrize("dst", engine_names())
def test_preflight_refuses_with_both_figures(dst: str, source) -> None:
    src, _ = source
    with small_filesystem("2m") as fs:
        final = store_file(dst, fs, "out")
        run = run_cli(["convert", "--quiet", spec("sqlite", src), spec(dst, final)])
        assert run.returncode == 5, describe(run)
        line = one_line_error(run)
        figures = re.findall(r"\d[\d,]*", line.split(":", 2)[-1])
        assert "free" in line and len(figures) >= 2, line
        assert "--force" in run.stderr
        assert not store_exists(dst, final)
        assert not final.with_name(final.name + ".partial").exists()


@pytest.mark.heavy
@pytest.mark.parametrize("dst", engines_marked())
def test_disk_full_midway_then_resume_after_freeing_space(dst: str, source) -> None:
    src, src_digest = source
    with small_filesystem("2m") as fs:
        final = store_file(dst, fs, "out")
        args = [
            "convert",
            "--quiet",
            "--batch-records",
            "2000",
            spec("sqlite", src),
            spec(dst, final),
        ]
        run = run_cli(args + ["--force"], timeout=120)
        assert run.returncode == 5, describe(run)
        line = one_line_error(run)
        assert "space" in line.lower() or "full" in line.lower(), line
        assert not store_exists(dst, final), (
            "a convert that ran out of space left something at the final path"
        )
        grow(fs)  # then resume
        resumed = run_cli(args + ["--resume"], timeout=300)
        assert resumed.returncode == 0, describe(resumed)
        assert digest_of(dst, final) == src_digest
        assert leftovers(final) == []


# Engines whose same-engine convert is the engine's own copy (pipeline/native.py).
NATIVE_COPIES = ["sqlite", "lmdb", "rocksdb", "redb"]


@pytest.mark.parametrize("engine", NATIVE_COPIES)
def test_disk_full_during_an_engines_own_copy_then_resume(engine: str, tmp_path) -> None:
    """The same path for a same-engine copy: exit 5 in one line, nothing at the final
    path, the source untouched; once there is room, ``--resume`` starts it over."""
    src = store_file(engine, tmp_path, "source")
    src_digest = build_store(engine, src, RECORDS, seed=12)
    with small_filesystem("2m") as fs:
        final = store_file(engine, fs, "out")
        args = ["convert", "--quiet", spec(engine, src), spec(engine, final)]
        run = run_cli(args + ["--force"], timeout=120)
        assert run.returncode == 5, describe(run)
        line = one_line_error(run)
        assert "space" in line.lower() or "full" in line.lower(), line
        assert not store_exists(engine, final), describe(run)
        assert digest_of(engine, src) == src_digest
        grow(fs)
        resumed = run_cli(args + ["--resume"], timeout=300)
        assert resumed.returncode == 0, describe(resumed)
        assert digest_of(engine, final) == src_digest
        assert leftovers(final) == []
