"""fsutil.copy_file_written_back: the bytes exactly, in steps or through its fallback."""

from __future__ import annotations

import errno
import os
import stat
from pathlib import Path

import pytest

from statemigrate import fsutil

SIZES = [0, 1, 4095, 3 * 4096 + 17, 64 * 1024 + 1]


@pytest.mark.parametrize("size", SIZES)
def test_the_copy_holds_the_sources_bytes_across_many_steps(
    size: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(fsutil, "_COPY_STEP", 4096)  # many steps, a short last one
    src, dst = tmp_path / "src", tmp_path / "dst"
    data = os.urandom(size)
    src.write_bytes(data)
    fsutil.copy_file_written_back(src, dst)
    assert dst.read_bytes() == data
    assert src.read_bytes() == data


def copied_with(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    steps: int,
    then: BaseException | int,
    size: int,
) -> int:
    """Copy ``size`` random bytes in 4 KiB steps while ``copy_file_range`` works for
    ``steps`` calls and then raises ``then`` (an exception) or returns it; check the
    copy is whole and return how many times it was called."""
    if not hasattr(os, "copy_file_range"):
        pytest.xfail("no copy_file_range here: the copy is shutil.copyfile's")
    monkeypatch.setattr(fsutil, "_COPY_STEP", 4096)
    real = os.copy_file_range
    calls = []

    def misbehaving(i: int, o: int, n: int) -> int:
        calls.append(n)
        if len(calls) <= steps:
            return real(i, o, n)
        if isinstance(then, BaseException):
            raise then
        return then

    monkeypatch.setattr(os, "copy_file_range", misbehaving)
    src, dst = tmp_path / "src", tmp_path / "dst"
    data = os.urandom(size)
    src.write_bytes(data)
    fsutil.copy_file_written_back(src, dst)
    assert dst.read_bytes() == data
    return len(calls)


def test_a_file_system_that_refuses_copy_file_range_midway_gets_the_rest_copied(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """After two steps copy_file_range is refused (EXDEV): the rest is read and written
    from where the steps left off, nothing repeated or skipped."""
    refused = OSError(errno.EXDEV, "Invalid cross-device link")
    assert copied_with(tmp_path, monkeypatch, 2, refused, 5 * 4096 + 123) == 3


def test_another_error_is_raised_and_the_mode_is_a_new_files(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    src, dst = tmp_path / "src", tmp_path / "dst"
    src.write_bytes(b"x" * 100)
    os.chmod(src, 0o600)
    old = os.umask(0o077)
    try:
        fsutil.copy_file_written_back(src, dst)
    finally:
        os.umask(old)
    assert stat.S_IMODE(dst.stat().st_mode) == 0o600  # 0o666 under the umask, as "wb"
    if hasattr(os, "copy_file_range"):

        def full(i: int, o: int, n: int) -> int:
            raise OSError(errno.ENOSPC, "No space left on device")

        monkeypatch.setattr(os, "copy_file_range", full)
        with pytest.raises(OSError) as err:
            fsutil.copy_file_written_back(src, tmp_path / "other")
        assert err.value.errno == errno.ENOSPC


def test_a_file_system_whose_copy_file_range_gives_nothing_gets_a_whole_copy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Some file systems answer copy_file_range with 0 before the end (as at the end):
    the copy goes on by reads and writes, never a short file."""
    assert copied_with(tmp_path, monkeypatch, 1, 0, 3 * 4096 + 5) == 2


def test_the_sources_holes_stay_holes_and_the_copy_reads_the_same(tmp_path: Path) -> None:
    """A sparse source (a redb file's never-written gaps): the copy has its length and
    bytes, data after a hole and a hole at the end included, and takes no more disk."""
    src, dst = tmp_path / "src", tmp_path / "dst"
    head, middle = os.urandom(3 * 4096 + 5), os.urandom(70_000)
    with open(src, "wb") as f:
        f.write(head)
        f.seek(40 << 20)  # a 40 MiB hole
        f.write(middle)
        f.truncate(96 << 20)  # and one at the end
    fsutil.copy_file_written_back(src, dst)
    assert dst.stat().st_size == src.stat().st_size == 96 << 20
    with open(dst, "rb") as f:
        assert f.read(len(head)) == head
        f.seek(40 << 20)
        assert f.read(len(middle)) == middle
    assert dst.read_bytes() == src.read_bytes()
    if hasattr(os, "SEEK_DATA") and src.stat().st_blocks * 512 < 8 << 20:  # holes here
        assert dst.stat().st_blocks <= src.stat().st_blocks + 64  # + a few blocks of slack
