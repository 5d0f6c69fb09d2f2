"""Build and read whole stores through an engine's own reader and writer (tests only)."""

from __future__ import annotations

import hashlib
import os
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ..digest import Digest, batch_digest, store_digest
from ..engines.base import Engine
from ..model import Record, TableInfo

Content = Mapping[TableInfo, Sequence[Record]]


def store_path(engine: type[Engine], tmp: Path, name: str = "store") -> Path:
    """A fresh path for a store of ``engine`` below ``tmp``."""
    return tmp / f"{name}.{engine.name}"


def write_store(
    engine: type[Engine],
    path: Path,
    content: Content,
    metadata: Mapping[str, bytes] | None = None,
    batch: int = 1000,
    options: Mapping[str, Any] | None = None,
) -> Path:
    """Create a store at ``path`` holding ``content`` (records sorted here) and ``metadata``."""
    writer = engine.create_writer(path, options)
    try:
        if metadata:
            writer.put_metadata(dict(metadata))
        for table in sorted(content, key=lambda t: t.name.encode()):
            writer.create_table(table)
            records = sorted(content[table], key=lambda r: r[0])
            for i in range(0, len(records), batch):
                writer.write_batch(table, records[i : i + batch])
        writer.finish()
    finally:
        writer.close()
    return path


def read_store(
    engine: type[Engine], path: Path, options: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """Every table's kind and records, and the metadata, as plain data."""
    with engine.open_reader(path, options) as reader:
        tables = {}
        for t in reader.tables():
            records: list[Record] = []
            for b in reader.read_batches(t):
                records.extend(b)
            tables[t.name] = (t.kind.value, records)
        return {"tables": tables, "metadata": reader.metadata()}


def content_as_data(content: Content) -> dict[str, Any]:
    """``content`` in the form :func:`read_store` returns (tables only)."""
    return {t.name: (t.kind.value, sorted(recs, key=lambda r: r[0])) for t, recs in content.items()}


def content_digest(content: Content) -> str:
    """The contract's store digest of ``content``."""
    parts = []
    for t, recs in content.items():
        d = batch_digest(sorted(recs, key=lambda r: r[0]), t.versioned) if recs else Digest()
        parts.append((t.name, t.kind, d))
    return store_digest(parts)


def tree_sha256(path: Path) -> dict[str, str]:
    """sha256 of every file of a store (a file, or every file below a directory)."""
    out = {}
    files = (
        [path] if path.is_file() else sorted(Path(r) / f for r, _d, fs in os.walk(path) for f in fs)
    )
    for f in files:
        out[str(f.relative_to(path.parent))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out
