"""The store's tables, found in the store itself, and its metadata label.

Every label present that is ``t`` + hex is a table (one grouped count over every node
finds them), and so is every table the metadata names; the kinds the metadata states
(``kind:<table>``, statemigrate's ``helixdb.table:<label>`` registry) must agree with
what the records show. See the package's notes (:mod:`statemigrate.engines.helixdb`).
"""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ...errors import DestinationError, SourceError
from ...fsutil import store_size
from ...model import METADATA_TABLE, TableInfo, TableKind
from .client import KIND_PREFIX, READ_TIMEOUT, TABLE_PREFIX, _Helix, label_of, name_of

KINDS = {b"plain": TableKind.PLAIN, b"versioned": TableKind.VERSIONED}
INDEX_WAIT_SECONDS = 300.0
SCAN_BYTES_PER_SECOND = 1 << 20  # the label count's deadline: ~10x slower than measured


def _read_meta(hx: _Helix) -> dict[str, bytes]:
    g = hx.helix.g
    rows = hx.read("m", g().n_with_label(METADATA_TABLE).value_map(["key", "value"]))
    return {r["key"]: base64.b64decode(r["value"]) for r in rows}


def _registry(meta: Mapping[str, bytes]) -> dict[str, dict[str, Any]]:
    return {
        k[len(TABLE_PREFIX) :]: json.loads(v) for k, v in meta.items() if k.startswith(TABLE_PREFIX)
    }


def scan_timeout(path: Path) -> float:
    """How long the label count may take: the store's size at SCAN_BYTES_PER_SECOND."""
    try:
        size = store_size(path)
    except OSError:
        size = 0
    return max(READ_TIMEOUT, size / SCAN_BYTES_PER_SECOND)


def label_counts(hx: _Helix, timeout: float = READ_TIMEOUT) -> dict[str, int]:
    """How many nodes each label present has: one grouped count over every node.

    HelixDB keeps no list of labels that a query can read, so this is the only way to
    see every label, including ones no metadata mentions.
    """
    helix = hx.helix
    rows = hx.read("c", helix.g().n(helix.NodeRef.all()).group_count("$label"), timeout)
    return {r["$label"]: int(r["count"]) for r in rows}


def has_edges(hx: _Helix) -> bool:
    """Whether the store holds any edge (the layout has none)."""
    helix = hx.helix
    return bool(hx.read("e", helix.g().e(helix.EdgeRef.all()).limit(1).id()))


def _declare(path: Path, kinds: dict[str, TableKind], name: str, kind: TableKind) -> None:
    if kinds.setdefault(name, kind) != kind:
        raise SourceError(f"{path}: the metadata gives table {name!r} two kinds")


def declared_tables(path: Path, meta: Mapping[str, bytes]) -> dict[str, TableKind]:
    """Tables the metadata names, with their kind: ``kind:<table>`` and statemigrate's own list."""
    kinds: dict[str, TableKind] = {}
    for key, raw in meta.items():
        if key.startswith(KIND_PREFIX):
            kind = KINDS.get(raw)
            if kind is None:
                raise SourceError(
                    f"{path}: metadata {key!r} is {raw[:32]!r}, not b'plain' or b'versioned'"
                )
            _declare(path, kinds, key[len(KIND_PREFIX) :], kind)
        elif key.startswith(TABLE_PREFIX):
            label = key[len(TABLE_PREFIX) :]
            try:
                entry = json.loads(raw)
                name, kind = entry["name"], TableKind(entry["kind"])
                if label_of(name) != label:
                    raise ValueError(f"name {name!r} is not the label's")
            except (ValueError, KeyError, TypeError, AttributeError) as exc:
                raise SourceError(f"{path}: metadata {key!r} is not a table entry ({exc})") from exc
            _declare(path, kinds, name, kind)
    return kinds


def observed_kind(hx: _Helix, label: str) -> TableKind:
    """The kind a label's records show: versioned when its first node has ``ver``."""
    rows = hx.read("p", hx.helix.g().n_with_label(label).limit(1).value_map(["ver"]))
    return TableKind.VERSIONED if rows and "ver" in rows[0] else TableKind.PLAIN


