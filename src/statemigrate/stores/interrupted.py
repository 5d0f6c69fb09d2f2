"""A store an upgrade left between two revisions: what read-only verbs refuse to copy.

An upgrade records its journal in the store's metadata (``upgrade_journal`` once a
revision committed, ``upgrade_pending`` before); until ``upgrade`` or ``downgrade``
finishes it, its tables may be between two revisions. :mod:`statemigrate.schema.journal`
writes these entries; convert, verify and checksum refuse such a store here.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

__all__ = ["META_JOURNAL", "META_PENDING", "interrupted", "load_entry", "refuse_interrupted"]

# JSON {"revision", "to", "direction", "tables", ...}: a revision that committed.
META_JOURNAL = "upgrade_journal"
# JSON {"revision", "to", "direction", "tables"}: private tables a revision that has not
# committed yet may have created (each name committed before its table exists).
META_PENDING = "upgrade_pending"


def load_entry(meta: dict[str, bytes], key: str) -> dict[str, Any] | None:
    """The JSON entry ``key`` of the metadata, or None."""
    raw = meta.get(key)
    return json.loads(raw) if raw is not None else None


def interrupted(meta: dict[str, bytes]) -> dict[str, Any] | None:
    """What an unfinished upgrade left, for read-only commands to report; None if nothing.

    Returns:
        ``{"revision", "direction", "to", "committed", "message"}``: ``committed`` is
        True when the revision reached its commit point (finishing it completes the
        switch) and False when finishing it rolls the revision back.
    """
    journal = load_entry(meta, META_JOURNAL)
    entry = journal if journal is not None else load_entry(meta, META_PENDING)
    if entry is None:
        return None
    direction = entry.get("direction", "upgrade")
    to = entry.get("to")
    target = ", ".join(to) if to else (entry.get("revision") or "an unknown revision")
    article = "an" if direction == "upgrade" else "a"
    return {
        "revision": entry.get("revision"),
        "direction": direction,
        "to": to,
        "committed": journal is not None,
        "message": (
            f"{article} {direction} to {target} was interrupted; run `statemigrate upgrade` "
            "(or `downgrade`) to finish it"
        ),
    }


def refuse_interrupted(path: Any, meta: dict[str, bytes]) -> None:
    """Refuse to read a store whose upgrade was interrupted (for convert, verify, checksum).

    Until ``upgrade`` or ``downgrade`` finishes it, its tables may be between two
    revisions (RocksDB, redb, HelixDB switch table by table): a copy or a digest of that
    would pass a mixed state off as the store.

    An upgrade that is still running shows the same entries: while another statemigrate
    holds the store's writer lock (``STORE.lock``), the store is busy, not interrupted.

    Raises:
        StoreBusyError: another statemigrate is upgrading the store (exit 3, its pid).
        UpgradeInterruptedError: an upgrade of the store was interrupted (exit 4).
    """
    from ..errors import UpgradeInterruptedError

    found = interrupted(meta)
    if found is not None:
        from .lockfile import refuse_if_written

        refuse_if_written(Path(path), f"statemigrate is {found['direction'][:-1]}ing it")
        raise UpgradeInterruptedError(
            f"{path}: {found['message'].split(';')[0]}; the store is between two revisions",
            hint="run `statemigrate upgrade STORE --schema DIR` (or `downgrade`) to finish it first",
        )
