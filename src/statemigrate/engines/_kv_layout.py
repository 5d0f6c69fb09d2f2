"""The prefix codec of a ``[kv]`` layout: stored keys of one namespace <-> tables.

Engine-independent (:class:`statemigrate.layout.KvPrefix`): this module tells tables
apart, strips and adds prefixes, and encodes versions as the layout says. A table's
records are one range of the namespace, ``prefix ‖ after`` up to the prefix's end, read
as a stream: nothing is buffered. The tables are found by skipping from one prefix to
the next (one seek per table, and one per record that no table of the layout claims).
The reader and writer built on it are :mod:`._kv_mapping`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from typing import Literal

from ..errors import SourceError
from ..layout import METADATA_NAMESPACE, VERSION_ENCODINGS, KvPrefix, Layout
from ..model import META_KIND_PREFIX, Batch, Record, TableInfo, TableKind

__all__ = [
    "SEPARATORS",
    "Found",
    "Guess",
    "decode_batch",
    "decode_records",
    "encode_batch",
    "find_tables",
    "guess_prefix",
    "guess_text",
    "layout_tables",
    "may_be_versioned",
    "parse_name",
    "prefix_end",
    "shown_key",
]

_WIDTH = 8


def prefix_end(prefix: bytes) -> bytes | None:
    """The first key after every key that starts with ``prefix`` (None: no such key)."""
    stripped = prefix.rstrip(b"\xff")
    if not stripped:
        return None
    return stripped[:-1] + bytes([stripped[-1] + 1])


def shown_key(key: bytes) -> str:
    """A stored key for a message: its repr, cut at 64 bytes."""
    return repr(key[:64]) + ("…" if len(key) > 64 else "")


def parse_name(spec: KvPrefix, stored: bytes) -> str | None:
    """The table a stored key belongs to, or None when no table of the layout can claim it.

    The name runs from the head to the first separator; a name that is empty, not
    UTF-8, or holds the separator's first character is none this layout writes.
    """
    head = spec.head.encode("utf-8")
    if not stored.startswith(head):
        return None
    rest = stored[len(head) :]
    end = rest.find(spec.separator.encode("utf-8"))
    if end <= 0:
        return None
    try:
        name = rest[:end].decode("utf-8")
    except UnicodeDecodeError:
        return None
    if "\x00" in name or spec.name_problem(name) or len(rest[:end]) > 255:
        return None
    return name


def _split_version(spec: KvPrefix, value: bytes) -> tuple[bytes, int] | None:
    if len(value) < _WIDTH:
        return None
    enc = spec.version
    if enc.startswith("prefix-"):
        raw, rest = value[:_WIDTH], value[_WIDTH:]
    else:
        raw, rest = value[-_WIDTH:], value[:-_WIDTH]
    return rest, int.from_bytes(raw, "big" if enc.endswith("be") else "little")


def _join_version(spec: KvPrefix, value: bytes, version: int) -> bytes:
    raw = version.to_bytes(_WIDTH, "big" if spec.version.endswith("be") else "little")
    return raw + value if spec.version.startswith("prefix-") else value + raw


def decode_batch(
    spec: KvPrefix, table: TableInfo, batch: list[tuple[bytes, bytes]], cut: int, where: str
) -> Batch:
    """A batch of a table's stored pairs (every key under its prefix: the scan's range is
    the prefix's) as records: the first ``cut`` bytes of each key dropped, the version
    split off where the table is versioned. One list comprehension per batch.

    Raises:
        SourceError: a versioned table's value shorter than its version (exit 4).
    """
    if not table.versioned:
        return [(k[cut:], v) for k, v in batch]
    short = next((k for k, v in batch if len(v) < _WIDTH), None)
    if short is not None:
        value = next(v for k, v in batch if k == short)
        raise SourceError(
            f"{where}: the value of key {shown_key(short[cut:])} is {len(value)} bytes, "
            f"shorter than its {_WIDTH}-byte version ({spec.version})",
            hint="a table the layout lists as versioned must carry a version in every value",
        )
    order: Literal["big", "little"] = "big" if spec.version.endswith("be") else "little"
    if spec.version.startswith("prefix-"):
        return [(k[cut:], v[_WIDTH:], int.from_bytes(v[:_WIDTH], order)) for k, v in batch]
    return [(k[cut:], v[:-_WIDTH], int.from_bytes(v[-_WIDTH:], order)) for k, v in batch]


def decode_records(
    spec: KvPrefix, table: TableInfo, pairs: Iterable[tuple[bytes, bytes]], where: str
) -> Iterator[Record]:
    """The table's records from the namespace's pairs, starting at its prefix (or after).

    Stops at the first key outside the table's prefix.

    Raises:
        SourceError: a versioned table's value shorter than its version (exit 4).
    """
    prefix = spec.table_prefix(table.name)
    cut = len(prefix)
    if not table.versioned:
        for key, value in pairs:
            if not key.startswith(prefix):
                return
            yield key[cut:], value
        return
    for key, value in pairs:
        if not key.startswith(prefix):
            return
        split = _split_version(spec, value)
        if split is None:
            raise SourceError(
                f"{where}: the value of key {shown_key(key[cut:])} is {len(value)} bytes, "
                f"shorter than its {_WIDTH}-byte version ({spec.version})",
                hint="a table the layout lists as versioned must carry a version in every value",
            )
        yield key[cut:], split[0], split[1]


def encode_batch(spec: KvPrefix, table: TableInfo, batch: Batch) -> list[tuple[bytes, bytes]]:
    """The stored pairs of a batch of ``table``: prefixed keys, versions encoded."""
    prefix = spec.table_prefix(table.name)
    if table.versioned:
        return [(prefix + r[0], _join_version(spec, r[1], r[2])) for r in batch]
    return [(prefix + r[0], r[1]) for r in batch]


@dataclass
class Found:
    """What a walk over a namespace found: the tables, and records no table claims."""

    names: list[str]
    foreign: int = 0
    first_foreign: bytes | None = None


def find_tables(
    spec: KvPrefix,
    seek: Callable[[bytes], bytes | None],
    count: Callable[[bytes, bytes | None], int],
    stop_at_foreign: bool,
) -> Found:
    """The tables of a namespace, found by skipping from one prefix to the next.

    Args:
        spec: the layout.
        seek: the first stored key at or after the key given, or None at the end.
        count: the number of stored keys from the first key up to the second (None:
            the end), for the records of a table that the layout's ``tables`` leaves out.
        stop_at_foreign: return at the first record no table claims (it will be refused).

    Returns:
        The names in byte order, and the records no table of the layout claims.
    """
    found = Found([])
    position = b""
    while True:
        key = seek(position)
        if key is None:
            return found
        name = parse_name(spec, key)
        if name == METADATA_NAMESPACE and spec.metadata_inline:  # the metadata, not a table
            end = prefix_end(spec.metadata_prefix())
            if end is None:
                return found
            position = end
            continue
        if name is not None and (spec.tables is None or name in spec.tables):
            found.names.append(name)
            end = prefix_end(spec.table_prefix(name))
            if end is None:
                return found
            position = end
            continue
        if found.first_foreign is None:
            found.first_foreign = key
        if stop_at_foreign:
            found.foreign += 1
            return found
        if name is None:
            found.foreign += 1
            position = key + b"\x00"
            continue
        start = spec.table_prefix(name)
        after = prefix_end(start)
        found.foreign += count(start, after)
        if after is None:
            return found
        position = after


def layout_tables(
    layout: Layout, meta: Mapping[str, bytes], names: Iterable[str]
) -> list[TableInfo]:
    """The tables: the names the keys show and those the metadata records (``kind:``).

    A table's recorded kind wins (a conversion or an upgrade wrote it: the example
    schema makes ``prefs`` versioned at its fourth revision, and a layout describing the
    app at head lists it); a table without one is versioned when the layout lists it.
    """
    kinds = {
        k[len(META_KIND_PREFIX) :]: v for k, v in meta.items() if k.startswith(META_KIND_PREFIX)
    }
    every = set(names) | set(kinds)
    return [
        TableInfo(
            n,
            TableKind.VERSIONED
            if kinds.get(n, b"versioned" if n in layout.versioned else b"plain") == b"versioned"
            else TableKind.PLAIN,
        )
        for n in sorted(every, key=lambda n: n.encode("utf-8"))
    ]


# --- guessing a layout (``statemigrate layout init``) ------------------------------------

# The separators a guess tries, in this order; of those that split every key, the one
# giving fewest tables wins ("events/1:2" is table "events", not "events/1").
SEPARATORS = ("/", ":", "|", "#", ".", "\x00")
GUESS_SEEKS = 10_000  # a guess walks this many prefixes at most
GUESS_VALUES = 100  # values sampled per table for "could carry a version"


@dataclass
class Guess:
    """A guessed prefix layout and the tables it found."""

    spec: KvPrefix
    found: Found


class _Enough(Exception):
    """The guess walked as far as it looks."""


def _walk_some(spec: KvPrefix, seek: Callable[[bytes], bytes | None]) -> Found | None:
    seeks = 0

    def counted(key: bytes) -> bytes | None:
        nonlocal seeks
        seeks += 1
        if seeks > GUESS_SEEKS:
            raise _Enough
        return seek(key)

    try:
        return find_tables(spec, counted, lambda s, e: 1, stop_at_foreign=True)
    except _Enough:
        return None


def guess_prefix(
    namespace: str,
    first: bytes,
    last: bytes,
    seeker: Callable[[], Callable[[bytes], bytes | None]],
) -> Guess | None:
    """The prefix template that splits every key of a namespace into fewest tables.

    The head is what the first and last keys share, cut after the separator tried;
    the name runs from there to that separator.

    Args:
        namespace: the namespace's name.
        first: its first key.
        last: its last key.
        seeker: makes a fresh "first key at or after" function over the namespace.

    Returns:
        The guess, or None when no separator splits every key (within GUESS_SEEKS).
    """
    n = 0
    while n < min(len(first), len(last)) and first[n] == last[n]:
        n += 1
    common = first[:n].decode("utf-8", "ignore")
    best: Guess | None = None
    for sep in SEPARATORS:
        head = common[: common.rfind(sep) + 1] if sep in common else ""
        spec = KvPrefix("prefix", namespace, head, sep, "none")
        found = _walk_some(spec, seeker())
        if found is None or found.foreign or not found.names:
            continue
        if best is None or len(found.names) < len(best.found.names):
            best = Guess(spec, found)
    return best


def may_be_versioned(guess: Guess, values: Callable[[bytes], Iterator[bytes]]) -> list[str]:
    """The tables (of the first 50) whose sampled values are all long enough for a version."""
    roomy = []
    for name in guess.found.names[:50]:
        sample = values(guess.spec.table_prefix(name))
        if all(len(v) >= _WIDTH for _, v in zip(range(GUESS_VALUES), sample)):
            roomy.append(name)
    return roomy


def guess_text(engine: str, store: str, guess: Guess, roomy: list[str], others: list[str]) -> str:
    """The layout file of a guess, with comments saying what the bytes cannot show."""
    spec = guess.spec
    template = spec.head + "{name}" + spec.separator
    encodings = ", ".join(e for e in VERSION_ENCODINGS if e != "none")
    could = ", ".join(roomy) or "none"
    lines = [
        f"# Guessed by `statemigrate layout init {engine} {store}`: check every line.",
        f'engine = "{engine}"',
        f"# Tables found: {', '.join(guess.found.names)}",
        "# Which tables are versioned, and how the version is stored, cannot be seen from",
        "# the bytes: list the versioned tables here and set kv.version below. Tables whose",
        f"# sampled values are all 8 bytes or longer (they could carry one): {could}",
        "versioned = []",
        "",
        "[kv]",
        'mode = "prefix"',
        f"namespace = {json.dumps(spec.namespace)}",
        f"prefix = {json.dumps(template)}  # names hold no {spec.separator!r}",
        f'version = "none"  # or one of {encodings}',
    ]
    if others:
        lines.append(
            "# Not in this layout (--skip-foreign-tables leaves them out): " + ", ".join(others)
        )
    return "\n".join(lines) + "\n"
