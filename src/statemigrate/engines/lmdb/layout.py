"""LMDB's namespaces as they are (its named databases and the unnamed one), for the layouts.

The raw reader and writer of :mod:`.._kv_mapping`: a named database is a namespace,
LMDB's unnamed database the main one (``""``; its entries that name the named
databases are LMDB's, never records). The reader reads in its one read transaction
and refuses a read a writer changed under it, as the default reader; the writer
commits each step in one write transaction (inside an upgrade's transaction, there).
"""

from __future__ import annotations

import contextlib
import itertools
import json
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any

from ...errors import DestinationError, LayoutNotNeeded, SourceError
from ...model import METADATA_TABLE, TableInfo
from .._kv_layout import guess_prefix, guess_text, may_be_versioned
from .._kv_mapping import MAIN, Op, RawKv, RawKvWriter
from .engine import LmdbEngine
from .flags import Codec, db_flags, flags_of, open_kwargs, table_meta
from .reader import LmdbReader
from .writer import LmdbWriter, put_flagged, stored_pairs

_CHECK_EVERY = 4096  # pairs between two checks that no writer changed the snapshot


class _RawCursors(RawKv):
    """The raw reads both sides share, over a transaction each side provides."""

    dbs: dict[str, Any]
    env: Any
    # A flagged database's codec (:mod:`.flags`): its pairs are shown as the model's
    # records (a DUPSORT database's as a multimap table's), in LMDB's order.
    codecs: dict[str, Codec]

    def _txn(self) -> Any:
        raise NotImplementedError

    def _checked(self) -> None:
        """Refuse a read a writer changed (the reader's check; nothing for the writer)."""

    def _refuse_flagged_main(self) -> None:
        """Refuse (exit 4) an unnamed database with flags: its records would be read as
        plain ones (a named database's flags are read, the unnamed one's are not)."""
        with self._using() as txn:
            flags = db_flags(self.env.open_db(None), txn)
        if flags:
            shown = ", ".join(f.upper().replace("_", "") for f in flags)
            raise SourceError(
                f"{self.path}: LMDB's unnamed database is {shown}: flags on the unnamed "
                "database are not supported (a named database's are)"
            )

    def _main_has_records(self, txn: Any) -> bool:
        cur = txn.cursor()
        more = cur.first()
        while more:
            if cur.key().decode("utf-8", "replace") not in self.dbs:
                return True
            more = cur.next()
        return False

    def raw_namespaces(self) -> list[str]:
        with self._using() as txn:
            main = [MAIN] if self._main_has_records(txn) else []
        return main + list(self.dbs)

    def _using(self) -> AbstractContextManager[Any]:
        return contextlib.nullcontext(self._txn())

    def _cursor(self, txn: Any, ns: str) -> Any:
        return txn.cursor() if ns == MAIN else txn.cursor(self.dbs[ns])

    def _skip(self, ns: str, key: bytes) -> bool:
        """A key of the unnamed database that names a named database (LMDB's, not a record)."""
        if ns != MAIN or not self.dbs:
            return False
        try:
            return key.decode("utf-8") in self.dbs
        except UnicodeDecodeError:
            return False

    def raw_table_meta(self, ns: str) -> dict[str, Any]:
        """A flagged database's flags, as its table's meta."""
        codec = self.codecs.get(ns)
        return table_meta(codec.flags) if codec is not None else {}

    def _flagged_items(
        self, ns: str, codec: Codec, start: bytes, end: bytes | None
    ) -> Iterator[tuple[bytes, bytes]]:
        with self._using() as txn:
            cur = self._cursor(txn, ns)
            if not codec.seek(cur, start):
                return
            for n, (key, value) in enumerate(codec.pairs(cur.iternext()), 1):
                if end is not None and key >= end:
                    break
                yield key, value
                if n % _CHECK_EVERY == 0:
                    self._checked()
            self._checked()

    def raw_seek(self, ns: str, key: bytes) -> bytes | None:
        codec = self.codecs.get(ns)
        if codec is not None:
            return next((k for k, _ in self._flagged_items(ns, codec, key, None)), None)
        with self._using() as txn:
            cur = self._cursor(txn, ns)
            more = cur.set_range(key)
            while more and self._skip(ns, bytes(cur.key())):
                more = cur.next()
            return bytes(cur.key()) if more else None

    def raw_items(self, ns: str, start: bytes, end: bytes | None) -> Iterator[tuple[bytes, bytes]]:
        codec = self.codecs.get(ns)
        if codec is not None:
            yield from self._flagged_items(ns, codec, start, end)
            return
        if ns != MAIN or not self.dbs:  # no entry to skip: LMDB's own loop, bounded
            with self._using() as txn:
                cur = self._cursor(txn, ns)
                if cur.set_range(start):
                    pairs = cur.iternext()
                    if end is None:
                        yield from pairs
                    else:
                        yield from itertools.takewhile(lambda kv: kv[0] < end, pairs)
            return
        with self._using() as txn:
            cur = self._cursor(txn, ns)
            more = cur.set_range(start)
            n = 0
            while more:
                key = bytes(cur.key())
                if end is not None and key >= end:
                    break
                if not self._skip(ns, key):
                    yield key, bytes(cur.value())
                    n += 1
                    if n % _CHECK_EVERY == 0:
                        self._checked()
                more = cur.next()
            self._checked()

    def raw_confirm(self, ns: str, start: bytes, end: bytes | None, last: bytes | None) -> None:
        self._checked()

    def raw_checked(self) -> None:
        self._checked()

    def raw_facts(self, ns: str) -> dict[str, Any]:
        with self._using() as txn:
            db = None if ns == MAIN else self.dbs[ns]
            flags = txn.stat(db) if db is not None else txn.stat()
        codec = self.codecs.get(ns)
        return {"entries": flags.get("entries"), "flags": codec.flags if codec else []}


