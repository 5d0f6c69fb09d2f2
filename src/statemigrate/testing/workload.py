"""A workload shaped like an app's internal state, for examples, fixtures and benchmarks.

``events``: an entity log of ~300-byte events keyed ``folder · u64be(seq)``;
``settings``: 200 versioned settings of ~2 KB; ``odd``: a few odd keys (empty, NUL,
0xff, prefixes). Deterministic for a given seed.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

from ..engines.base import Engine
from ..model import TableInfo, TableKind

EVENTS = TableInfo("events")
SETTINGS = TableInfo("settings", TableKind.VERSIONED)
ODD = TableInfo("odd")
FOLDERS = 64


def event_batches(
    n: int, seed: int = 7, batch: int = 10_000
) -> Iterator[list[tuple[bytes, bytes]]]:
    """``n`` events in key order, in batches (memory bounded by the batch)."""
    rnd = random.Random(seed)
    per_folder = -(-n // FOLDERS)
    out: list[tuple[bytes, bytes]] = []
    made = 0
    for folder in range(FOLDERS):
        prefix = b"folder-%03d/" % folder
        for seq in range(per_folder):
            if made == n:
                break
            body = {
                "type": rnd.choice(["created", "renamed", "moved", "synced"]),
                "seq": seq,
                "folder": folder,
                "ts": 1_700_000_000 + made,
                "path": "docs/" + "x" * rnd.randint(20, 60),
            }
            value = json.dumps(body).encode()
            value += b" " * max(0, 300 - len(value))
            out.append((prefix + seq.to_bytes(8, "big"), value))
            made += 1
            if len(out) == batch:
                yield out
                out = []
    if out:
        yield out


def settings_records(seed: int = 7) -> list[tuple[bytes, bytes, int]]:
    """200 versioned settings of about 2 KB."""
    rnd = random.Random(seed + 1)
    return [
        (b"setting/%04d" % i, rnd.randbytes(2048), rnd.choice([0, 1, 7, 2**63, 2**64 - 1]))
        for i in range(200)
    ]


def odd_records(engine: type[Engine] | None = None) -> list[tuple[bytes, bytes]]:
    """Odd keys, limited to what ``engine`` can store."""
    recs = [
        (b"", b"empty key"),
        (b"\x00", b"nul"),
        (b"\x00\x00", b""),
        (b"\xff", b"ff"),
        (b"\xff\xff", b"ffff"),
        (b"a", b"a"),
        (b"ab", b"prefix"),
        (b"k" * 1000, b"long key"),
    ]
    if engine is not None:
        caps = engine.capabilities
        recs = [r for r in recs if caps.min_key_len <= len(r[0]) <= (caps.max_key_len or 1 << 62)]
    return recs


def write_workload(
    engine: type[Engine],
    path: Path,
    n_events: int,
    *,
    seed: int = 7,
    metadata: Mapping[str, bytes] | None = None,
    options: Mapping[str, Any] | None = None,
) -> Path:
    """Write the workload with ``n_events`` events into a new store at ``path``."""
    writer = engine.create_writer(path, options)
    try:
        writer.put_metadata(dict(metadata or {"schema": b"example-app"}))
        writer.create_table(EVENTS)
        for batch in event_batches(n_events, seed):
            writer.write_batch(EVENTS, batch)
        writer.create_table(ODD)
        writer.write_batch(ODD, sorted(odd_records(engine)))
        writer.create_table(SETTINGS)
        writer.write_batch(SETTINGS, settings_records(seed))
        writer.finish()
    finally:
        writer.close()
    return path
