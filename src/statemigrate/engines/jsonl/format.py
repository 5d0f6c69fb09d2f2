"""The dump's lines: header, table, record, batch and footer, and their checks.

What the reader and the writer of :mod:`statemigrate.engines.jsonl` agree on: the
format number, the metadata maps (base64 values) and the header's stamp fields, the
footer's table entries, and the checks every parsed value gets.
"""

from __future__ import annotations

import binascii
import functools
import json
import os
import re
from collections.abc import Mapping
from typing import Any, BinaryIO

from ...digest import Digest
from ...model import MAX_VERSION, TableInfo, TableKind
from ..base import META_REVISION, META_SCHEMA, StoreFacts
from ..errors import DriverErrors, Meaning, Rule

FORMAT = 1
CHECKPOINT_SUFFIX = ".checkpoint"
CHUNK = 1 << 16  # bytes read per step while looking for the footer line
STAMP = (META_SCHEMA, META_REVISION)  # the metadata the header's own fields show
RECORD_LINE = b'{"k":'  # how the writer starts a record line (the resume scan skips them)
# What reading back a partial dump and its checkpoint may raise when they do not match.
_UNUSABLE = (OSError, ValueError, KeyError, TypeError, AttributeError, RecursionError)
_b64e = functools.partial(binascii.b2a_base64, newline=False)  # base64.b64encode's call
# base64.b64decode without its wrapper (what it calls: the same lenient decoding, the
# same errors); a record line is decoded twice with it, so the wrapper showed in profiles.
_b64d = binascii.a2b_base64
_decode_json = json.JSONDecoder().decode


def loads_line(line: bytes) -> Any:
    """One line of the dump as JSON (UTF-8; UnicodeDecodeError and JSONDecodeError are
    ValueErrors), without ``json.loads``' per-call encoding detection."""
    return _decode_json(line.decode("utf-8"))


def _meta_to_json(meta: Mapping[str, bytes]) -> dict[str, str]:
    return {k: _b64e(v).decode() for k, v in sorted(meta.items())}


def _meta_from_json(data: Mapping[str, str]) -> dict[str, bytes]:
    return {k: _b64d(v) for k, v in data.items()}


def _revision_list(raw: bytes) -> list[str] | None:
    """The revision ids of a ``revision`` metadata entry, or None if it is not a JSON list
    of strings."""
    try:
        value = json.loads(raw)
    except (ValueError, RecursionError):
        return None
    if isinstance(value, list) and all(isinstance(r, str) for r in value):
        return value
    return None


def stamp_fields(meta: Mapping[str, bytes]) -> dict[str, Any]:
    """The header's documented ``schema`` and ``revision`` fields for ``meta``.

    Args:
        meta: the metadata entries the dump carries.

    Returns:
        ``{"schema": text or None, "revision": list of ids or None}``: None where the
        metadata has no such entry, or one the field cannot show (a schema that is not
        UTF-8, a revision that is not a JSON list of strings; those stay in ``meta``).
    """
    schema = meta.get(META_SCHEMA)
    try:
        text = schema.decode("utf-8") if schema is not None else None
    except UnicodeDecodeError:
        text = None
    revision = meta.get(META_REVISION)
    return {
        "schema": text,
        "revision": _revision_list(revision) if revision is not None else None,
    }


def stamp_from_header(header: Mapping[str, Any], meta: Mapping[str, bytes]) -> dict[str, bytes]:
    """The stamp a dump's header states, as metadata entries.

    Args:
        header: the parsed header line.
        meta: the metadata read from the ``meta`` maps; an entry that says the same as
            the header (the same revision ids, however spaced) is kept byte for byte.

    Returns:
        ``schema`` and ``revision`` entries for the fields the header states (a missing
        or null field states nothing).

    Raises:
        TypeError: a field that is neither null nor of its documented type.
    """
    out: dict[str, bytes] = {}
    schema = header.get("schema")
    if schema is not None:
        if not isinstance(schema, str):
            raise TypeError(f"its schema must be a string or null, not {schema!r}")
        out[META_SCHEMA] = schema.encode("utf-8")
    revision = header.get("revision")
    if revision is not None:
        if not isinstance(revision, list) or not all(isinstance(r, str) for r in revision):
            raise TypeError(
                f"its revision must be a JSON list of revision ids or null, not {revision!r}"
            )
        had = meta.get(META_REVISION)
        same = had is not None and _revision_list(had) == revision
        out[META_REVISION] = had if same and had is not None else json.dumps(revision).encode()
    return out