class RawLmdbReader(_RawCursors, LmdbReader):
    """A read-only LMDB environment (one read transaction) read as its databases are."""

    raw = True

    def __init__(self, engine: type[LmdbEngine], path: Path):
        super().__init__(engine, path)
        self.snapshot_tables = []
        self.snapshot_metadata = {}
        try:
            self._refuse_flagged_main()
        except BaseException:
            self.close()
            raise

    def _read_meta(self) -> dict[str, bytes]:
        return {}

    def _txn(self) -> Any:
        return self.txn

    def _checked(self) -> None:
        self._check_unchanged()

    def raw_native_digests(self, tables: list[tuple[str, TableInfo]]) -> list[Any] | None:
        """The page walk of :meth:`LmdbReader.native_digests`, each table's database by name
        (none where a database has flags: the walk reads pairs as stored)."""
        return LmdbReader.native_digests(self, [TableInfo(ns, t.kind) for ns, t in tables])


class RawLmdbWriter(_RawCursors, LmdbWriter, RawKvWriter):
    """LMDB's writer over its databases as they are (none made but those asked for)."""

    raw = True

    def __init__(
        self, engine: type[LmdbEngine], path: Path, create: bool, subdir: bool | None = None
    ):
        super().__init__(engine, path, create, subdir)
        self.max_key_len = engine.capabilities.max_key_len
        self.declared: dict[str, list[str]] = {}  # flags of databases about to be made
        try:
            self._refuse_flagged_main()
        except SourceError as exc:
            self.close()
            raise DestinationError(exc.message) from exc

    def _txn(self) -> Any:
        return self._outer

    def _using(self) -> AbstractContextManager[Any]:
        if self._outer is not None:
            return contextlib.nullcontext(self._outer)
        return self._own_read()

    @contextlib.contextmanager
    def _own_read(self) -> Iterator[Any]:
        txn = self.env.begin(buffers=False)
        try:
            yield txn
        finally:
            txn.abort()

    def raw_declare(self, ns: str, meta: dict[str, Any]) -> None:
        """The flags database ``ns`` gets when it is made: those its table's meta records."""
        flags = flags_of(meta, self.path)
        if flags and ns == MAIN:
            raise DestinationError(
                f"{self.path}: LMDB's unnamed database cannot be given flags "
                f"({', '.join(flags)}) here; name a database for the table in the layout"
            )
        self.declared[ns] = flags

    def raw_create(self, ns: str) -> None:
        if len(self.dbs) >= self.max_dbs and self._outer is None:
            self._reopen(max_dbs=self.max_dbs * 2)
        flags = self.declared.get(ns, [])

        def work(txn: Any) -> None:
            self.dbs[ns] = self.env.open_db(ns.encode("utf-8"), txn=txn, **open_kwargs(flags))

        self._tx(work)
        if flags:
            self.codecs[ns] = Codec(flags)

    def _put_flagged(self, txn: Any, ns: str, pairs: list[tuple[bytes, bytes]]) -> None:
        codec = self.codecs[ns]
        stored = stored_pairs(codec, pairs, f"{self.path}: database {ns!r}")  # type: ignore[arg-type]
        put_flagged(txn.cursor(self.dbs[ns]), codec, stored)

    def _delete_flagged(self, txn: Any, ns: str, key: bytes) -> None:
        codec = self.codecs[ns]
        stored = stored_pairs(codec, [(key, b"")], f"{self.path}: database {ns!r}")  # type: ignore[list-item]
        k, v = stored[0]
        txn.delete(k, v if codec.dupsort else b"", db=self.dbs[ns])

    def raw_write(self, ops: list[Op], *, durable: bool = False) -> None:
        def work(txn: Any) -> None:
            i = 0
            while i < len(ops):
                ns = ops[i][0]
                j = i
                while j < len(ops) and ops[j][0] == ns and ops[j][2] is not None:
                    j += 1
                if j > i and ns in self.codecs:
                    self._put_flagged(txn, ns, [(k, v) for _, k, v in ops[i:j] if v is not None])
                    i = j
                    continue
                if j == i and ns in self.codecs:
                    self._delete_flagged(txn, ns, ops[i][1])
                    i += 1
                    continue
                if j > i:  # a run of puts into one database: one call
                    cur = self._cursor(txn, ns)
                    cur.putmulti([(k, v) for _, k, v in ops[i:j]], overwrite=True)
                    i = j
                    continue
                db = None if ns == MAIN else self.dbs[ns]
                txn.delete(ops[i][1], db=db) if db is not None else txn.delete(ops[i][1])
                i += 1

        self._tx(work)

    def raw_put_sorted(self, ns: str, pairs: list[tuple[bytes, bytes]], extra: list[Op]) -> None:
        if ns in self.codecs:
            self.raw_write([(ns, k, v) for k, v in pairs] + extra)
            return

        def work(txn: Any) -> None:
            cur = self._cursor(txn, ns)
            # Appending (MDB_APPEND) when the pairs land after the database's last key, as
            # the default writer; a resume writing the same records again cannot.
            append = bool(pairs) and ns != MAIN and (not cur.last() or cur.key() < pairs[0][0])
            cur.putmulti(pairs, append=append, overwrite=True)
            for ens, key, value in extra:
                db = None if ens == MAIN else self.dbs[ens]
                if value is None:
                    txn.delete(key, db=db) if db is not None else txn.delete(key)
                else:
                    txn.put(key, value, db=db) if db is not None else txn.put(key, value)

        self._tx(work)

    def raw_delete_range(self, ns: str, start: bytes, end: bytes | None) -> None:
        if ns != MAIN and not start and end is None:
            db = self.dbs[ns]
            self._tx(lambda txn: txn.drop(db, delete=True))
            del self.dbs[ns]
            self.codecs.pop(ns, None)
            return
        codec = self.codecs.get(ns)

        def work(txn: Any) -> None:
            cur = self._cursor(txn, ns)
            if codec is not None:  # the model's range, pair by pair
                more = codec.seek(cur, start)
                while more:
                    key = codec.to_model(bytes(cur.key()), bytes(cur.value()))[0]
                    if end is not None and key >= end:
                        break
                    more = cur.delete()
                return
            more = cur.set_range(start)
            while more and (end is None or cur.key() < end):
                if self._skip(ns, bytes(cur.key())):
                    more = cur.next()
                else:
                    more = cur.delete()  # moves to the next record

        self._tx(work)

    def raw_finish(self) -> None:
        LmdbWriter.finish(self)

    def raw_sync(self) -> None:
        LmdbWriter.finish(self)

    def raw_transaction(self) -> AbstractContextManager[None]:
        return LmdbWriter.transaction(self)

    def raw_backup(self, path: Path) -> None:
        LmdbWriter.backup(self, path)


