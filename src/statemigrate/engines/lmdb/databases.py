"""An LMDB environment's named databases: which are tables, their flags, their cursors.

What the reader and the writer (and the layouts' raw ones, :mod:`.layout`) share: the
named databases of the unnamed one, the codecs of flagged databases (:mod:`.flags`),
the facts the metadata records per table, and bounded batches of a cursor.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path
from typing import Any

from ...errors import SourceError
from ...model import METADATA_TABLE, VERSION_PREFIX_DECODE, Batch, TableInfo
from ..base import META_TABLE_PREFIX, take_batches
from .file import SUBDB_RECORD_BYTES
from .flags import Codec, db_flags, refuse_unreadable, table_meta


def table_dbs(env: Any, txn: Any, lmdb: Any, where: Path, raw: bool = False) -> dict[str, Any]:
    """Named databases of the environment (table name -> handle), metadata included.

    ``raw``: the unnamed database's own records are allowed (the layouts read them as
    the main namespace, :func:`_named_among`); the default layout refuses them.
    """
    if raw:
        return _named_among(env, txn, lmdb)
    out: dict[str, Any] = {}
    plain: list[bytes] = []
    for key, value in txn.cursor().iternext(keys=True, values=True):
        if len(value) != SUBDB_RECORD_BYTES or b"\x00" in key:
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


def _named_among(env: Any, txn: Any, lmdb: Any) -> dict[str, Any]:
    """The named databases of an unnamed database that may hold records of its own.

    A key is a database's name only if it is UTF-8 without NUL, its value has the size
    of LMDB's database record, and LMDB opens it: LMDB answers ``MDB_INCOMPATIBLE`` for
    a record that is no database (only a subdatabase's node carries ``F_SUBDATA``), so
    a record never opens as one.
    """
    out: dict[str, Any] = {}
    for key, value in txn.cursor().iternext(keys=True, values=True):
        if len(value) != SUBDB_RECORD_BYTES or b"\x00" in key:
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
