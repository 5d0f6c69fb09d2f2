"""RocksDB's namespaces as they are (its column families), for the layouts.

The raw reader and writer of :mod:`.._kv_mapping`: a column family is a namespace,
RocksDB's ``default`` column family the main one (``""``). Scans run from one
snapshot with an upper bound, their end confirmed (a damaged block ends rocksdict's
scan silently); writes are WriteBatches across column families, WAL off as the
default writer's, through the WAL where the layout asks it (table kinds).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

from ...errors import LayoutNotNeeded, SourceError
from ...layout import VERSION_ENCODINGS
from ...model import META_KIND_PREFIX, METADATA_TABLE, TableInfo
from .._kv_layout import SEPARATORS, guess_prefix, guess_text, may_be_versioned, prefix_end
from .._kv_mapping import MAIN, Op, RawKv, RawKvWriter
from .engine import RocksdbEngine
from .families import CONFIG, DEFAULT_CF, driver_options
from .reader import RocksdbReader
from .scan import checked_read_options, seek_past
from .writer import RocksdbWriter


def _ranged_options(upper: bytes | None) -> Any:
    ro = checked_read_options()
    if upper is not None:
        ro.set_iterate_upper_bound(upper)
    return ro


def _family(ns: str) -> str:
    return DEFAULT_CF if ns == MAIN else ns


class _RawScans(RawKv):
    """The raw reads both sides share."""

    # Each side's own: its column family by name, the families, whether one is empty.
    _cf: Callable[[str], Any]
    _families: Callable[[], list[str]]
    _is_empty: Callable[[str], bool]

    def raw_namespaces(self) -> list[str]:
        out = []
        for name in self._families():
            if name == DEFAULT_CF:
                if not self._is_empty(DEFAULT_CF):
                    out.append(MAIN)
            else:
                out.append(name)
        return out

    def raw_seek(self, ns: str, key: bytes) -> bytes | None:
        it = self._cf(_family(ns)).iter(checked_read_options())
        try:
            it.seek(key)
            if it.valid():
                return bytes(it.key())
            it.status()
            return None
        finally:
            del it

    def raw_items(self, ns: str, start: bytes, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        view = self._cf(_family(ns))
        snapshot = view.snapshot() if hasattr(view, "snapshot") else view
        try:
            # The options (and their bound) are kept alive while the scan runs: rocksdict
            # does not keep the bound alive itself. Given a temporary, a scan stopped
            # early in 20 runs of 20 (caught by raw_confirm: exit 4), none of 20 kept.
            ro = _ranged_options(end)
            items = snapshot.items(from_key=start, read_opt=ro)
            yield from items
            del items
        finally:
            del snapshot

    def raw_count(self, ns: str, start: bytes, end: bytes | None) -> int:
        ro = _ranged_options(end)  # kept alive while the scan runs (see raw_items)
        return sum(1 for _ in self._cf(_family(ns)).keys(from_key=start, read_opt=ro))

    def raw_confirm(self, ns: str, start: bytes, end: bytes | None, last: bytes | None) -> None:
        where = f"{self.path} column family {_family(ns)!r}"
        with self.errors(where=where, failed="{where}: the scan stopped early ({text})"):
            it = self._cf(_family(ns)).iter(checked_read_options())
            try:
                if last is not None:
                    seek_past(it, last, where)
                else:
                    it.seek(start)
                early = it.valid() and (end is None or it.key() < end)
                it.status()
                if early:
                    raise SourceError(f"{where}: the scan stopped before the last record")
            finally:
                del it


class RawRocksdbReader(_RawScans, RocksdbReader):
    """A read-only RocksDB instance (one snapshot) whose column families are read as they are."""

    def __init__(self, engine: type[RocksdbEngine], path: Path):
        self._kept: list[tuple[Any, Any]] = []  # what each scan's iterator needs alive
        super().__init__(engine, path)

    def _read_meta(self, names: list[str]) -> dict[str, bytes]:
        self._listed = list(names)
        return {}

    def _list(self, names: list[str]) -> list[TableInfo]:
        return []

    def _families(self) -> list[str]:
        return self._listed

    def raw_items(self, ns: str, start: bytes, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        """rocksdict's own iterator, handed over as it is (no Python step per record).

        Its snapshot and bounded read options stay alive until the reader closes:
        rocksdict keeps neither alive itself (see :meth:`_RawScans.raw_items`), and the
        caller holds only the iterator.
        """
        view = self._cf(_family(ns))
        snapshot = view.snapshot()
        ro = _ranged_options(end)
        self._kept.append((snapshot, ro))
        return snapshot.items(from_key=start, read_opt=ro)  # type: ignore[no-any-return]

    def raw_facts(self, ns: str) -> dict[str, Any]:
        return {"column family": _family(ns)}

    def close(self) -> None:
        self._kept.clear()
        super().close()


class RawRocksdbWriter(_RawScans, RocksdbWriter, RawKvWriter):
    """RocksDB's writer over column families as they are (none made but those asked for)."""

    def _metadata_family(self) -> bool:
        return False

    def _families(self) -> list[str]:
        return self._names()

    def _is_empty(self, name: str) -> bool:
        it = self._cf(name).iter(checked_read_options())
        try:
            it.seek_to_first()
            if it.valid():
                return False
            it.status()
            return True
        finally:
            del it

    def raw_create(self, ns: str) -> None:
        with self.errors(failed=f"{{path}}: cannot create column family {ns!r} ({{text}})"):
            self.db.create_column_family(ns, self.opts)
        self._settle_config()  # rocksdict rewrites its config with each family

    def raw_write(self, ops: list[Op], *, durable: bool = False) -> None:
        wb = self.rd.WriteBatch(raw_mode=True)
        handles: dict[str, Any] = {}
        for ns, key, value in ops:
            if ns == MAIN:
                wb.put(key, value) if value is not None else wb.delete(key)
                continue
            handle = handles.get(ns)
            if handle is None:
                handle = handles[ns] = self._handle(ns)
            wb.put(key, value, handle) if value is not None else wb.delete(key, handle)
        with self.errors(failed="{path}: write failed ({text})"):
            self.db.write(wb, self.wal_opts if durable else self.write_opts)

    def raw_put_sorted(self, ns: str, pairs: list[tuple[bytes, bytes]], extra: list[Op]) -> None:
        wb = self.rd.WriteBatch(raw_mode=True)
        if ns == MAIN:
            for k, v in pairs:
                wb.put(k, v)
        else:
            handle = self._handle(ns)
            for k, v in pairs:
                wb.put(k, v, handle)
        for ens, key, value in extra:
            if ens == MAIN:
                wb.put(key, value) if value is not None else wb.delete(key)
            else:
                h = self._handle(ens)
                wb.put(key, value, h) if value is not None else wb.delete(key, h)
        with self.errors(failed="{path}: write failed ({text})"):
            self.db.write(wb, self.write_opts)

    def raw_delete_range(self, ns: str, start: bytes, end: bytes | None) -> None:
        if end is None and ns != MAIN:
            self._handles.pop(ns, None)
            import gc

            gc.collect()
            with self.errors(failed=f"{{path}}: cannot drop column family {ns!r} ({{text}})"):
                self.db.drop_column_family(ns)
            self._settle_config()
            return
        wb = self.rd.WriteBatch(raw_mode=True)
        stop = end
        if stop is None:  # the whole main namespace: up to after its last key
            last = self._cf(DEFAULT_CF).iter(checked_read_options())
            last.seek_to_last()
            stop = bytes(last.key()) + b"\x00" if last.valid() else None
            del last
            if stop is None:
                return
        if ns == MAIN:
            wb.delete_range(start, stop)
        else:
            wb.delete_range(start, stop, self._handle(ns))
        with self.errors(failed="{path}: delete failed ({text})"):
            self.db.write(wb, self.wal_opts)

    def raw_finish(self) -> None:
        RocksdbWriter.finish(self)

    def raw_sync(self) -> None:
        RocksdbWriter.sync(self)

    def raw_backup(self, path: Path) -> None:
        RocksdbWriter.backup(self, path)