def guess_layout(engine: type[LmdbEngine], path: Path) -> str:
    """A ``[kv]`` layout guessed from an existing LMDB store, as TOML with comments
    saying what was seen and what cannot be.

    - records in the unnamed database (a Postfix map, an app's ``open_db(None)``), or
      named databases without statemigrate's ``__statemigrate__``: the ``namespaces``
      mode, one table per database (``map`` for the unnamed one), ``metadata = "none"``
      so that nothing is added to the app's store; a flagged database (DUPSORT …) is
      named with its flags, which come back by themselves;
    - one named database whose keys split into table prefixes: the ``prefix`` mode
      (:func:`.._kv_layout.guess_text`);
    - a single-file environment: ``subdir = false`` either way.

    Raises:
        LayoutNotNeeded: a store in statemigrate's own layout (it needs no layout file).
        SourceError: an empty store.
    """
    single = not path.is_dir()
    with RawLmdbReader(engine, path) as reader:
        present = reader.raw_namespaces()
        names = [n for n in present if n not in (MAIN, METADATA_TABLE)]
        ours = METADATA_TABLE in present
        flags = {n: c.flags for n, c in reader.codecs.items()}
        if MAIN not in present and len(names) == 1 and not flags:
            text = _prefix_guess(reader, names[0])
            if text is not None:
                return text + ("subdir = false  # a single-file environment\n" if single else "")
        counts = {n: reader.raw_facts(n).get("entries") for n in present}
    if MAIN not in present and not names:
        raise SourceError(f"{path}: no database of the store holds a table")
    if MAIN not in present and ours:
        raise LayoutNotNeeded(
            f"{path}: in statemigrate's own layout already (a named database per table and "
            f"{METADATA_TABLE!r}): no layout file is needed",
            hint="convert it without --source-layout",
        )
    return _namespaces_text(path, names, MAIN in present, ours, flags, counts, single)