def _foreign_message(path: Path, labels: list[str], edges: bool) -> str:
    parts = []
    if labels:
        shown = ", ".join(repr(label) for label in sorted(labels)[:5])
        more = f" and {len(labels) - 5} more" if len(labels) > 5 else ""
        parts.append(f"node labels {shown}{more}")
    if edges:
        parts.append("edges")
    return (
        f"{path}: {' and '.join(parts)} not in statemigrate's layout "
        "(a label 't' + hex per table, the metadata label '__statemigrate__')"
    )


def discover_tables(
    hx: _Helix,
    path: Path,
    meta: Mapping[str, bytes],
    *,
    skip_foreign: bool,
    timeout: float = READ_TIMEOUT,
) -> tuple[list[TableInfo], dict[str, int]]:
    """The tables of a store, found in the store itself, and the node count of each.

    A table is a label present that is ``t`` + hex of its name, or a table the
    metadata names (a table without records has no label to find). Its kind is what
    its records show, and must agree with the metadata's where that states one.

    Args:
        hx: the open store.
        path: the store, for messages.
        meta: the store's metadata, layout keys included.
        skip_foreign: leave out labels not in the layout, and edges, instead of refusing.
        timeout: how long the count over every node may take (readers only).

    Returns:
        The tables in name byte order, and ``{name: nodes}`` for each of them.

    Raises:
        SourceError: foreign labels or edges (unless skipped), or kinds that disagree.
    """
    counts = label_counts(hx, timeout)
    found: dict[str, int] = {}
    foreign = []
    for label, nodes in counts.items():
        if label == METADATA_TABLE:
            continue
        name = name_of(label)
        if name is None:
            foreign.append(label)
        else:
            found[name] = nodes
    edges = has_edges(hx)
    if (foreign or edges) and not skip_foreign:
        raise SourceError(
            _foreign_message(path, foreign, edges),
            hint="convert them yourself, or pass --skip-foreign-tables to leave them out",
        )
    declared = declared_tables(path, meta)
    tables = []
    for name in sorted(set(found) | set(declared), key=lambda n: n.encode("utf-8")):
        kind = declared.get(name)
        if found.get(name):
            seen = observed_kind(hx, label_of(name))
            if kind is not None and kind != seen:
                raise SourceError(
                    f"{path}: table {name!r} is {kind.value} in the metadata, "
                    f"but its records are {seen.value}"
                )
            kind = seen
        assert kind is not None  # a table is found with nodes or declared with a kind
        tables.append(TableInfo(name, kind))
    return tables, {t.name: found.get(t.name, 0) for t in tables}


def index_state(hx: _Helix, op: str | None) -> str:
    """The state of a table's range-index build: "succeeded" when there is nothing to wait
    for (no operation recorded: the index was already active when the table was created)."""
    if not op:
        return "succeeded"
    status = hx.read("s", hx.helix.g().get_index_operation(op))
    state = status.get("status") if isinstance(status, dict) else None
    return state if isinstance(state, str) else "unknown"


def unbuilt_indexes(hx: _Helix, tables: list[dict[str, Any]]) -> set[str]:
    """The tables whose range index is not built now (checked once, never waited for).

    A build is queued or running only while the process that started it runs, or for
    good after that process was killed: HelixDB does not take it up again on a later
    open (seen with helix-db-embedded 0.3.3, a kill -9 during an upgrade). Such a table
    is read without its index (:func:`~.reader.sorted_by_scan`), never refused.
    """
    return {e["name"] for e in tables if index_state(hx, e.get("index_op")) != "succeeded"}


def wait_for_index(hx: _Helix, entry: Mapping[str, Any], path: Path, *, source: bool) -> None:
    """Wait until the range-index build this process started has finished."""
    deadline = time.monotonic() + INDEX_WAIT_SECONDS
    while True:
        state = index_state(hx, entry.get("index_op"))
        if state == "succeeded":
            return
        if state in ("aborted", "failed", "blocked") or time.monotonic() > deadline:
            err = SourceError if source else DestinationError
            raise err(f"{path}: the key index of table {entry['name']!r} is not usable ({state})")
        time.sleep(0.05)
