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
from pathlib import Path
from typing import Any

from .digest import Digest


def fingerprint(engine: str, path: Path, extra_paths: list[Path] | None = None) -> dict[str, Any]:
    """Engine, absolute path, and size and mtime of every file of the store."""
    files: dict[str, list[int]] = {}
    roots = [path] + list(extra_paths or [])
    for root in roots:
        if root.is_dir():
            for r, _d, fs in os.walk(root):
                for name in fs:
                    p = Path(r) / name
                    if name in ("LOCK", "lock.mdb") or name.startswith("LOG"):
                        # Lock files hold no state (RocksDB's LOCK, LMDB's reader table,
                        # which an app holding the store rewrites); RocksDB rewrites its
                        # info log on every open.
                        continue
                    try:
                        st = p.stat()
                    except FileNotFoundError:
                        continue  # removed while walking (an app's obsolete file): not state
                    files[str(p.relative_to(path))] = [st.st_size, st.st_mtime_ns]
        elif root.name.endswith("-shm"):
            continue  # SQLite's WAL index: every reader writes its read marks there
        elif root.exists():
            st = root.stat()
            files[root.name] = [st.st_size, st.st_mtime_ns]
    return {"engine": engine, "path": os.path.realpath(path), "files": files}


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
