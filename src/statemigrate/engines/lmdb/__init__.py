"""LMDB through py-lmdb: one named database per table, in a directory holding data.mdb.

Versioned records store an 8-byte big-endian version before the value (the model's
versioned codec, as RocksDB).
Metadata lives in the named database ``__statemigrate__``, which also records which
tables are versioned (``kind:<name>``, hidden from :meth:`metadata`).

Reading never creates a file and never writes ``data.mdb``. When no process has the
environment open (no holder of LMDB's shared lock on ``lock.mdb``), it is opened with
``lock=False``, so even ``lock.mdb`` is left alone; a writer that starts during the
read is caught because the last committed transaction id moves (checked after every
batch, before the batch is used: pages our snapshot reads can only be reused after such
a commit). When the app has the environment open, the reader registers in LMDB's
reader table like any reader (that is LMDB's protocol, and it writes ``lock.mdb``) so
that the app's writer never reuses pages of our snapshot.

A second LMDB writer waits forever for the writer mutex; before opening a store for
writing we read the mutex's owner from ``lock.mdb`` without taking it (glibc's robust
mutex layout on Linux) and refuse with exit 3 naming the pid.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import json
import os
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any, ClassVar

from ...errors import DestinationError, SourceError, StoreBusyError
from ...fsutil import crash_point
from ...locks import LockProbe, SideFile, busy_message, lock_holder, refuse_if_held
from ...model import METADATA_TABLE, VERSION_PREFIX_DECODE, Batch, TableInfo, encode_versioned
from ..base import META_KIND_PREFIX as KIND_PREFIX
from ..base import (
    META_TABLE_PREFIX,
    AppHolder,
    Capabilities,
    Engine,
    NativeCopy,
    Reader,
    StoreFacts,
    Writer,
    check_options,
    recorded_tables,
    take_batches,
)
from ..errors import DriverErrors, Meaning, Rule
from .file import (
    SUBDB_RECORD_BYTES,
    check_data_file,
    count_dbs,
    data_file,
    is_single_file,
    keep_map_size,
    open_ro,
    walked_digests,
)
from .flags import Codec, db_flags, flags_of, open_kwargs, refuse_unreadable, table_meta
from .options import LmdbOptions

META_DB = METADATA_TABLE.encode()
MIN_MAP_SIZE = 64 << 20
LOCK_FILE = "lock.mdb"
# Every process with the environment open holds a POSIX read lock on lock.mdb; a writer
# also owns the writer mutex inside it (a second writer would wait for it forever).
OPEN_PROBES = (LockProbe(LOCK_FILE, "any"),)
LOCK_PROBES = (LockProbe(LOCK_FILE, "lmdb_writer"), *OPEN_PROBES)
# A single-file environment (MDB_NOSUBDIR): its lock file is PATH-lock, beside it.
SINGLE_LOCK_SUFFIX = "-lock"
SINGLE_OPEN_PROBES = (LockProbe(SINGLE_LOCK_SUFFIX, "any"),)
SINGLE_LOCK_PROBES = (LockProbe(SINGLE_LOCK_SUFFIX, "lmdb_writer"), *SINGLE_OPEN_PROBES)
_FULL = "{path}: disk full: not enough free space ({text})"
_KEY_REFUSED = "{path}: LMDB refused a key: empty or over 511 bytes"
_MAP_FULL = "{path}: the map filled inside one upgrade transaction ({map_size} bytes)"
_FULL_HINT = "free some space, then run the same command with --resume"
LMDB_ERRORS = DriverErrors(
    rules=(
        Rule(Meaning.OUTSIDE_MODEL, types=("builtins.ValueError",), message="{where}: {text}"),
        # py-lmdb turns a damaged meta or branch page's huge size into an OverflowError.
        Rule(Meaning.DAMAGED, types=("builtins.OverflowError",)),
        Rule(Meaning.TOO_BIG, types=("lmdb.BadValsizeError",), message=_KEY_REFUSED),
        Rule(Meaning.TOO_BIG, types=("lmdb.MapFullError",), message=_MAP_FULL),
        # LMDB reports a short write on a full disk as EIO, so the free space is looked at.
        Rule(Meaning.FULL, words=("no space", "enospc"), message=_FULL, hint=_FULL_HINT),
        Rule(Meaning.FULL, nearly_full=True, message=_FULL, hint=_FULL_HINT),
    ),
    driver=("lmdb.Error", "builtins.ValueError", "builtins.OverflowError"),
    scan_failed="{where}: read failed ({text})",
)
LMDB_FACTS = StoreFacts(
    errors=LMDB_ERRORS,
    locks=LOCK_PROBES,
    private_metadata=(KIND_PREFIX,),
    busy_hint="stop the app, then run the same command",
)
SINGLE_FILE_FACTS = dataclasses.replace(LMDB_FACTS, locks=SINGLE_LOCK_PROBES)


def probes(
    path: Path, *, single: bool | None = None
) -> tuple[tuple[LockProbe, ...], tuple[LockProbe, ...]]:
    """(every probe, the probes of an open environment) for the store at ``path``."""
    single = not path.is_dir() if single is None else single
    return (SINGLE_LOCK_PROBES, SINGLE_OPEN_PROBES) if single else (LOCK_PROBES, OPEN_PROBES)


def _table_dbs(env: Any, txn: Any, lmdb: Any, where: Path, raw: bool = False) -> dict[str, Any]:
    """Named databases of the environment (table name -> handle), metadata included.

    ``raw``: the unnamed database's own records are allowed (the layouts read them as
    the main namespace, :func:`_named_among`); the default layout refuses them.
    """
    if raw:
        return _named_among(env, txn, lmdb)
    out: dict[str, Any] = {}
    plain: list[bytes] = []
    for key, value in txn.cursor().iternext(keys=True, values=True):
        if len(value) != _SUBDB_RECORD_BYTES or b"\x00" in key:
            plain.append(key)  # a record of the unnamed database (a Postfix map's)
            continue
        try:
            out[key.decode("utf-8")] = env.open_db(key, txn=txn, create=False)
        except (lmdb.IncompatibleError, lmdb.NotFoundError, lmdb.BadValsizeError):
            plain.append(key)
        except UnicodeDecodeError:
            plain.append(key)
    if plain:
        raise SourceError(
            f"{where}: records in LMDB's unnamed database are not in statemigrate's default "
            f"layout (first key {bytes(plain[0][:64])!r}), which keeps each table in a named "
            "database",
            hint="read it in a layout that names the unnamed database: "
            "`statemigrate layout init` prints one "
            '([kv] mode = "namespaces", tables = { map = "" })',
        )
    return out


_SUBDB_RECORD_BYTES = SUBDB_RECORD_BYTES
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0)


def _named_among(env: Any, txn: Any, lmdb: Any) -> dict[str, Any]:
    """The named databases of an unnamed database that may hold records of its own.

    A key is a database's name only if it is UTF-8 without NUL, its value has the size
    of LMDB's database record, and LMDB opens it: LMDB answers ``MDB_INCOMPATIBLE`` for
    a record that is no database (only a subdatabase's node carries ``F_SUBDATA``), so
    a record never opens as one.
    """
    out: dict[str, Any] = {}
    for key, value in txn.cursor().iternext(keys=True, values=True):
        if len(value) != _SUBDB_RECORD_BYTES or b"\x00" in key:
            continue
        try:
            name = bytes(key).decode("utf-8")
        except UnicodeDecodeError:
            continue
        try:
            out[name] = env.open_db(bytes(key), txn=txn, create=False)
        except (lmdb.IncompatibleError, lmdb.NotFoundError, lmdb.BadValsizeError):
            continue
    return out


def database_codecs(env: Any, txn: Any, dbs: Mapping[str, Any], where: Path) -> dict[str, Codec]:
    """The flagged databases' codecs (:mod:`.flags`); REVERSEDUP refused (exit 4)."""
    out: dict[str, Codec] = {}
    for name, db in dbs.items():
        if name == METADATA_TABLE:
            continue
        flags = db_flags(db, txn)
        if flags:
            refuse_unreadable(name, bytes(txn.get(name.encode("utf-8")) or b""), where)
            out[name] = Codec(flags)
    return out


def flagged_tables(
    tables: list[TableInfo], codecs: Mapping[str, Codec], metadata: Mapping[str, bytes]
) -> list[TableInfo]:
    """``tables`` with each flagged database's flags in its meta, beside the facts the
    metadata records for it (``table:<name>``: a redb multimap table's types)."""
    out = []
    for t in tables:
        codec = codecs.get(t.name)
        if codec is not None:
            t = TableInfo(t.name, t.kind, {**recorded_meta(metadata, t.name), **t.meta})
            if t.versioned:
                raise SourceError(
                    f"table {t.name!r}: a versioned table in a database with flags "
                    f"({', '.join(codec.flags)}) is not supported"
                )
            t = TableInfo(t.name, t.kind, {**t.meta, **table_meta(codec.flags)})
        out.append(t)
    return out


def recorded_meta(metadata: Mapping[str, bytes], name: str) -> dict[str, Any]:
    """The facts the metadata records for table ``name`` (``table:<name>``), or {}."""
    raw = metadata.get(META_TABLE_PREFIX + name)
    if raw is None:
        return {}
    try:
        found = json.loads(raw)
    except ValueError:
        return {}
    return found if isinstance(found, dict) else {}


def cursor_batches(
    cur: Any,
    table: TableInfo,
    after: bytes | None,
    max_records: int,
    max_bytes: int,
    check: Callable[[], None] | None = None,
    codec: Codec | None = None,
) -> Iterator[Batch]:
    """Bounded batches of a table's cursor in key order, strictly after ``after``, taken
    natively; ``check`` runs after each batch is taken, before it is yielded. A flagged
    database's pairs go through its ``codec`` (in LMDB's order, the model's)."""
    if codec is not None:
        more = cur.first() if after is None else codec.seek(cur, after)
        if not more:
            return
        pairs = codec.pairs(cur.iternext())
        if after is not None:
            pairs = (p for p in pairs if p[0] != after)
        for batch in take_batches(pairs, max_records, max_bytes):
            if check is not None:
                check()
            yield batch
        return
    more = cur.first() if after is None else cur.set_range(after)
    if not more or (after is not None and cur.key() == after and not cur.next()):
        return
    decode = VERSION_PREFIX_DECODE if table.versioned else "as_is"
    for batch in take_batches(cur.iternext(), max_records, max_bytes, decode):
        if check is not None:
            check()
        yield batch


def stored_pairs(codec: Codec, batch: Batch, where: str) -> list[tuple[bytes, bytes]]:
    """The stored pairs of a batch of a flagged database's records.

    Raises:
        DestinationError: a record no such database can hold (exit 5).
    """
    try:
        return [codec.from_model(bytes(r[0]), bytes(r[1])) for r in batch]
    except ValueError as exc:
        raise DestinationError(
            f"{where}: a record does not fit the database's flags ({', '.join(codec.flags)}): {exc}"
        ) from exc


def put_flagged(cur: Any, codec: Codec, pairs: list[tuple[bytes, bytes]]) -> int:
    """Put ``pairs`` into a flagged database at ``cur``; how many were added.

    A DUPSORT database takes a key's further values (MDB_NODUPDATA refuses only a
    pair already there); any other refuses a key already there.
    """
    if codec.dupsort:
        return int(cur.putmulti(pairs, dupdata=False, overwrite=True)[1])
    return int(cur.putmulti(pairs, overwrite=False)[1])


class LmdbReader(Reader):
    """One read transaction over the whole read; see the module notes on locking."""

    facts = LMDB_FACTS
    raw: ClassVar[bool] = False  # the layouts' raw reader: the unnamed database's records too

    def __init__(self, engine: type[LmdbEngine], path: Path):
        self.lmdb = lmdb = engine.require_driver()
        self.path = path
        self.single = not path.is_dir()  # a single-file environment (MDB_NOSUBDIR)
        if self.single:
            self.facts = SINGLE_FILE_FACTS  # type: ignore[misc]  # its lock file is PATH-lock
        self.data = data_file(path)
        self.open_probes = probes(path, single=self.single)[1]
        self.locked = lock_holder(path, self.open_probes) is not None
        check_data_file(self.data, path if self.single else None)
        with self.opening(failed="{path}: not a readable LMDB store ({text})"):
            n = count_dbs(path, lmdb, self.locked, subdir=not self.single)
            self.env = open_ro(path, lmdb, self.locked, n + 1, subdir=not self.single)
            self.txn = self.env.begin(buffers=False)
            self.snapshot_id = int(self.txn.id())
            self.txnid = self._last_txnid()
            self.dbs = _table_dbs(self.env, self.txn, lmdb, path, raw=self.raw)
            self.codecs = database_codecs(self.env, self.txn, self.dbs, path)
            self.snapshot_metadata = self._read_meta()
        tables = recorded_tables(self.snapshot_metadata, self.dbs)
        self.snapshot_tables = flagged_tables(tables, self.codecs, self.snapshot_metadata)

    def _last_txnid(self) -> int:
        return int(self.env.info()["last_txnid"])

    def _read_meta(self) -> dict[str, bytes]:
        db = self.dbs.get(METADATA_TABLE)
        if db is None:
            return {}
        return {k.decode("utf-8"): v for k, v in self.txn.cursor(db)}

    def _check_unchanged(self) -> None:
        """Without LMDB's lock, refuse a read a writer may have changed under us.

        Pages our snapshot reads can only be reused after a commit, which moves the
        last transaction id: checked after each batch is taken, before it is used.
        """
        if not self.locked and self._last_txnid() != self.txnid:
            pid = lock_holder(self.path, self.open_probes)
            raise StoreBusyError(
                busy_message(self.path, pid) + ": it wrote to the store while it was being read",
                hint="stop the app (or let it finish) and run again",
            )

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        cur = self.txn.cursor(self.dbs[table.name])
        codec = self.codecs.get(table.name)
        check = self._check_unchanged
        return cursor_batches(cur, table, after, max_records, max_bytes, check, codec)

    def native_digests(self, tables: list[TableInfo]) -> list[tuple[int, int, int]] | None:
        """The tables' digests from ``data.mdb``'s pages (``_native.lmdb_digests``).

        Only when no other process has the environment open: the walk reads the meta
        page of this transaction, which a writer's second commit would overwrite, and
        such a commit moves the last transaction id, checked after the walk as after
        every batch. Any store the walk does not read is read through the cursor.
        """
        if self.locked or any(t.name in self.codecs for t in tables):
            return None  # the walk reads records as stored: a flagged database's are not
        found = walked_digests(self.data, self.snapshot_id, tables)
        if found is not None:
            self._check_unchanged()
        return found

    def estimate_count(self, table: TableInfo) -> tuple[int, bool] | None:
        """The named database's entry count, exact (LMDB's stats)."""
        with contextlib.suppress(Exception):  # progress only: a failure here is no error
            return int(self.txn.stat(self.dbs[table.name])["entries"]), True
        return None

    def copy_into(self, path: Path, subdir: bool = True) -> None:
        """LMDB's compacting copy of this read's transaction into a new directory ``path``
        (a new single file, without ``subdir``).

        ``mdb_env_copyfd3`` walks the transaction's pages (free pages left out), so the
        copy is the snapshot the batches are read from; without LMDB's lock, a writer
        that committed meanwhile is refused afterwards, as after every batch. The file
        is opened here rather than by ``mdb_env_copy``, which writes with ``O_DIRECT``:
        the copy then stays in the page cache for the read back (a cold walk of its
        pages took ten times the copy), and the pipeline syncs it.
        """
        try:
            if subdir:
                path.mkdir()
            target = path / "data.mdb" if subdir else path
            fd = os.open(target, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)
        except OSError as exc:
            raise DestinationError(f"{path}: cannot create ({exc.strerror})") from exc
        try:
            crash_point("native copy")
            # Errors name the copy, and a full disk is looked for where it is written.
            failed = "{path}: copy failed ({text})"
            with self.facts.mapped(path, "copying", writing=True, source=False, failed=failed):
                self.env.copyfd(fd, compact=True, txn=self.txn)
            keep_map_size(self.data, fd)
        finally:
            os.close(fd)
        self._check_unchanged()

    def close(self) -> None:
        txn = getattr(self, "txn", None)
        if txn is not None:
            txn.abort()
            self.txn = None
        env = getattr(self, "env", None)
        if env is not None:
            env.close()
            self.env = None


class LmdbWriter(Writer):
    """One write transaction per batch; the map grows when it fills."""

    facts = LMDB_FACTS
    raw: ClassVar[bool] = False  # the layouts' raw writer: no metadata database of its own

    def __init__(
        self, engine: type[LmdbEngine], path: Path, create: bool, subdir: bool | None = None
    ):
        """``subdir``: a directory store (True) or a single file (False, ``MDB_NOSUBDIR``);
        None: a new store is a directory, an existing one as it is. An existing store of
        the other shape than ``subdir`` asks is refused."""
        self.lmdb = lmdb = engine.require_driver()
        self.path = path
        if create:
            self.single = subdir is False
            try:
                if self.single:  # LMDB takes an empty file for a new environment
                    os.close(os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666))
                else:
                    path.mkdir()
            except OSError as exc:
                raise DestinationError(f"{path}: cannot create ({exc.strerror})") from exc
            self.max_dbs, self.map_size = 16, MIN_MAP_SIZE
        else:
            self.single = is_single_file(path)
            if not self.single and not (path / "data.mdb").is_file():
                raise DestinationError(
                    f"{path}: not an LMDB store (no data.mdb, nor a single-file environment)"
                )
            if subdir is not None and subdir == self.single:
                shapes = ("a single-file", "a directory")
                raise DestinationError(
                    f"{path}: {shapes[not self.single]} LMDB environment, but "
                    f"subdir = {str(subdir).lower()} asks for {shapes[self.single]} one"
                )
            try:
                check_data_file(data_file(path), path if self.single else None)
            except SourceError as exc:
                raise DestinationError(exc.message) from exc
            self._refuse_if_open()
            with self.errors(failed="{path}: not a writable LMDB store ({text})"):
                self.max_dbs = count_dbs(path, lmdb, True, subdir=not self.single) + 16
            # Room for an upgrade's single transaction (address space only, not disk).
            self.map_size = max(1 << 30, 4 * data_file(path).stat().st_size)
        if self.single:
            self.facts = SINGLE_FILE_FACTS  # type: ignore[misc]  # its lock file is PATH-lock
        self.env: Any = None
        self._outer: Any = None
        self.private = create
        self._open()

    def _refuse_if_open(self) -> None:
        # Even an idle app: it holds handles (DBIs) of the tables it knows, which change or
        # vanish under it (its next write can bring back a dropped table, or MDB_BAD_DBI).
        refuse_if_held(self.path, self.facts.locks, hint=self.facts.busy_hint)

    def _open(self) -> None:
        try:
            with self.errors(failed="{path}: cannot open LMDB for writing ({text})"):
                # sync off while the store is a private .partial: a killed process loses
                # nothing the OS already has, and finish() syncs before it is renamed
                # into place. An existing store (resume, upgrade) commits durably.
                self.env = self.lmdb.open(
                    str(self.path),
                    subdir=not self.single,
                    max_dbs=self.max_dbs,
                    map_size=self.map_size,
                    sync=not self.private,
                    metasync=not self.private,
                    readahead=False,
                    create=False,
                )
                with self.env.begin(write=True) as txn:
                    self.dbs = _table_dbs(self.env, txn, self.lmdb, self.path, raw=self.raw)
                    self.codecs = database_codecs(self.env, txn, self.dbs, self.path)
                    if METADATA_TABLE not in self.dbs and not self.raw:
                        self.dbs[METADATA_TABLE] = self.env.open_db(META_DB, txn=txn)
        except SourceError as exc:
            raise DestinationError(exc.message) from exc

    def _reopen(self, *, max_dbs: int | None = None) -> None:
        self.env.close()
        self.max_dbs = max_dbs or self.max_dbs
        self._open()

    def _tx(self, work: Any) -> None:
        """Run ``work(txn)`` in one write transaction, growing the map when it fills.

        Inside :meth:`transaction` the work joins the open transaction instead.
        """
        failed = "{path}: write failed ({text})"
        if self._outer is not None:
            with self.errors(failed=failed, map_size=f"{self.map_size:,}"):
                work(self._outer)
            return
        while True:
            txn = self.env.begin(write=True)
            with self.errors(failed=failed):
                try:
                    work(txn)
                    txn.commit()
                    return
                except self.lmdb.MapFullError:
                    txn.abort()
                except BaseException:
                    txn.abort()
                    raise
            self.map_size *= 2
            with self.errors(failed="{path}: cannot grow the map ({text})"):
                self.env.set_mapsize(self.map_size)

    def list_tables(self) -> list[TableInfo]:
        meta = self.raw_metadata()
        return flagged_tables(recorded_tables(meta, self.dbs), self.codecs, meta)

    def raw_metadata(self) -> dict[str, bytes]:
        if self._outer is not None:
            return {k.decode("utf-8"): v for k, v in self._outer.cursor(self.dbs[METADATA_TABLE])}
        with self.env.begin(db=self.dbs[METADATA_TABLE], buffers=False) as txn:
            return {k.decode("utf-8"): v for k, v in txn.cursor()}

    def create_table(self, table: TableInfo) -> None:
        if len(self.dbs) >= self.max_dbs and self._outer is None:
            self._reopen(max_dbs=self.max_dbs * 2)
        name, kind = table.name.encode("utf-8"), (KIND_PREFIX + table.name).encode()
        flags = flags_of(table.meta, self.path)
        if flags and table.versioned:
            raise DestinationError(
                f"{self.path}: table {table.name!r} is versioned: an LMDB database with "
                f"flags ({', '.join(flags)}) cannot hold versions"
            )

        def work(txn: Any) -> None:
            self.dbs[table.name] = self.env.open_db(name, txn=txn, **open_kwargs(flags))
            if table.versioned:
                txn.put(kind, b"versioned", db=self.dbs[METADATA_TABLE])

        self._tx(work)
        if flags:
            self.codecs[table.name] = Codec(flags)

    def _put_meta(self, txn: Any, metadata: Mapping[str, bytes | None]) -> None:
        db = self.dbs[METADATA_TABLE]
        for key, value in metadata.items():
            if value is None:
                txn.delete(key.encode("utf-8"), db=db)
            else:
                txn.put(key.encode("utf-8"), value, db=db)

    def write_batch(
        self, table: TableInfo, batch: Batch, metadata: Mapping[str, bytes | None] | None = None
    ) -> None:
        codec = self.codecs.get(table.name)
        if codec is not None:
            self._write_flagged(table, codec, batch, metadata)
            return
        pairs = encode_versioned(batch) if table.versioned else batch

        def work(txn: Any) -> None:
            cur = txn.cursor(self.dbs[table.name])
            # The fast path appends after the table's last key (a conversion always
            # does); an upgrade may insert anywhere. Neither overwrites a record.
            append = not pairs or not cur.last() or cur.key() < pairs[0][0]
            _consumed, added = cur.putmulti(pairs, append=append, overwrite=False)
            if added != len(pairs):
                # MDB_APPEND skips a key that is not after the previous one, without raising.
                raise DestinationError(
                    f"{self.path}: table {table.name!r}: {len(pairs) - added} record(s) out of key "
                    "order or already present; nothing of this batch was written"
                )
            if metadata:
                self._put_meta(txn, metadata)

        self._tx(work)

    def _write_flagged(
        self,
        table: TableInfo,
        codec: Codec,
        batch: Batch,
        metadata: Mapping[str, bytes | None] | None,
    ) -> None:
        """A batch into a flagged database: each record as the stored pair it stands for."""
        pairs = stored_pairs(codec, batch, f"{self.path}: table {table.name!r}")

        def work(txn: Any) -> None:
            added = put_flagged(txn.cursor(self.dbs[table.name]), codec, pairs)
            if added != len(pairs):
                raise DestinationError(
                    f"{self.path}: table {table.name!r}: {len(pairs) - added} record(s) "
                    "already present; nothing of this batch was written"
                )
            if metadata:
                self._put_meta(txn, metadata)

        self._tx(work)

    def put_metadata(self, metadata: Mapping[str, bytes | None]) -> None:
        self._tx(lambda txn: self._put_meta(txn, metadata))

    # In-place methods (schema upgrades).

    def scan(
        self, table: TableInfo, after: bytes | None, max_records: int, max_bytes: int
    ) -> Iterator[Batch]:
        """Batches as this writer sees them: inside :meth:`transaction`, its own writes too."""
        own = self._outer is None
        txn = self.env.begin(buffers=False) if own else self._outer
        try:
            db = self.dbs.get(table.name)
            if db is not None:
                codec = self.codecs.get(table.name)
                cur = txn.cursor(db)
                yield from cursor_batches(cur, table, after, max_records, max_bytes, None, codec)
        finally:
            if own:
                txn.abort()

    def drop_table(self, name: str) -> None:
        db = self.dbs.get(name)
        if db is None:
            return

        def work(txn: Any) -> None:
            txn.drop(db, delete=True)
            txn.delete((KIND_PREFIX + name).encode(), db=self.dbs[METADATA_TABLE])

        self._tx(work)
        del self.dbs[name]
        self.codecs.pop(name, None)

    @contextlib.contextmanager
    def transaction(self) -> Iterator[None]:
        """One LMDB write transaction around the block: tables, records and metadata."""
        self._refuse_if_open()
        if len(self.dbs) + 64 > self.max_dbs:  # no reopening inside the transaction
            self._reopen(max_dbs=len(self.dbs) + 128)
        dbs = dict(self.dbs)
        self._outer = self.env.begin(write=True)
        try:
            yield
        except BaseException:
            self._outer.abort()
            self.dbs = dbs  # handles opened or dropped inside are gone with the abort
            raise
        else:
            try:
                with self.errors(failed="{path}: commit failed ({text})"):
                    self._outer.commit()
            except BaseException:
                self.dbs = dbs
                raise
        finally:
            self._outer = None

    def sync(self) -> None:
        self.finish()

    def backup(self, path: Path) -> None:
        """LMDB's own consistent copy (``mdb_env_copy``) into a new directory (into a new
        file, for a single-file environment)."""
        fd = -1
        try:
            if self.single:
                fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666)
            else:
                path.mkdir()
        except OSError as exc:
            raise DestinationError(f"{path}: cannot write the backup ({exc.strerror})") from exc
        try:
            with self.errors(where=path, failed="{where}: backup failed ({text})"):
                if self.single:
                    self.env.copyfd(fd)
                    os.fsync(fd)
                else:
                    self.env.copy(str(path))
        finally:
            if fd >= 0:
                os.close(fd)

    def finish(self) -> None:
        with self.errors(failed="{path}: sync failed ({text})"):
            self.env.sync(True)

    def close(self) -> None:
        if self.env is not None:
            self.env.close()
            self.env = None