def _prefix_guess(reader: Any, ns: str) -> str | None:
    db = reader.dbs[ns]
    cur = reader.txn.cursor(db)
    first = bytes(cur.key()) if cur.first() else b""
    last = bytes(cur.key()) if cur.last() else b""
    if not first:
        return None

    def seeker() -> Callable[[bytes], bytes | None]:
        c = reader.txn.cursor(db)
        return lambda key: bytes(c.key()) if c.set_range(key) else None

    guess = guess_prefix(ns, first, last, seeker)
    if guess is None:
        return None

    def values(prefix: bytes) -> Iterator[bytes]:
        c = reader.txn.cursor(db)
        more = c.set_range(prefix)
        while more and c.key().startswith(prefix):
            yield bytes(c.value())
            more = c.next()

    roomy = may_be_versioned(guess, values)
    return guess_text("lmdb", reader.path.name, guess, roomy, [])


def _toml_key(name: str) -> str:
    return (
        name
        if name.replace("_", "a").replace("-", "a").isalnum() and name.isascii()
        else json.dumps(name)
    )


def _namespaces_text(
    path: Path,
    names: list[str],
    main: bool,
    ours: bool,
    flags: dict[str, list[str]],
    counts: dict[str, Any],
    single: bool,
) -> str:
    tables: list[tuple[str, str]] = [(n, n) for n in names]
    if main:
        taken = set(names)
        table = next(t for t in ("map", "main", "unnamed", "map_") if t not in taken)
        tables.insert(0, (table, MAIN))
    lines = [
        f"# Guessed by `statemigrate layout init lmdb {path.name}`: check every line.",
        'engine = "lmdb"',
    ]
    if ours:
        lines.append("# statemigrate's metadata database is there: it stays the store's")
        lines.append('metadata = "store"')
    else:
        lines.append("# Nothing of statemigrate's in the app's store (no named database added):")
        lines.append('metadata = "none"')
    lines += [
        "# Which tables are versioned cannot be seen from the bytes (none assumed).",
        "versioned = []",
        "",
        "[kv]",
        'mode = "namespaces"',
        "# Each table one database, as the app has them:",
    ]
    for table, ns in tables:
        where = "LMDB's unnamed database" if ns == MAIN else f"named database {ns!r}"
        n = counts.get(ns)
        shown = f"{where}, {n} records" if isinstance(n, int) else where
        if ns in flags:
            what = ", ".join(f.upper().replace("_", "") for f in flags[ns])
            shown += f", {what}"
            if "dupsort" in flags[ns]:
                shown += " (a multimap table: each key and value in one key)"
            shown += "; the flags travel in the table's metadata and come back with it"
        lines.append(f"#   {table}: {shown}")
    entries = ", ".join(f"{_toml_key(t)} = {json.dumps(ns)}" for t, ns in tables)
    lines.append(f"tables = {{ {entries} }}")
    if single:
        lines.append("subdir = false  # a single-file environment (MDB_NOSUBDIR), as the app's")
    return "\n".join(lines) + "\n"
