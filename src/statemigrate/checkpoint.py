"""The conversion checkpoint kept in a destination's metadata while it is built.

It names the source (engine, path and a fingerprint of its files), the tables done
with their digests, and the table in progress with the last key written and the
digest so far. A resume continues after that key; a source whose fingerprint
changed is refused.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from .digest import Digest


def fingerprint(
    engine: str,
    path: Path,
    extra_paths: list[Path] | None = None,
    volatile: tuple[str, ...] = (),
) -> dict[str, Any]:
    """Engine, absolute path, and size and mtime of every file of the store.

    Args:
        engine: the store's engine name.
        path: the store's file or directory.
        extra_paths: its side files.
        volatile: names (shell patterns) of files that hold no state (the engine's
            ``volatile_files``): an app holding the store rewrites them, so they are left out.

    Returns:
        A JSON-friendly fingerprint; two are equal when no file of the store changed.
    """
    files: dict[str, list[int]] = {}
    for root in [path, *(extra_paths or [])]:
        if root.is_dir():
            files.update(_directory_files(root, volatile))
        elif _is_volatile(root.name, volatile):
            continue
        elif root.exists():
            st = root.stat()
            files[root.name] = [st.st_size, st.st_mtime_ns]
    return {"engine": engine, "path": os.path.realpath(path), "files": files}


def _directory_files(root: Path, volatile: tuple[str, ...]) -> dict[str, list[int]]:
    """Size and mtime of every file below ``root`` but the volatile ones, by relative path."""
    files: dict[str, list[int]] = {}
    for r, _d, fs in os.walk(root):
        for name in fs:
            if _is_volatile(name, volatile):
                continue
            p = Path(r) / name
            try:
                st = p.stat()
            except FileNotFoundError:
                continue  # removed while walking (an app's obsolete file): not state
            files[str(p.relative_to(root))] = [st.st_size, st.st_mtime_ns]
    return files


def _is_volatile(name: str, volatile: tuple[str, ...]) -> bool:
    return any(fnmatchcase(name, pattern) for pattern in volatile)


@dataclass
class Checkpoint:
    """Where a conversion stands."""

    source: dict[str, Any]
    done: dict[str, Digest] = field(default_factory=dict)
    table: str | None = None
    last_key: bytes | None = None
    so_far: Digest = field(default_factory=Digest)

    def to_bytes(self) -> bytes:
        """JSON bytes for the metadata entry."""
        return json.dumps(
            {
                "source": self.source,
                "done": {n: d.to_json() for n, d in self.done.items()},
                "table": self.table,
                "last_key": self.last_key.hex() if self.last_key is not None else None,
                "so_far": self.so_far.to_json(),
            }
        ).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> Checkpoint:
        """Inverse of :meth:`to_bytes`."""
        data = json.loads(raw)
        return cls(
            source=data["source"],
            done={n: Digest.from_json(d) for n, d in data["done"].items()},
            table=data["table"],
            last_key=bytes.fromhex(data["last_key"]) if data["last_key"] is not None else None,
            so_far=Digest.from_json(data["so_far"]),
        )