class LmdbEngine(Engine):
    """LMDB through py-lmdb: the default layout's reader and writer, or a layout's."""

    name = "lmdb"
    extra = "lmdb"
    driver_module = "lmdb"
    description = "LMDB (py-lmdb): one named database per table, a directory holding data.mdb"
    capabilities = Capabilities(
        atomic_multi_table=True,
        read_only_open=True,
        multi_process_readers=True,
        directory=True,
        min_key_len=1,
        max_key_len=511,
        in_place=True,
        transactional_ddl=True,
    )
    options = LmdbOptions
    layout_family = "kv"
    # [kv] subdir: a single-file environment or a directory (kv_layout refuses it elsewhere).
    layout_shape_fields = ("subdir",)
    space_factor = 1.6
    # A table's name is a key of LMDB's main database (1-511 bytes; a NUL would end it,
    # which the model's rules already refuse).
    max_table_name_bytes = 511
    suffixes = (".lmdb",)
    # The environment open (lmdb.open), one read transaction done; a single file
    # (MDB_NOSUBDIR) opened as one.
    app_holder = AppHolder(
        "import lmdb, os\n"
        "env = lmdb.open(sys.argv[1], subdir=os.path.isdir(sys.argv[1]), max_dbs=64)\n"
        "with env.begin() as txn:\n"
        "    txn.stat()\n"
        "if sys.argv[2] == 'write':\n"
        "    held = env.begin(write=True)\n"
    )
    # The reader table, which an app holding the environment rewrites (a directory
    # store's lock.mdb, a single file's PATH-lock).
    volatile_files = ("lock.mdb", "*" + SINGLE_LOCK_SUFFIX)
    # Beside a single-file environment: its lock file (LMDB makes it at every open with
    # a lock). A convert's DST.partial-lock is removed before the store is placed.
    sidecar_suffixes = (SINGLE_LOCK_SUFFIX,)
    # mdb_env_open opens both O_CREAT|O_RDWR, and writes the lock table at every open.
    side_files = (
        SideFile(LOCK_FILE, "LMDB's lock file", made=True),
        SideFile("data.mdb", "LMDB's data file"),
    )
    # A single-file environment's: its lock file beside it (the data file is the store).
    single_file_side_files = (SideFile(SINGLE_LOCK_SUFFIX, "LMDB's lock file", made=True),)

    @classmethod
    def detect(cls, path: Path) -> bool:
        """A directory holding ``data.mdb``, or a single-file environment (``MDB_NOSUBDIR``,
        Postfix's ``FILE.lmdb``): a regular file that starts with an LMDB meta page."""
        return (path.is_dir() and (path / "data.mdb").is_file()) or is_single_file(path)

    @classmethod
    def refuse_linked_side_files(cls, path: Path, *, make: bool = False) -> None:
        """As every engine's, with the side files of the store's own shape: ``lock.mdb``
        and ``data.mdb`` inside a directory, ``PATH-lock`` beside a single file. A store
        that does not exist yet is checked as both (nothing is inside it; ``PATH-lock``
        must not be a link)."""
        from ...locks import refuse_linked_side_files

        if path.is_dir() and not path.is_symlink():
            refuse_linked_side_files(path, cls.side_files, directory=True, make=make)
        else:
            files = cls.single_file_side_files
            refuse_linked_side_files(path, files, directory=False, make=make and path.exists())

    @classmethod
    def table_type(cls, facts: Any) -> str | None:
        """A database's flags in LMDB's words: ``DUPSORT (multimap), INTEGERKEY``."""
        if not isinstance(facts, dict) or not isinstance(facts.get("flags"), list):
            return None
        words = [
            str(f).upper().replace("_", "") + (" (multimap)" if f == "dupsort" else "")
            for f in facts["flags"]
        ]
        return "LMDB " + ", ".join(words) if words else None

    @classmethod
    def check_key(cls, table: TableInfo, key: bytes) -> None:
        """A flagged database's record is checked as the pair it is stored as (a
        multimap record's key and value, each 511 bytes at most), others as any key."""
        flags = flags_of(table.meta, table.name)
        if not flags:
            super().check_key(table, key)
            return
        codec = Codec(flags)
        where = f"the lmdb engine cannot store a record of table {table.name!r}"
        try:
            stored, dup = codec.from_model(key, b"")
        except ValueError as exc:
            raise DestinationError(f"{where} ({key[:64].hex()}): {exc}") from exc
        limit = cls.capabilities.max_key_len or 511
        if not 1 <= len(stored) <= limit:
            raise DestinationError(
                f"{where}: its key {stored[:64].hex() or '(empty)'} is {len(stored)} bytes, "
                f"outside 1..{limit}"
            )
        if codec.dupsort and len(dup) > limit:
            raise DestinationError(
                f"{where}: a DUPSORT database's value is a key of LMDB's, and "
                f"{dup[:64].hex()} is {len(dup)} bytes, over {limit}"
            )

    @classmethod
    def store_directory(cls, path: Path) -> bool:
        """Whether the store at ``path`` is a directory: LMDB's are by default
        (``capabilities.directory``), a single-file environment is one file."""
        return not (path.exists() and not path.is_dir())

    @classmethod
    def native_copy(
        cls, reader: Reader, options: Mapping[str, Any] | None = None
    ) -> NativeCopy | None:
        """LMDB's compacting copy (what ``mdb_copy -c`` does) of the reader's transaction,
        into a directory or, with ``subdir = false`` alone, a single file."""
        options = dict(options or {})
        subdir = options.pop("subdir", None)
        if options or not isinstance(reader, LmdbReader):
            return None
        flat = subdir is not None and str(subdir).lower() in ("false", "0", "no")
        # py-lmdb leaves the GIL while LMDB copies; the page walk reads the file.
        run = functools.partial(reader.copy_into, subdir=not flat)
        return NativeCopy("LMDB compacting copy", run, digest_alongside=True)

    @classmethod
    def format_info(cls, path: Path) -> dict[str, Any]:
        every, opened = probes(path)
        return {
            "single_file": not path.is_dir(),
            "data_bytes": data_file(path).stat().st_size,
            "open_by_pid": lock_holder(path, opened),
            "writer_pid": lock_holder(path, every[:1]),
        }

    @classmethod
    def check_source(cls, path: Path) -> None:
        """Refuse a path that is not an LMDB store directory (exit 4)."""
        if not cls.detect(path):
            raise SourceError(
                f"{path}: not an LMDB store (a directory holding data.mdb, or a single-file "
                "environment)"
            )

    @classmethod
    def open_reader(cls, path: Path, options: Mapping[str, Any] | None = None) -> Reader:
        from .._kv_mapping import KvLayoutReader, kv_layout

        opts = check_options(cls, options, "source")
        layout = kv_layout(cls, opts)  # a bad layout file is refused before the store is read
        cls.check_source(path)
        if layout is None:
            return LmdbReader(cls, path)
        from .layout import RawLmdbReader

        skip = bool(opts["skip_foreign_tables"])
        return KvLayoutReader(RawLmdbReader(cls, path), layout, skip)

    @classmethod
    def create_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        return cls._writer(path, True, options)

    @classmethod
    def open_writer(cls, path: Path, options: Mapping[str, Any] | None = None) -> Writer:
        return cls._writer(path, False, options)

    @classmethod
    def _writer(cls, path: Path, create: bool, options: Mapping[str, Any] | None) -> Writer:
        from .._kv_mapping import KvLayoutWriter, kv_layout

        opts = check_options(cls, options, "dest")
        layout = kv_layout(cls, opts)  # before anything is made
        subdir = cls.wanted_subdir(opts)
        if layout is None:
            return LmdbWriter(cls, path, create=create, subdir=subdir)
        from .layout import RawLmdbWriter

        return KvLayoutWriter(RawLmdbWriter(cls, path, create, subdir), layout, create)

    @classmethod
    def wanted_subdir(cls, opts: Mapping[str, Any]) -> bool | None:
        """The shape a writer is asked for: the ``subdir`` option, else the layout's
        ``[kv] subdir``, else None (a new store a directory, an existing one as it is)."""
        if opts.get("subdir") is not None:
            return bool(opts["subdir"])
        if opts.get("layout"):
            from ...layout import load_layout

            spec = load_layout(opts["layout"], cls.name, cls.layout_family).kv
            return getattr(spec, "subdir", None)
        return None

    @classmethod
    def guess_layout(cls, path: Path) -> str:
        """A layout file guessed from an existing store (``statemigrate layout init``)."""
        from .layout import guess_layout

        cls.check_source(path)
        return guess_layout(cls, path)

    @classmethod
    def check_tables(cls, tables: list[TableInfo], options: Mapping[str, Any] | None) -> None:
        """The names (as every engine), and what the destination's layout cannot hold."""
        from .._kv_mapping import check_kv_tables, kv_layout

        layout = kv_layout(cls, check_options(cls, options, "dest"))
        if layout is not None:
            check_kv_tables(layout, tables)
        super().check_tables(tables, options)
