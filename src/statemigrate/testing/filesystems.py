"""A size-limited file system for the disk-full tests, and growing it to free space."""

from __future__ import annotations

import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def small_filesystem(size: str = "2m") -> Iterator[Path]:
    """A size-limited tmpfs mounted on a fresh directory; unmounted afterwards.

    Raises AssertionError (the test fails loudly, never skips) when mounting is refused.
    """
    where = Path(tempfile.mkdtemp(prefix="statemigrate-small-fs-"))
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        where.rmdir()
        raise AssertionError(
            f"cannot mount a {size} tmpfs for the disk-full test: {proc.stderr.strip()}"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)
        shutil.rmtree(where, ignore_errors=True)


def grow(fs: Path) -> None:
    """Free space on a :func:`small_filesystem`: grow it to 512 MiB."""
    grown = subprocess.run(
        ["mount", "-o", "remount,size=512m", str(fs)], capture_output=True, text=True, check=False
    )
    assert grown.returncode == 0, grown.stderr
