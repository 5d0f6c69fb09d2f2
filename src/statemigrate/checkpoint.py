"""The conversion checkpoint kept in a destination's metadata while it is built.

It names the source (engine, path and a fingerprint of its files), the tables done
with their digests, and the table in progress with the last key written and the
digest so far. A resume continues after that key; a source whose fingerprint
changed is refused.

Each part is its own metadata entry, written when it changes: the source's
fingerprint once (``checkpoint_source``), each finished table's digest once
(``checkpoint_done:<table>``), and with every batch only the table in progress
(``checkpoint``). A batch's commit then costs the same whatever the number of tables
and source files (before, every batch rewrote every finished table's digest: quadratic
in the number of tables). A ``checkpoint`` holding everything (0.1's form) still reads.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from pathlib import Path
from typing import Any

from .digest import Digest
from .model import META_CHECKPOINT, META_CHECKPOINT_DONE, META_CHECKPOINT_SOURCE


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

    def progress_bytes(self) -> bytes:
        """The ``checkpoint`` entry a batch commits: the table in progress only."""
        return json.dumps(
            {
                "table": self.table,
                "last_key": self.last_key.hex() if self.last_key is not None else None,
                "so_far": self.so_far.to_json(),
            }
        ).encode()

    def entries(self) -> dict[str, bytes | None]:
        """Every entry of this checkpoint, for a destination that starts with it."""
        out: dict[str, bytes | None] = {
            META_CHECKPOINT: self.progress_bytes(),
            META_CHECKPOINT_SOURCE: json.dumps(self.source).encode(),
        }
        out.update({META_CHECKPOINT_DONE + n: _digest_bytes(d) for n, d in self.done.items()})
        return out

    def finish_table(self, name: str, digest: Digest) -> dict[str, bytes | None]:
        """Record ``name`` as copied whole; the entries to commit for it."""
        self.done[name] = digest
        self.table, self.last_key, self.so_far = None, None, Digest()
        return {
            META_CHECKPOINT_DONE + name: _digest_bytes(digest),
            META_CHECKPOINT: self.progress_bytes(),
        }

    @classmethod
    def from_metadata(cls, meta: Mapping[str, bytes]) -> Checkpoint | None:
        """The checkpoint a destination's metadata holds, or None when it holds none."""
        raw = meta.get(META_CHECKPOINT)
        if not raw:
            return None
        data = json.loads(raw)
        if "source" in data:  # everything in one entry, as 0.1 wrote it
            return cls.from_bytes(raw)
        source = meta.get(META_CHECKPOINT_SOURCE)
        if not source:
            return None  # never committed without its source: nothing to trust
        done = {
            k[len(META_CHECKPOINT_DONE) :]: Digest.from_json(json.loads(v))
            for k, v in meta.items()
            if k.startswith(META_CHECKPOINT_DONE)
        }
        return cls(
            source=json.loads(source),
            done=done,
            table=data["table"],
            last_key=bytes.fromhex(data["last_key"]) if data["last_key"] is not None else None,
            so_far=Digest.from_json(data["so_far"]),
        )


def is_checkpoint_entry(key: str) -> bool:
    """Whether a metadata key belongs to a conversion's checkpoint (never carried over)."""
    return key in (META_CHECKPOINT, META_CHECKPOINT_SOURCE) or key.startswith(META_CHECKPOINT_DONE)


def cleared(keys: Iterable[str]) -> dict[str, bytes | None]:
    """The entries that remove every checkpoint entry among ``keys`` and the fixed ones."""
    out: dict[str, bytes | None] = {META_CHECKPOINT: None, META_CHECKPOINT_SOURCE: None}
    out.update({k: None for k in keys if is_checkpoint_entry(k)})
    return out


def _digest_bytes(digest: Digest) -> bytes:
    return json.dumps(digest.to_json()).encode()