# --- layout init -------------------------------------------------------------------------


def _first_and_last(view: Any) -> tuple[bytes, bytes]:
    it = view.iter(checked_read_options())  # freed when this returns
    it.seek_to_first()
    first = bytes(it.key()) if it.valid() else b""
    it.seek_to_last()
    last = bytes(it.key()) if it.valid() else b""
    return first, last


def _seeker(view: Any) -> Callable[[bytes], bytes | None]:
    it = view.iter(checked_read_options())  # freed with the function

    def seek(key: bytes) -> bytes | None:
        it.seek(key)
        return bytes(it.key()) if it.valid() else None

    return seek


def _values(view: Any, prefix: bytes) -> Iterator[bytes]:
    ro = _ranged_options(prefix_end(prefix))  # kept alive while the scan runs (see scan)
    yield from view.values(from_key=prefix, read_opt=ro)


def guess_layout(engine: type[RocksdbEngine], path: Path) -> str:
    """A ``[kv]`` layout guessed from an existing RocksDB store, as TOML with comments
    saying what was seen and what cannot be.

    Without statemigrate's metadata family (an app's own store): one family of keys
    that split into table prefixes is a ``prefix`` layout (:func:`.._kv_layout.guess_text`);
    otherwise each column family is one table (``namespaces``; the default family alone,
    as ``ldb`` or ``DB::Open`` writes it, is table ``data``), with ``metadata = "none"``
    so that a store written back has the app's families and nothing else. A store with
    statemigrate's metadata family gets the prefix guess as before.

    Raises:
        LayoutNotNeeded: the store is in statemigrate's own layout (its metadata family,
            every table it records a kind of a column family of its own).
        SourceError: a comparator that is not bytewise (exit 4); with statemigrate's
            metadata, no column family holds keys that split into table prefixes.
    """
    rd = engine.require_driver()
    engine.refuse_if_held(path)  # what the engine's reader refuses (refuses_held)
    with RocksdbReader(engine, path) as reader:  # refuses a comparator not bytewise
        assert reader.shadow is not None
        listed = list(rd.Rdict.list_cf(str(reader.shadow), driver_options(rd)))
        names = [n for n in listed if n != METADATA_TABLE]
        # A store written through a layout records the kind of each of its state tables,
        # which are not column families; the default layout's tables all are.
        kinds = [k for k in reader.raw_metadata() if k.startswith(META_KIND_PREFIX)]
        if METADATA_TABLE in listed and all(k[len(META_KIND_PREFIX) :] in names for k in kinds):
            raise LayoutNotNeeded(
                f"{path}: in statemigrate's own layout already (a column family per table and "
                f"{METADATA_TABLE!r}): no layout file is needed",
                hint="convert it without --source-layout",
            )
        candidates = [n for n in names if not reader._is_empty(n)]
        own = METADATA_TABLE in listed
        tried = candidates if own else candidates[:1] if len(candidates) == 1 else []
        guess = None
        for ns in sorted(tried, key=lambda n: n != DEFAULT_CF):
            view = reader._cf(ns)
            guess = guess_prefix(ns, *_first_and_last(view), partial(_seeker, view))
            if guess is not None:
                break
        if guess is None and own:
            raise SourceError(
                f"{path}: no column family holds keys that split into table prefixes "
                f"(a name, then one of {', '.join(map(repr, SEPARATORS))}, in every key)",
                hint="write the layout file by hand (README: Your app's own layout)",
            )
        if guess is not None:
            roomy = may_be_versioned(guess, lambda prefix: _values(view, prefix))
            others = [n for n in names if n != guess.spec.namespace and n in candidates]
            text = guess_text(
                "rocksdb", path.name, guess, roomy, [f"column family {n!r}" for n in others]
            )
            if not own:  # the app's store: nothing of statemigrate's written into it either
                text = text.replace("\n\n[kv]\n", f"\n{_NO_METADATA}\n\n[kv]\n", 1)
            return text
    return _namespaces_text(path, names, candidates, _rocksdict_config(path))


