"""Writing a store: one HelixDB write batch per batch, records and metadata together."""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ...errors import DestinationError, StoreBusyError
from ...locks import busy_message, lock_exclusively, pid_text
from ...model import METADATA_TABLE, Batch, TableInfo
from .. import snapshot
from ..base import Writer
from .client import (
    DB_NAME,
    FULL_MARGIN,
    HELIX_FACTS,
    I64_MAX,
    KIND_PREFIX,
    LOCK_NAME,
    TABLE_PREFIX,
    U64,
    _Helix,
    database_of,
    helix_safe,
    label_of,
    other_helix_process,
)
from .reader import read_table
from .tables import _read_meta, _registry, discover_tables, index_state, wait_for_index

if TYPE_CHECKING:
    from .engine import HelixdbEngine


class HelixdbWriter(Writer):
    """Each batch is one write batch (records and metadata together)."""

    facts = HELIX_FACTS

    def __init__(self, engine: type[HelixdbEngine], path: Path, create: bool):
        self.path = path
        self.lock_fd: int | None = None
        self.engine = engine
        if create:
            if path.exists() or path.is_symlink():
                raise DestinationError(f"{path}: already exists")
            try:
                path.mkdir()
            except OSError as exc:
                raise DestinationError(f"{path}: cannot create ({exc.strerror})") from exc
            database = path / DB_NAME
        else:
            found = database_of(path)
            if found is None:
                raise DestinationError(f"{path}: not a HelixDB store")
            if found == path and not helix_safe(path.name):
                raise DestinationError(
                    f"{path}: HelixDB would encode this database name and write elsewhere",
                    hint="rename the directory to ASCII letters, digits, '-', '_' and '.'",
                )
            database = found
        self._lock()
        pid = None if create else other_helix_process(path)
        if pid is not None:
            self._unlock()
            raise StoreBusyError(busy_message(path, pid))
        try:
            with self.errors("opening for writing"):
                self.hx = _Helix(engine, database, reader=False)
        except BaseException:
            self._unlock()
            raise
        self.helix = self.hx.helix
        with self.opening("reading metadata"):
            self._meta = _read_meta(self.hx)
            # Foreign labels are left alone: a writer touches only the tables it is given.
            tables: list[TableInfo] = []
            if not create:
                tables = discover_tables(self.hx, path, self._meta, skip_foreign=True)[0]
        self._tables = {t.name: t for t in tables}
        # The index builds this writer started (the only ones worth waiting for: a build
        # a killed writer left queued is never taken up again; see unbuilt_indexes).
        self._building: set[str] = set()
        g, PI = self.helix.g, self.helix.PropertyInput
        self._meta_body = self.helix.write_batch().var_as(
            "m", g().add_n(METADATA_TABLE, [("key", PI.param("key")), ("value", PI.param("value"))])
        )

    def _lock(self) -> None:
        lock = self.path / LOCK_NAME
        # A held store was refused before (HelixdbEngine.refuses_held); one that another
        # writer took since is refused below, when the lock is not ours.
        # Never through a link (it is truncated below): Engine.open_for_writing refused
        # one planted before; this refuses one put there since (ELOOP).
        flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_BINARY", 0)
        try:
            fd = os.open(lock, flags, 0o644)
        except OSError as exc:
            raise DestinationError(f"{lock}: cannot open the writer lock ({exc.strerror})") from exc
        try:
            lock_exclusively(fd)
        except OSError as exc:
            holder = self.facts.holder(self.path)
            if holder is None or holder < 0:  # no probe sees the lock (Windows)
                text = pid_text(fd) or ""
                holder = int(text) if text.isdigit() else holder
            os.close(fd)
            raise StoreBusyError(busy_message(self.path, holder)) from exc
        os.ftruncate(fd, 0)
        os.write(fd, str(os.getpid()).encode())
        self.lock_fd = fd

    def _unlock(self) -> None:
        if self.lock_fd is not None:
            if os.name == "nt":
                # Windows removes no file that is open: the lock goes first.
                os.close(self.lock_fd)
                with contextlib.suppress(OSError):
                    (self.path / LOCK_NAME).unlink(missing_ok=True)
            else:
                (self.path / LOCK_NAME).unlink(missing_ok=True)
                os.close(self.lock_fd)
            self.lock_fd = None

    def _run(self, batch: Any, doing: str, **params: Any) -> None:
        with self.errors(doing):
            self.hx.query(batch, **params)

    def _with_meta(
        self, batch: Any, metadata: Mapping[str, bytes | None]
    ) -> tuple[Any, dict[str, Any]]:
        g, SP = self.helix.g, self.helix.SourcePredicate
        rows = []
        for i, (key, value) in enumerate(metadata.items()):
            batch = batch.var_as(
                f"d{i}", g().n_with_label_where(METADATA_TABLE, SP.eq("key", key)).drop()
            )
            if value is not None:
                rows.append({"key": key, "value": base64.b64encode(value).decode()})
        params: dict[str, Any] = {}
        if rows:
            batch = batch.for_each_param("meta", self._meta_body)
            params["meta"] = rows
        return batch, params

    def _commit_meta(self, metadata: Mapping[str, bytes | None]) -> None:
        for key, value in metadata.items():
            if value is None:
                self._meta.pop(key, None)
            else:
                self._meta[key] = value

    def list_tables(self) -> list[TableInfo]:
        return sorted(self._tables.values(), key=lambda t: t.name.encode("utf-8"))

    def raw_metadata(self) -> dict[str, bytes]:
        return dict(self._meta)

    def create_table(self, table: TableInfo) -> None:
        label = label_of(table.name)
        spec = self.helix.IndexSpec.node_range(label, "k")
        with self.errors(f"creating table {table.name!r}"):
            answer = self.hx.query(
                self.helix.write_batch()
                .var_as("ix", self.helix.g().create_index_if_not_exists(spec))
                .returning(["ix"])
            )
        receipt = answer.get("ix", {})
        op = receipt.get("operation_id")
        if op and receipt.get("kind", "accepted") == "accepted":
            self._building.add(op)
        entry = {"name": table.name, "kind": table.kind.value, "index_op": op}
        # kind: is what DESIGN.md documents (an empty table has no other trace).
        self.put_metadata(
            {
                TABLE_PREFIX + label: json.dumps(entry).encode(),
                KIND_PREFIX + table.name: table.kind.value.encode(),
            }
        )
        self._tables[table.name] = TableInfo(table.name, table.kind)

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        g, PI = self.helix.g, self.helix.PropertyInput
        props = [("k", PI.param("k")), ("v", PI.param("v"))]
        if table.versioned:
            props.append(("ver", PI.param("ver")))
            rows = [
                {
                    "k": k.hex(),
                    "v": base64.b64encode(v).decode(),
                    "ver": ver - U64 if ver > I64_MAX else ver,
                }
                for k, v, ver in batch
            ]
        else:
            rows = [{"k": r[0].hex(), "v": base64.b64encode(r[1]).decode()} for r in batch]
        need = (
            int(sum(len(r[0]) + len(r[1]) for r in batch) * self.engine.space_factor) + FULL_MARGIN
        )
        try:
            free = shutil.disk_usage(self.path).free
        except OSError:
            free = need
        if free < need:  # HelixDB would retry a write on a full disk forever
            raise DestinationError(
                f"{self.path}: disk full: {free:,} bytes free, this batch needs about {need:,}",
                hint="free some space, then run the same command with --resume",
            )
        body = self.helix.write_batch().var_as("n", g().add_n(label_of(table.name), props))
        query = self.helix.write_batch().for_each_param("rows", body)
        query, params = self._with_meta(query, metadata or {})
        self._run(query, f"writing table {table.name!r}", rows=rows, **params)
        self._commit_meta(metadata or {})

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        query, params = self._with_meta(self.helix.write_batch(), metadata)
        self._run(query, "writing metadata", **params)
        self._commit_meta(metadata)

    # In-place methods (schema upgrades); no multi-step transaction (each write batch
    # commits on its own), so upgrades stage their work and rename by copying.

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        entry = _registry(self._meta).get(label_of(table.name))
        indexed = True
        if entry is not None:
            if entry.get("index_op") in self._building:
                wait_for_index(self.hx, entry, self.path, source=False)
            else:
                indexed = index_state(self.hx, entry.get("index_op")) == "succeeded"
        yield from read_table(
            self.hx, self.path, table, after, max_records, max_bytes, indexed=indexed
        )

    def drop_table(self, name: str) -> None:
        label = label_of(name)
        if name not in self._tables:
            return
        # The range index stays: a table created again under the name finds it active.
        query = self.helix.write_batch().var_as("x", self.helix.g().n_with_label(label).drop())
        gone: dict[str, bytes | None] = {TABLE_PREFIX + label: None, KIND_PREFIX + name: None}
        query, params = self._with_meta(query, gone)
        self._run(query, f"dropping table {name!r}", **params)
        self._commit_meta(gone)
        del self._tables[name]

    def backup(self, path: Path) -> None:
        """A copy taken with the database closed, so that everything written is on disk."""
        engine = self.engine
        database = self.hx.path
        self.hx.close()
        try:
            snapshot.replicate(
                self.path, path, lambda f: "skip" if f.rel == Path(LOCK_NAME) else "copy"
            )
        except OSError as exc:
            raise DestinationError(f"{path}: cannot write the backup ({exc})") from exc
        finally:
            self.hx = _Helix(engine, database, reader=False)
            self.helix = self.hx.helix

    def finish(self) -> None:
        with self.errors("waiting for index builds"):
            for entry in _registry(self._meta).values():
                if entry.get("index_op") in self._building:
                    wait_for_index(self.hx, entry, self.path, source=False)

    def close(self) -> None:
        hx = getattr(self, "hx", None)
        try:
            if hx is not None:
                self.hx = None  # type: ignore[assignment]
                hx.close()
        finally:
            self._unlock()
