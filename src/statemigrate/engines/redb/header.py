"""A redb file's header, read with plain file I/O, and what each file format means."""

from __future__ import annotations

import struct
from pathlib import Path
from typing import Any

from ...errors import SourceError
from ...locks import LockProbe
from ..base import StoreFacts
from ..errors import DriverErrors, Meaning, Rule

MAGIC = b"redb\x1a\n\xa9\r\n"
HEADER_LEN = 320  # 64-byte header + two 128-byte commit slots
GOD_BYTE = 9
PRIMARY_BIT = 1
RECOVERY_REQUIRED = 2
SLOT_OFFSETS = (64, 192)
PAGE_SIZE_OFFSET = 12

# Which redb releases write each file format (for ``inspect`` and refusals).
FORMAT_WRITERS = {
    1: "redb 1.x",
    2: "redb 2.0-2.6",
    3: "redb 2.6 (with the format-3 option), 3.x and 4.x",
}
WRITABLE_FORMATS = (2, 3)
DEFAULT_FORMAT = 3


def read_header(path: Path) -> dict[str, Any]:
    """The facts of a redb file header, read with plain file I/O.

    Raises:
        SourceError: not a redb file, or too short to hold a header.
    """
    try:
        with open(path, "rb") as f:
            head = f.read(HEADER_LEN)
    except OSError as exc:
        raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if head[: len(MAGIC)] != MAGIC:
        raise SourceError(f"{path}: not a redb file (bad magic)")
    if len(head) < HEADER_LEN:
        raise SourceError(
            f"{path}: truncated redb file ({len(head)} bytes, shorter than its header)"
        )
    god = head[GOD_BYTE]
    slot = 1 if god & PRIMARY_BIT else 0
    fmt = head[SLOT_OFFSETS[slot]]
    (page_size,) = struct.unpack_from("<I", head, PAGE_SIZE_OFFSET)
    return {
        "format": fmt,
        "written_by": FORMAT_WRITERS.get(fmt, "unknown"),
        "page_size": page_size,
        "needs_repair": bool(god & RECOVERY_REQUIRED),
        "commit_slot": slot,
    }


# What the binding's errors mean (its exception classes), and where a holder shows: every
# redb version takes a flock on its file.
REDB_FACTS = StoreFacts(
    errors=DriverErrors(
        rules=(
            Rule(Meaning.BUSY, types=("RedbBusyError",)),
            Rule(
                Meaning.UNSUPPORTED,
                types=("RedbUnsupportedError",),
                message="{path}: unsupported redb {text}",
            ),
            Rule(
                Meaning.DAMAGED,
                types=("RedbCorruptError",),
                message="{path}: corrupt redb file ({text})",
            ),
            Rule(Meaning.REFUSED, types=("RedbRefusedError",)),
            # redb asserts on some corrupt pages; the binding turns the panic into an exception.
            Rule(
                Meaning.FAILED,
                types=("PanicException",),
                message="{path}: corrupt redb file (redb stopped: {text})",
            ),
        ),
        driver=(
            "RedbBusyError",
            "RedbUnsupportedError",
            "RedbCorruptError",
            "RedbRefusedError",
            "RedbError",
        ),
        failed="{path}: redb error: {text}",
        whole_text=True,
    ),
    locks=(LockProbe("", "flock"),),
    busy_hint="stop the application that uses it",
)