_NO_METADATA = (
    "# Nothing of statemigrate's in the store: a store written has these families only.\n"
    'metadata = "none"'
)


def _rocksdict_config(path: Path) -> dict[str, Any] | None:
    """The store's ``rocksdict-config.json``, read (None: there is none)."""
    config = path / CONFIG
    if config.is_symlink() or not config.is_file():
        return None
    try:
        loaded = json.loads(config.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return loaded if isinstance(loaded, dict) else {}


def _namespaces_text(
    path: Path, names: list[str], candidates: list[str], config: dict[str, Any] | None
) -> str:
    """The ``namespaces`` layout of every column family: the app's shape exactly."""
    alone = names == [DEFAULT_CF]
    families = [n for n in names if n != DEFAULT_CF or alone or DEFAULT_CF in candidates]
    tables = {("data" if alone else n): ("" if n == DEFAULT_CF else n) for n in families}
    shown = ", ".join(f"{json.dumps(t)} = {json.dumps(ns)}" for t, ns in tables.items())
    encodings = ", ".join(e for e in VERSION_ENCODINGS if e != "none")
    lines = [
        f"# Guessed by `statemigrate layout init rocksdb {path.name}`: check every line.",
        'engine = "rocksdb"',
        f"# Column families found: {', '.join(names)}"
        + ("" if alone else " (each one table; the default family is table 'default')"),
        "# Which tables are versioned, and how the version is stored, cannot be seen from",
        "# the bytes: list the versioned tables here and set kv.version below.",
        "versioned = []",
        _NO_METADATA,
        "",
        "[kv]",
        'mode = "namespaces"',
        f"tables = {{ {shown} }}",
        f'version = "none"  # or one of {encodings}',
    ]
    if DEFAULT_CF in names and DEFAULT_CF not in families:
        lines.insert(3, "# The default column family is empty (RocksDB always has it): no table.")
    if config is not None:
        if config.get("raw_mode") is True and not config.get("prefix_extractors"):
            lines.append("# rocksdict's rocksdict-config.json is in the store: kept in one written")
            lines.append("rocksdict_config = true")
        else:
            lines.append(
                "# rocksdict-config.json is not rocksdict's raw mode without prefix extractors"
                f" ({json.dumps(config)[:60]}): a store written here has none"
            )
    return "\n".join(lines) + "\n"
