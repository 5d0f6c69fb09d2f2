"""Damaging a copy of a store, for the tests of corrupt input: truncate, flip, mutate."""

from __future__ import annotations

import os
import random
import shutil
from collections.abc import Sequence
from pathlib import Path


def data_files(path: Path) -> list[Path]:
    """The files of a store that hold its data (every regular file of a directory store)."""
    if path.is_file():
        return [path]
    skip = ("LOCK", "LOG")
    return sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(skip))


def copy_store(src: Path, dst: Path) -> Path:
    """Copy a store file or directory."""
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True)
    else:
        shutil.copy2(src, dst)
    return dst


def truncate_file(path: Path, fraction: float) -> None:
    """Cut a file to ``fraction`` of its size."""
    size = path.stat().st_size
    os.truncate(path, int(size * fraction))


def flip_bytes(path: Path, offsets: Sequence[int]) -> None:
    """XOR 0xFF into the bytes at ``offsets`` (modulo the file size)."""
    data = bytearray(path.read_bytes())
    if not data:
        return
    for off in offsets:
        data[off % len(data)] ^= 0xFF
    path.write_bytes(bytes(data))


def mutate(data: bytes, rnd: random.Random, flips: int = 4) -> bytes:
    """``data`` with a few random bytes changed, or cut short, or with a run duplicated."""
    buf = bytearray(data)
    choice = rnd.random()
    if not buf:
        return bytes(rnd.randbytes(rnd.randint(0, 64)))
    if choice < 0.15:
        return bytes(buf[: rnd.randrange(len(buf))])
    if choice < 0.25:
        a = rnd.randrange(len(buf))
        b = min(len(buf), a + rnd.randint(1, 512))
        return bytes(buf[:b] + buf[a:])
    for _ in range(flips):
        buf[rnd.randrange(len(buf))] = rnd.randrange(256)
    return bytes(buf)
