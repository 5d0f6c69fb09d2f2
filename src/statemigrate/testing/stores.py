"""Build, read and fingerprint whole stores through an engine's own reader and writer
(tests only): by engine class, or by registered name with the path the CLI recognises."""

from __future__ import annotations

import hashlib
import os
import random
from collections.abc import Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

from ..digest import Digest, batch_digest, store_digest
from ..engines.base import Engine
from ..model import Record, TableInfo, TableKind
from ..registry import get_engine

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


def expectation_as_data(expectation: Mapping[str, Any]) -> dict[str, Any]:
    """The tables of a crate-written fixture's expectation file (``"tables"``: each table's
    ``kind`` and ``records``, ``[key hex, value hex(, version)]``) in :func:`read_store`'s form."""
    out = {}
    for name, t in expectation["tables"].items():
        recs = [
            (bytes.fromhex(r[0]), bytes.fromhex(r[1]), *([r[2]] if len(r) == 3 else []))
            for r in t["records"]
        ]
        out[name] = (t["kind"], sorted(recs, key=lambda r: r[0]))
    return out


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


# Files that SQLite readers write by design (WAL read marks) and that hold no data.
COORDINATION_SUFFIXES = ("-shm",)


def store_file(engine: str, directory: Path, name: str = "store") -> Path:
    """A fresh path for a store of ``engine`` (with the suffix the CLI recognises)."""
    suffixes = get_engine(engine).suffixes
    return directory / f"{name}{suffixes[0] if suffixes else '.' + engine}"


def spec(engine: str, path: Path) -> str:
    """``ENGINE:PATH`` so the CLI never has to guess."""
    return f"{engine}:{path}"


def _records(table: TableInfo, count: int, seed: int) -> Iterator[list]:
    rnd = random.Random(seed)
    step = 10_000
    for start in range(0, count, step):
        batch: list = []
        for i in range(start, min(count, start + step)):
            key = b"k" + i.to_bytes(6, "big")  # keys 7 bytes: accepted by every engine
            value = rnd.randbytes(rnd.randint(0, 24))
            if table.versioned:
                batch.append((key, value, (i * 2654435761) % (2**64)))
            else:
                batch.append((key, value))
        yield batch


def build_store(
    engine: str | type[Engine],
    path: Path,
    records: int = 2_000,
    seed: int = 1,
    metadata: Mapping[str, bytes] | None = None,
) -> str:
    """Create a store of ``records`` small records in three tables; return its digest.

    Tables: ``events`` (versioned, 60%), ``settings`` (plain, the rest) and ``empty``.
    Keys are 7 bytes, values 0-24 random bytes, so every engine's limits are met.
    """
    eng = get_engine(engine) if isinstance(engine, str) else engine
    n_events = records * 3 // 5
    plan = [
        (TableInfo("empty"), 0),
        (TableInfo("events", TableKind.VERSIONED), n_events),
        (TableInfo("settings"), records - n_events),
    ]
    writer = eng.create_writer(path)
    parts = []
    try:
        writer.put_metadata(dict(metadata or {b"schema".decode(): b"safety-test"}))
        for table, count in sorted(plan, key=lambda p: p[0].name.encode()):
            writer.create_table(table)
            total = Digest()
            for batch in _records(table, count, seed + len(table.name)):
                writer.write_batch(table, batch)
                total = total + batch_digest(batch, table.versioned)
            parts.append((table.name, table.kind, total))
        writer.finish()
    finally:
        writer.close()
    return store_digest(parts)


def digest_of(engine: str, path: Path) -> str:
    """The store digest as read back through the engine's reader."""
    from .. import api

    return api.checksum(spec(engine, path)).digest


def store_exists(engine: str, path: Path) -> bool:
    """Whether anything of the store is at ``path``."""
    return bool(get_engine(engine).store_paths(path)) or path.exists() or path.is_symlink()


def files_sha256(engine: str, path: Path) -> dict[str, str]:
    """sha256 of every file of a store, sidecars included, SQLite's ``-shm`` excluded.

    The ``-shm`` file is SQLite's shared-memory index of the WAL: every reader writes
    its read marks there by design; it holds no data.
    """
    out: dict[str, str] = {}
    roots = get_engine(engine).store_paths(path)
    for root in roots:
        files = (
            [root]
            if root.is_file()
            else sorted(Path(r) / f for r, _d, fs in os.walk(root) for f in fs)
        )
        for f in files:
            if f.name.endswith(COORDINATION_SUFFIXES):
                continue
            out[str(f.relative_to(path.parent))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def leftovers(final: Path) -> list[str]:
    """Files a finished convert must not leave beside its destination."""
    names = [
        final.name + s
        for s in (
            ".partial",
            ".lock",
            ".swap",
            ".replaced",
            ".partial.checkpoint",
            ".partial.done",
            ".partial-wal",
            ".partial-journal",
        )
    ]
    return sorted(n for n in names if (final.parent / n).exists())


def write_content(engine: str, path: Path, content: Mapping[TableInfo, list]) -> Path:
    """Create a store holding exactly ``content`` (each table's records, sorted here)."""
    return write_store(get_engine(engine), path, content)
