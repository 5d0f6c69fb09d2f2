"""Make an example store at revision 0001 with data, as the app would have written it.

    python schemas/example/seed.py sqlite:state.sqlite --events 1000
    python schemas/example/seed.py rocksdb:state.rocksdb --events 1000

The store must not exist. It is created empty, upgraded to 0001 with this schema,
then filled: ``events`` (folder · seq keys, JSON values), ``settings``, ``prefs``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

HERE = Path(__file__).resolve().parent
FOLDERS = ["archive", "docs", "inbox", "music", "photos/2024", "photos/2025", "projects", "videos"]
KINDS = ["file.created", "file.changed", "file.deleted", "folder.scanned"]


def events(n: int):
    """``n`` events as (key, value) records in key order."""
    per, extra = divmod(n, len(FOLDERS))
    i = 0
    for f, folder in enumerate(FOLDERS):
        for seq in range(per + (1 if f < extra else 0)):
            i += 1
            key = folder.encode() + b"\x00" + seq.to_bytes(8, "big")
            event = {
                "ts": 1_700_000_000_000 + i * 997,
                "kind": KINDS[(seq * 7 + f) % 4],
                "payload": f"{folder}/file-{seq:06d}.dat size={(seq * 7919) % 1_000_003}",
            }
            yield key, json.dumps(event, separators=(",", ":")).encode()


def seed(store: str, n_events: int, *, engine: str | None = None, batch: int = 10_000) -> None:
    """Create ``store`` at revision 0001 holding ``n_events`` events and a few settings."""
    import statemigrate
    from statemigrate.api import upgrade
    from statemigrate.model import TableInfo, TableKind
    from statemigrate.stores.opening import resolve_destination

    eng, path = resolve_destination(store, engine)
    writer = eng.create_writer(path)
    writer.put_metadata({"schema": b"statemigrate-example"})
    writer.finish()
    writer.close()
    spec = f"{eng.name}:{path}"
    upgrade(spec, HERE, to="0001", digests=False)
    writer = eng.open_writer(path)
    try:
        buf = []
        for rec in events(n_events):
            buf.append(rec)
            if len(buf) >= batch:
                writer.write_batch(TableInfo("events"), buf)
                buf = []
        if buf:
            writer.write_batch(TableInfo("events"), buf)
        writer.write_batch(
            TableInfo("prefs"), [(b"editor", b"vim"), (b"language", b"en"), (b"theme", b"dark")]
        )
        # settings already holds schema.origin (written by 0001); these sort before it.
        writer.write_batch(
            TableInfo("settings", TableKind.VERSIONED),
            [(b"quota.bytes", b"1073741824", 3), (b"sync.enabled", b"true", 7)],
        )
        writer.finish()
    finally:
        writer.close()
    del statemigrate


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("store", help="ENGINE:PATH or a path with a known suffix")
    parser.add_argument("--events", type=int, default=1000)
    args = parser.parse_args()
    seed(args.store, args.events)
    print(f"seeded {args.store} at revision 0001 with {args.events} events")


if __name__ == "__main__":
    main()