def _last_line(f: BinaryIO) -> tuple[bytes, int]:
    """The last line of a file (without its newline) and the offset where it starts.

    The start is searched for backwards, :data:`CHUNK` bytes at a time, so memory per
    step is bounded whatever the line's size; only the line itself is then read whole.
    """
    stop = pos = f.seek(0, os.SEEK_END)
    start = None
    while pos > 0 and start is None:
        low = max(0, pos - CHUNK)
        f.seek(low)
        chunk = f.read(pos - low)
        if stop == pos:  # still in the newlines that end the file
            chunk = chunk.rstrip(b"\n")
            stop = low + len(chunk)
        nl = chunk.rfind(b"\n")
        if nl >= 0:
            start = low + nl + 1
        pos = low
    start = start or 0
    f.seek(start)
    return f.read(stop - start), start


def _why(exc: BaseException) -> str:
    """What is wrong with a line, for a message."""
    return "JSON nested too deeply" if isinstance(exc, RecursionError) else str(exc)


# A damaged line of a table, as the base maps it while the table is read.
JSONL_FACTS = StoreFacts(
    errors=DriverErrors(
        rules=(
            Rule(
                Meaning.DAMAGED,
                types=("builtins.RecursionError",),
                message="{where}: damaged line (JSON nested too deeply)",
            ),
        ),
        driver=tuple(f"builtins.{e.__name__}" for e in _UNUSABLE),
        scan_failed="{where}: damaged line ({text})",
    )
)


def _whole(value: Any, what: str, limit: int) -> int:
    """``value`` if it is a JSON whole number from 0 to ``limit``, else ValueError."""
    if type(value) is not int or not 0 <= value <= limit:
        raise ValueError(f"{what} must be a whole number from 0 to {limit}, not {value!r}")
    return value


def _version(value: Any) -> int:
    """A record's ``ver``: an unsigned 64-bit integer (ValueError otherwise)."""
    if type(value) is not int or not 0 <= value <= MAX_VERSION:
        raise ValueError(f"a version must be a whole number from 0 to 2^64-1, not {value!r}")
    return value


def _dict(value: Any, what: str) -> dict[str, Any]:
    if not isinstance(value, dict):
        raise TypeError(f"{what} is not a JSON object")
    return value


def _footer_table(t: Any, first_line_end: int, footer_start: int) -> tuple[TableInfo, int, Digest]:
    """One table entry of the footer, checked: (table, offset of its table line, digest)."""
    t = _dict(t, "a table entry")
    name = t["table"]
    if not isinstance(name, str):
        raise TypeError(f"a table name must be a string, not {name!r}")
    info = TableInfo(name, TableKind(t["kind"]), _dict(t.get("meta") or {}, f"{name!r} meta"))
    offset = t["offset"]
    if type(offset) is not int or not first_line_end <= offset < footer_start:
        raise ValueError(
            f"table {name!r} is said to start at offset {offset!r}, outside the dump's"
            f" records (bytes {first_line_end} to {footer_start})"
        )
    total = t["sum"]
    if not isinstance(total, str) or not re.fullmatch(r"[0-9a-fA-F]{32}", total):
        raise ValueError(f"table {name!r} has a sum that is not 32 hex digits: {total!r}")
    count = _whole(t["count"], f"table {name!r}'s count", 2**64 - 1)
    return info, offset, Digest(count, int(total, 16))


def _table_entry(line: Mapping[str, Any], offset: int) -> dict[str, Any]:
    """The writer's entry for a table whose table line ``line`` starts at ``offset``."""
    name = line["table"]
    if not isinstance(name, str):
        raise TypeError(f"a table name must be a string, not {name!r}")
    meta = _dict(line.get("meta") or {}, f"{name!r} meta")
    kind = TableKind(line["kind"]).value
    return {"name": name, "kind": kind, "meta": meta, "offset": offset, "count": 0, "sum": 0}


def _header_meta(line: bytes) -> dict[str, bytes]:
    """The ``meta`` map of a dump's header line (ValueError if it is not one)."""
    head = _dict(json.loads(line), "the first line")
    if head.get("statemigrate") != FORMAT:
        raise ValueError("it does not start with a header line")
    return _meta_from_json(_dict(head.get("meta", {}), "the header's meta"))


def _changes(meta: Mapping[str, bytes], base: Mapping[str, bytes]) -> dict[str, bytes | None]:
    """The updates that turn ``base`` into ``meta`` (None deletes)."""
    out: dict[str, bytes | None] = {k: v for k, v in meta.items() if base.get(k) != v}
    out.update({k: None for k in base if k not in meta})
    return out
