"""Real third-party software as the writer and the oracle of app-shaped stores (issue 28).

Each class here is one piece of software that apps use to keep their state: it makes a
store *with that software* (never with statemigrate) and reads every record back
*through that software*, returning what the software answers. A round-trip test compares
those answers before and after statemigrate moved the store to another engine and back,
so the expectation comes from the software, not from the code under test.

Every class has:

- ``available() -> str | None``: None when the software is usable here, else why not
  (a missing binary or module; ``make system-deps`` installs the Debian packages);
- ``records(seed)``: a few thousand realistic, deterministic records in the software's
  own terms (binary keys with NUL bytes, empty values, unicode and a 1 MB value wherever
  the software allows them);
- ``write(path, records)`` and ``read(path)``;
- ``shape(path)``: the store's namespaces and files as the software's own tools show
  them (SQL schema rows and header pragmas, column families, LMDB database names and
  flags), to check that a store written back holds the app's shape and nothing else;
- ``engine`` and ``layout``: statemigrate's engine name and the layout file (TOML)
  describing the software's shape, or None where statemigrate's default layout reads it.
"""

from __future__ import annotations

import atexit
import importlib.util
import json
import random
import re
import shutil
import sqlite3
import struct
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any, ClassVar

HERE = Path(__file__).resolve().parent
ROCKSDB_OPEN_SOURCE = HERE / "apps" / "rocksdb_open.cc"

ONE_MB = 1 << 20
TIMEOUT = 120  # a hang guard for one tool call, not a timing assertion

_tmp_dirs: list[str] = []


def _session_dir(prefix: str) -> Path:
    """A temporary directory that lives as long as this test process."""
    path = tempfile.mkdtemp(prefix=prefix)
    if not _tmp_dirs:
        atexit.register(lambda: [shutil.rmtree(p, ignore_errors=True) for p in _tmp_dirs])
    _tmp_dirs.append(path)
    return Path(path)


def _run(args: list[str], *, stdin: bytes | None = None) -> bytes:
    """Runs a tool; its stdout, or AssertionError with its stderr when it fails."""
    res = subprocess.run(args, input=stdin, capture_output=True, timeout=TIMEOUT, check=False)
    if res.returncode != 0:
        raise AssertionError(
            f"{' '.join(args[:4])} ... exited {res.returncode}: "
            f"{res.stderr.decode(errors='replace')[-2000:]}"
        )
    return res.stdout


def _missing_binaries(*names: str, package: str) -> str | None:
    missing = [n for n in names if shutil.which(n) is None]
    if missing:
        return (
            f"{', '.join(missing)} not found: apt-get install {package} "
            "(`make system-deps` installs it)"
        )
    return None


def _missing_module(name: str, pip: str) -> str | None:
    if importlib.util.find_spec(name) is None:
        return f"Python module {name} not installed: pip install {pip} (the test extra has it)"
    return None


# Record makers: deterministic for a seed, realistic, with the odd cases apps meet.


def binary_keys(rng: random.Random, n: int, *, max_len: int = 48) -> list[bytes]:
    """``n`` distinct non-empty binary keys: NUL bytes, 0xff, prefixes of each other, UTF-8."""
    keys: set[bytes] = {b"\x00", b"\x00\x00", b"\x00\x01", b"\xff", b"\xff\xff", b"a", b"ab"}
    keys.update({"é".encode(), "日本".encode(), b"key\x00with\x00nuls", b"trailing\x00"})
    while len(keys) < n:
        kind = rng.randrange(4)
        if kind == 0:  # a record id as an app packs it
            keys.add(b"u\x00" + struct.pack(">Q", rng.randrange(1 << 40)))
        elif kind == 1:  # a path-like text key
            keys.add(f"session/{rng.randrange(10**6):06d}/{rng.choice('abcxyz')}".encode())
        elif kind == 2:  # random bytes
            keys.add(bytes(rng.randrange(256) for _ in range(rng.randrange(1, max_len))))
        else:  # unicode text
            keys.add(
                "".join(rng.choice("aéßж中😀 _-") for _ in range(rng.randrange(1, 12))).encode()
            )
    return sorted(keys)[:n]


def binary_values(rng: random.Random, n: int, *, big: bool = True) -> list[bytes]:
    """``n`` values: empty ones, binary, UTF-8 text, JSON, and one of 1 MB when ``big``."""
    out = []
    for i in range(n):
        kind = rng.randrange(5)
        if kind == 0:
            out.append(b"")
        elif kind == 1:
            out.append(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 200))))
        elif kind == 2:
            out.append(f"Grüße, {i} — ünïcödé ✓".encode())
        elif kind == 3:
            out.append(f'{{"id": {i}, "tags": ["a", "b"], "n": null}}'.encode())
        else:
            out.append(b"\x00" * rng.randrange(1, 9) + b"\xff")
    if big:
        out[n // 2] = bytes(rng.randrange(256) for _ in range(64)) * (ONE_MB // 64)
    return out


# SQLite: sqlitedict and dbm.sqlite3.


def sqlite_shape(path: Path) -> dict[str, Any]:
    """The file's schema rows and the header values apps check, as SQLite reports them."""
    # Read-only, and immutable where no -wal is beside the file (a WAL-mode file no
    # one has open): a read-only open of it would leave -wal and -shm beside it.
    wal = Path(f"{path}-wal")
    mode = "mode=ro" if wal.exists() else "mode=ro&immutable=1"
    with sqlite3.connect(f"file:{path}?{mode}", uri=True) as db:
        return {
            "schema": sorted(db.execute("SELECT type, name, tbl_name, sql FROM sqlite_schema")),
            "user_version": db.execute("PRAGMA user_version").fetchone()[0],
            "application_id": db.execute("PRAGMA application_id").fetchone()[0],
        }


class SqliteDictApp:
    """sqlitedict (PyPI): one rowid table per dict, ``key TEXT PRIMARY KEY, value BLOB``.

    Values are pickled Python objects; ``keys()``/``items()`` iterate ``ORDER BY rowid``,
    so the rowids an app's writes gave the rows are part of what it reads.
    """

    name = "sqlitedict"
    engine = "sqlite"
    store_name = "app.sqlite"
    tables = ("mail", "contacts")
    layout = """\
engine = "sqlite"
metadata = "none"
[sql]
mode = "table-per-table"
tables = { mail = "mail", contacts = "contacts" }
key = "key"
value = "value"
key_codec = "text"
value_codec = "blob"
rowid = true
keep_rowid = true
"""

    @staticmethod
    def available() -> str | None:
        return _missing_module("sqlitedict", "sqlitedict")

    @classmethod
    def records(cls, seed: int = 28) -> dict[str, dict[str, Any]]:
        rng = random.Random(seed)
        mail: dict[str, Any] = {}
        for i in range(1500):
            key = f"msg-{rng.randrange(10**9):09d}@example.org"
            kind = i % 6
            if kind == 0:
                mail[key] = b""
            elif kind == 1:
                mail[key] = bytes(rng.randrange(256) for _ in range(rng.randrange(1, 300)))
            elif kind == 2:
                mail[key] = f"Betreff: Grüße Nr. {i} — 日本語 ✓"
            elif kind == 3:
                mail[key] = {"from": "zoë@example.org", "size": i, "flags": ("seen", "ä")}
            elif kind == 4:
                mail[key] = [i, -i, 2**70, 1.5, None, True]
            else:
                mail[key] = ""
        mail["msg-big@example.org"] = bytes(rng.randrange(256) for _ in range(256)) * (
            ONE_MB // 256
        )
        contacts: dict[str, Any] = {}
        for i in range(1000):
            name = "".join(rng.choice("abcdeéöüßжя中 ") for _ in range(rng.randrange(1, 16)))
            contacts[f"{name}#{i}"] = {"email": f"c{i}@example.net", "note": name}
        contacts["empty"] = b""
        contacts["Ünïcödé"] = "ünïcödé"
        return {"mail": mail, "contacts": contacts}

    @classmethod
    def write(cls, path: Path, records: dict[str, dict[str, Any]]) -> None:
        """Writes each dict through SqliteDict in a shuffled order, then overwrites and
        deletes some keys (REPLACE gives an overwritten row a new rowid), as an app does."""
        from sqlitedict import SqliteDict

        rng = random.Random(len(records))
        for table, items in records.items():
            keys = list(items)
            rng.shuffle(keys)
            with SqliteDict(str(path), tablename=table, autocommit=False) as d:
                for key in keys:
                    d[key] = items[key]
                d["doomed-1"] = b"deleted below"
                d["doomed-2"] = "deleted below"
                d.commit()
                for key in keys[: len(keys) // 10]:  # rewritten: a later rowid
                    d[key] = items[key]
                del d["doomed-1"]
                del d["doomed-2"]
                d.commit()

    @classmethod
    def read(cls, path: Path) -> dict[str, Any]:
        """Per dict: ``items()`` as a dict, and ``keys()`` in the order sqlitedict gives."""
        from sqlitedict import SqliteDict

        out: dict[str, Any] = {"tablenames": sorted(SqliteDict.get_tablenames(str(path)))}
        for table in cls.tables:
            with SqliteDict(str(path), tablename=table, flag="r") as d:
                out[table] = {"items": dict(d.items()), "keys": list(d.keys()), "len": len(d)}
        return out

    @staticmethod
    def shape(path: Path) -> dict[str, Any]:
        return {"files": sorted(p.name for p in path.parent.iterdir()), **sqlite_shape(path)}


# The documented table of CPython 3.13's Lib/dbm/sqlite3.py (and its queries), used
# through the sqlite3 module where the Python running the tests predates dbm.sqlite3.
DBM_BUILD_TABLE = """
  CREATE TABLE IF NOT EXISTS Dict (
    key BLOB UNIQUE NOT NULL,
    value BLOB NOT NULL
  )
"""
DBM_LOOKUP_KEY = "SELECT value FROM Dict WHERE key = CAST(? AS BLOB)"
DBM_STORE_KV = "REPLACE INTO Dict (key, value) VALUES (CAST(? AS BLOB), CAST(? AS BLOB))"
DBM_DELETE_KEY = "DELETE FROM Dict WHERE key = CAST(? AS BLOB)"
DBM_ITER_KEYS = "SELECT key FROM Dict"
DBM_GET_SIZE = "SELECT COUNT (key) FROM Dict"


class DbmSqlite3App:
    """Python's ``dbm.sqlite3``: one rowid table ``Dict(key BLOB UNIQUE NOT NULL, value BLOB
    NOT NULL)``; str keys and values are stored as the BLOB of their UTF-8 bytes.

    Python 3.13+ runs the module itself; older ones run its exact DDL and queries (and
    its ``PRAGMA journal_mode = wal``) through the sqlite3 module.
    """

    name = "dbm.sqlite3"
    engine = "sqlite"
    store_name = "app.sqlite"
    layout = """\
engine = "sqlite"
metadata = "none"
[sql]
mode = "single-table"
table = "Dict"
name = "dict"
key = "key"
value = "value"
rowid = true
create = '''CREATE TABLE Dict (
    key BLOB UNIQUE NOT NULL,
    value BLOB NOT NULL
  )'''
"""

    @staticmethod
    def available() -> str | None:
        return None  # the sqlite3 module is part of Python

    @staticmethod
    def _module() -> Any:
        if sys.version_info >= (3, 13):
            import dbm.sqlite3  # type: ignore[import-not-found,unused-ignore]

            return dbm.sqlite3
        return None

    @classmethod
    def records(cls, seed: int = 28) -> dict[bytes | str, bytes | str]:
        rng = random.Random(seed)
        keys = binary_keys(rng, 2500)
        values = binary_values(rng, len(keys))
        out: dict[bytes | str, bytes | str] = dict(zip(keys, values))
        for i in range(300):  # str keys and values, as most dbm users pass them
            out[f"user:{i}:名前"] = f"Jürgen {i} ✓" if i % 3 else ""
        return out

    @classmethod
    def write(cls, path: Path, records: dict[bytes | str, bytes | str]) -> None:
        """Stores the records in a shuffled order, rewrites some, deletes two."""
        rng = random.Random(len(records))
        keys = list(records)
        rng.shuffle(keys)
        later = keys[: len(keys) // 10]
        module = cls._module()
        if module is not None:
            with module.open(str(path), "c") as db:
                for key in keys:
                    db[key] = records[key]
                db[b"doomed"] = b"x"
                db["doomed-too"] = "x"
                for key in later:
                    db[key] = records[key]
                del db[b"doomed"]
                del db["doomed-too"]
            return
        cx = sqlite3.connect(f"file:{path}?mode=rwc", uri=True, isolation_level=None)
        try:
            cx.execute("PRAGMA journal_mode = wal")
            cx.execute(DBM_BUILD_TABLE)
            for key in [*keys, b"doomed", "doomed-too", *later]:
                value = records.get(key, b"x")
                cx.execute(DBM_STORE_KV, (key, value))
            for key in (b"doomed", "doomed-too"):
                assert cx.execute(DBM_DELETE_KEY, (key,)).rowcount == 1
        finally:
            cx.close()

    @classmethod
    def read(cls, path: Path) -> dict[str, Any]:
        """``keys()`` in the order the module answers, each key's lookup, and ``len``."""
        module = cls._module()
        if module is not None:
            with module.open(str(path), "r") as db:
                keys = db.keys()
                return {"keys": keys, "items": {k: db[k] for k in keys}, "len": len(db)}
        cx = sqlite3.connect(f"file:{path}?mode=ro", uri=True, isolation_level=None)
        try:
            keys = [row[0] for row in cx.execute(DBM_ITER_KEYS)]
            items = {}
            for key in keys:
                row = cx.execute(DBM_LOOKUP_KEY, (key,)).fetchone()
                assert row is not None, key
                items[key] = row[0]
            size = cx.execute(DBM_GET_SIZE).fetchone()[0]
        finally:
            cx.close()
        return {"keys": keys, "items": items, "len": size}

    @staticmethod
    def shape(path: Path) -> dict[str, Any]:
        return {"files": sorted(p.name for p in path.parent.iterdir()), **sqlite_shape(path)}


# LMDB: Postfix's postmap and py-lmdb.


def lmdb_databases(path: Path, *, subdir: bool) -> dict[str | None, dict[str, Any]]:
    """The environment's databases as LMDB stores them, read without a lock file.

    The unnamed database (key None) with its entry count, and every named database: in
    LMDB a named database is a record of the unnamed one whose value is the database's
    ``MDB_db`` header, flags at bytes 4..6 (MDB_REVERSEKEY 0x02, MDB_DUPSORT 0x04,
    MDB_INTEGERKEY 0x08, MDB_DUPFIXED 0x10, MDB_INTEGERDUP 0x20, MDB_REVERSEDUP 0x40).
    A plain record of the unnamed database (a Postfix map's) is listed by its entry count
    only, since its value is not a database header.
    """
    import lmdb

    env = lmdb.open(str(path), subdir=subdir, readonly=True, lock=False, max_dbs=64)
    try:
        out: dict[str | None, dict[str, Any]] = {}
        with env.begin() as txn:
            out[None] = {"entries": txn.stat()["entries"]}
            for key, value in txn.cursor():
                try:
                    name = key.decode()
                    db = env.open_db(key, txn=txn, create=False)
                except (UnicodeDecodeError, lmdb.Error):
                    continue  # a plain record, not a named database
                flags = struct.unpack_from("<H", value, 4)[0] if len(value) >= 6 else None
                out[name] = {
                    "md_flags": flags,
                    "flags": db.flags(txn),
                    "entries": txn.stat(db)["entries"],
                }
        return out
    finally:
        env.close()


class PostmapApp:
    """Postfix's ``postmap lmdb:FILE`` (Debian's postfix-lmdb): one file ``FILE.lmdb``
    (MDB_NOSUBDIR, no lock file), the records in LMDB's unnamed database, each key and
    each value stored with a trailing NUL byte. ``postmap -s`` lists the map,
    ``postmap -q KEY`` (or ``-q -`` with keys on stdin) looks keys up.

    A source line is ``key whitespace value``: keys hold no whitespace and postmap
    lower-cases their ASCII letters; values cannot be empty.
    """

    name = "postmap"
    engine = "lmdb"
    store_name = "aliases.lmdb"
    layout = """\
engine = "lmdb"
metadata = "none"
[kv]
mode = "namespaces"
tables = { aliases = "" }
subdir = false
"""

    _config: Path | None = None

    @staticmethod
    def available() -> str | None:
        reason = _missing_binaries("postmap", package="postfix postfix-lmdb")
        if reason:
            return reason
        if not Path("/usr/lib/postfix/postfix-lmdb.so").exists():
            return "postfix-lmdb.so not found: apt-get install postfix-lmdb"
        return _missing_module("lmdb", "lmdb")

    @classmethod
    def config_dir(cls) -> Path:
        """A Postfix configuration directory of its own (an empty main.cf): postmap needs
        one, and Debian's "No configuration" install has no /etc/postfix/main.cf."""
        if cls._config is None:
            conf = _session_dir("postfix-conf-")
            (conf / "main.cf").write_text("")
            cls._config = conf
        return cls._config

    @classmethod
    def _postmap(cls, *args: str, stdin: bytes | None = None) -> bytes:
        return _run(["postmap", "-c", str(cls.config_dir()), *args], stdin=stdin)

    @classmethod
    def records(cls, seed: int = 28) -> dict[str, str]:
        rng = random.Random(seed)
        out: dict[str, str] = {"postmaster": "root", "abuse": "root, security@example.org"}
        domains = ["example.org", "example.net", "müller.de", "例え.jp"]
        while len(out) < 3000:
            user = "".join(rng.choice("abcdefghijklmnopqrstuvwxyz0123456789.-_") for _ in range(6))
            key = f"{user}@{rng.choice(domains)}" if rng.randrange(3) else f"@{user}.example"
            n = rng.randrange(1, 4)
            out[key] = ", ".join(
                f"{rng.choice(['jürgen', 'zoë', 'ann'])}{i}@local" for i in range(n)
            )
        out["josé@exemple.fr"] = "Ünïcödé Ädresse <jose@local>"
        out["liste@example.org"] = ", ".join(f"member{i:06d}@example.org" for i in range(52000))
        assert len(out["liste@example.org"]) >= ONE_MB
        return out

    @classmethod
    def write(cls, path: Path, records: dict[str, str]) -> None:
        """Writes the source text ``path`` without its ``.lmdb`` and runs postmap on it."""
        assert path.name.endswith(".lmdb"), path
        source = path.with_name(path.name[: -len(".lmdb")])
        source.write_text(
            "# aliases, as a mail admin keeps them\n"
            + "".join(f"{k}\t{v}\n" for k, v in records.items()),
            encoding="utf-8",
        )
        cls._postmap(f"lmdb:{source}")
        source.unlink()  # the store is the .lmdb file alone
        assert path.is_file(), path

    @classmethod
    def read(cls, path: Path) -> dict[str, Any]:
        """``postmap -s`` (every record, as bytes) and each key looked up with ``-q``."""
        assert path.name.endswith(".lmdb"), path
        table = f"lmdb:{path.with_name(path.name[: -len('.lmdb')])}"
        listing = [tuple(line.split(b"\t", 1)) for line in cls._postmap("-s", table).splitlines()]
        keys = [k for k, *_ in listing]
        answered = cls._postmap("-q", "-", table, stdin=b"".join(k + b"\n" for k in keys))
        found = dict(tuple(line.split(b"\t", 1)) for line in answered.splitlines())
        single = {}  # one process per key, as a script asks postmap -q KEY
        for key in [*keys[:5], b"liste@example.org", "josé@exemple.fr".encode(), b"nobody@x"]:
            res = subprocess.run(
                ["postmap", "-c", str(cls.config_dir()), "-q", key, table],
                capture_output=True,
                timeout=TIMEOUT,
                check=False,
            )
            single[key] = (res.returncode, res.stdout)
        return {"list": listing, "query": found, "single": single}

    @staticmethod
    def shape(path: Path) -> dict[str, Any]:
        return {
            "files": sorted(p.name for p in path.parent.iterdir()),
            "databases": lmdb_databases(path, subdir=False),
        }


class PyLmdbApp:
    """py-lmdb: an environment directory with named databases opened with their flags.

    ``kind`` picks the flagged database the store has beside a plain ``settings``
    database (1 MB value, empty values, NUL keys):

    - ``dupsort``: ``open_db(b"threads", dupsort=True)`` holding duplicates;
    - ``dupsort-unique``: the same flag, each key once;
    - ``integerkey``: ``open_db(b"seq", integerkey=True)``, keys native 8-byte unsigned
      integers (LMDB orders them as numbers, not as bytes).
    """

    engine = "lmdb"
    store_name = "app.lmdb"
    FLAGS: ClassVar[dict[str, tuple[str, dict[str, bool]]]] = {
        "dupsort": ("threads", {"dupsort": True}),
        "dupsort-unique": ("threads", {"dupsort": True}),
        "integerkey": ("seq", {"integerkey": True}),
    }

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self.name = f"py-lmdb {kind}"
        self.flagged, self.flags = self.FLAGS[kind]
        self.layout = f"""\
engine = "lmdb"
metadata = "none"
[kv]
mode = "namespaces"
tables = {{ {self.flagged} = "{self.flagged}", settings = "settings" }}
"""

    @staticmethod
    def available() -> str | None:
        return _missing_module("lmdb", "lmdb")

    def records(self, seed: int = 28) -> dict[str, list[tuple[bytes, bytes]]]:
        rng = random.Random(seed)
        flagged: list[tuple[bytes, bytes]] = []
        if self.kind == "integerkey":
            numbers = {0, 1, 255, 256, 2**32, 2**63, 2**64 - 1}
            while len(numbers) < 2500:
                numbers.add(rng.randrange(2**64) if rng.randrange(2) else rng.randrange(10**5))
            values = binary_values(rng, len(numbers), big=False)
            flagged = [(struct.pack("=Q", n), v) for n, v in zip(sorted(numbers), values)]
        else:
            # DUPSORT values are keys of the sub-database: 1..511 bytes, never empty.
            for key in binary_keys(rng, 1200 if self.kind == "dupsort" else 2500, max_len=40):
                count = rng.randrange(1, 6) if self.kind == "dupsort" else 1
                dups = {
                    bytes(rng.randrange(256) for _ in range(rng.randrange(1, 60)))
                    for _ in range(count)
                }
                if self.kind == "dupsort" and len(key) % 3 == 0:
                    dups.update({b"\x00", "ünïcödé".encode(), b"\xff" * 511})
                flagged += [(key, v) for v in sorted(dups)]
        settings_keys = binary_keys(rng, 800, max_len=60)
        settings = list(zip(settings_keys, binary_values(rng, len(settings_keys))))
        return {self.flagged: flagged, "settings": settings}

    def _open_dbs(self, env: Any, txn: Any = None, create: bool = True) -> dict[str, Any]:
        return {
            self.flagged: env.open_db(self.flagged.encode(), txn=txn, create=create, **self.flags),
            "settings": env.open_db(b"settings", txn=txn, create=create),
        }

    def write(self, path: Path, records: dict[str, list[tuple[bytes, bytes]]]) -> None:
        import lmdb

        env = lmdb.open(str(path), max_dbs=8, map_size=1 << 28)
        try:
            dbs = self._open_dbs(env)
            rng = random.Random(7)
            for name, items in records.items():
                items = list(items)
                rng.shuffle(items)  # an app writes in its own order
                with env.begin(write=True) as txn:
                    for key, value in items:
                        assert txn.put(key, value, db=dbs[name], dupdata=True), (name, key)
        finally:
            env.close()

    def read(self, path: Path) -> dict[str, list[tuple[bytes, bytes]]]:
        """Every (key, value) of each database, opened with the app's flags, in LMDB's order."""
        import lmdb

        env = lmdb.open(str(path), max_dbs=8, readonly=True, lock=False)
        try:
            with env.begin() as txn:
                dbs = self._open_dbs(env, txn=txn, create=False)
                out = {name: list(txn.cursor(db)) for name, db in dbs.items()}
                out["flags"] = [(name, db.flags(txn)) for name, db in dbs.items()]  # type: ignore[list-item]
                return out
        finally:
            env.close()

    @staticmethod
    def shape(path: Path) -> dict[str, Any]:
        """The environment's files (but ``lock.mdb``, which LMDB makes again at any open)
        and its databases with their flags."""
        return {
            "files": sorted(p.name for p in path.iterdir() if p.name != "lock.mdb"),
            "databases": lmdb_databases(path, subdir=True),
        }


# RocksDB: Debian's ldb (RocksDB 7.8) with a C++ app built against librocksdb-dev, and
# rocksdict.

_rocksdb_open_exe: Path | None = None


def rocksdb_open_exe() -> Path:
    """tests/apps/rocksdb_open.cc built against Debian's librocksdb-dev, once per process."""
    global _rocksdb_open_exe
    if _rocksdb_open_exe is None:
        out = _session_dir("rocksdb-open-") / "rocksdb_open"
        _run(["g++", "-std=c++17", "-O1", "-o", str(out), str(ROCKSDB_OPEN_SOURCE), "-lrocksdb"])
        _rocksdb_open_exe = out
    return _rocksdb_open_exe


# The file names RocksDB itself makes in a store directory.
ROCKSDB_FILE = re.compile(
    r"(CURRENT|IDENTITY|LOCK|LOG(\.old\.\d+)?|MANIFEST-\d+|OPTIONS-\d+(\.dbtmp)?"
    r"|\d+\.(sst|log|blob))"
)


def rocksdb_column_families(path: Path) -> list[str]:
    """``ldb list_column_families``: the families RocksDB 7.8 finds in the MANIFEST."""
    out = _run(["ldb", f"--db={path}", "list_column_families"]).decode()
    listed = out[out.index("{") + 1 : out.rindex("}")]
    return sorted(name.strip() for name in listed.split(","))  # MANIFEST order is no property


class LdbApp:
    """Debian's ``ldb`` (RocksDB 7.8) writing the default column family, read back by ldb's
    ``scan --hex`` and by tests/apps/rocksdb_open.cc, which opens the store as an app does
    (``DB::Open(options, path)``: the default column family only)."""

    name = "ldb"
    engine = "rocksdb"
    store_name = "app.rocksdb"
    layout = """\
engine = "rocksdb"
metadata = "none"
[kv]
mode = "namespaces"
tables = { data = "" }
"""

    @staticmethod
    def available() -> str | None:
        return _missing_binaries("ldb", package="rocksdb-tools") or (
            None
            if Path("/usr/include/rocksdb/db.h").exists() and shutil.which("g++")
            else "rocksdb/db.h or g++ not found: apt-get install librocksdb-dev g++"
        )

    @staticmethod
    def records(seed: int = 28) -> list[tuple[bytes, bytes]]:
        rng = random.Random(seed)
        keys = binary_keys(rng, 3000)
        return list(zip(keys, binary_values(rng, len(keys))))

    @staticmethod
    def write(path: Path, records: list[tuple[bytes, bytes]]) -> None:
        """``ldb --create_if_missing --hex load``, one ``0xKEY ==> 0xVALUE`` line per record,
        then one ``put`` (a second write, as an app's later session makes)."""
        lines = b"".join(
            b"0x%s ==> 0x%s\n" % (k.hex().encode(), v.hex().encode()) for k, v in records
        )
        _run(["ldb", f"--db={path}", "--create_if_missing", "--hex", "load"], stdin=lines)
        key, value = records[0]
        _run(
            [
                "ldb",
                f"--db={path}",
                "put",
                "--key_hex",
                "--value_hex",
                f"0x{key.hex()}",
                f"0x{value.hex()}",
            ]
        )

    @staticmethod
    def read(path: Path) -> dict[str, list[tuple[bytes, bytes]]]:
        """What ``ldb scan --hex`` lists and what ``DB::Open`` + an iterator see."""
        scanned = []
        for line in _run(["ldb", f"--db={path}", "scan", "--hex"]).splitlines():
            key, value = line.split(b" : ")
            scanned.append((bytes.fromhex(key[2:].decode()), bytes.fromhex(value[2:].decode())))
        opened = []
        for line in _run([str(rocksdb_open_exe()), str(path)]).splitlines():
            key, value = line.split(b" ")
            opened.append((bytes.fromhex(key.decode()), bytes.fromhex(value.decode())))
        return {"ldb_scan": scanned, "db_open": opened}

    @staticmethod
    def shape(path: Path) -> dict[str, Any]:
        return {
            "column_families": rocksdb_column_families(path),
            "foreign_files": sorted(
                p.name for p in path.iterdir() if not ROCKSDB_FILE.fullmatch(p.name)
            ),
        }


class RocksdictApp:
    """rocksdict (PyPI) in raw mode (``Options(raw_mode=True)``: keys and values bytes,
    RocksDB's bytewise comparator), with four column families beside the default one;
    rocksdict keeps ``rocksdict-config.json`` (``{"raw_mode":true,...}``) in the store's
    directory. (rocksdict's default mode sets its own comparator, named "rocksdict": see
    ``default_mode_store``.)"""

    name = "rocksdict"
    engine = "rocksdb"
    store_name = "app.rocksdb"
    families = ("users", "sessions", "events", "settings")
    layout = None  # every column family is a table: statemigrate's default layout
    # The same families named in a layout without in-store metadata: the app's shape exactly.
    exact_layout = """\
engine = "rocksdb"
metadata = "none"
[kv]
mode = "namespaces"
tables = { default = "", users = "users", sessions = "sessions", events = "events", settings = "settings" }
rocksdict_config = true
"""

    @staticmethod
    def available() -> str | None:
        return _missing_module("rocksdict", "rocksdict")

    @classmethod
    def records(cls, seed: int = 28) -> dict[str, dict[bytes, bytes]]:
        rng = random.Random(seed)
        out: dict[str, dict[bytes, bytes]] = {}
        keys = binary_keys(rng, 600)
        out["default"] = dict(zip(keys, binary_values(rng, len(keys), big=False)))
        out["users"] = {
            f"user:{i}".encode(): f'{{"name": "Zoë {i}", "age": {i % 90}}}'.encode()
            for i in range(600)
        }
        out["sessions"] = {
            struct.pack(">Q", i * 7919): bytes(rng.randrange(256) for _ in range(32))
            for i in range(600)
        }
        out["events"] = {
            struct.pack(">Q", i) + b"\x00": f"ereignis {i} ✓".encode() if i % 4 else b""
            for i in range(600)
        }
        out["settings"] = {b"blob": b"\x07" * ONE_MB, b"empty": b"", "ünï".encode(): b"ja"}
        return out

    @classmethod
    def write(cls, path: Path, records: dict[str, dict[bytes, bytes]]) -> None:
        from rocksdict import Options, Rdict

        db = Rdict(str(path), Options(raw_mode=True))
        try:
            for name in cls.families:
                cf = db.create_column_family(name, Options(raw_mode=True))
                for key, value in records[name].items():
                    cf[key] = value
                del cf
            for key, value in records["default"].items():
                db[key] = value
        finally:
            db.close()

    @classmethod
    def read(cls, path: Path) -> dict[str, Any]:
        """The items of each of the app's column families, in rocksdict's order (the list
        of families is the store's shape: ``shape``)."""
        from rocksdict import Options, Rdict

        db = Rdict(str(path), Options(raw_mode=True))
        try:
            out: dict[str, Any] = {}
            for name in ["default", *cls.families]:
                cf = db.get_column_family(name)
                out[name] = list(cf.items())
                del cf
            return out
        finally:
            db.close()

    @staticmethod
    def default_mode_store(path: Path) -> None:
        """A store of rocksdict's default mode (Python objects as keys): its comparator is
        rocksdict's own ("rocksdict"), which orders encoded objects, not bytes."""
        from rocksdict import Options, Rdict

        db = Rdict(str(path), Options())
        try:
            for i in range(100):
                db[i] = {"n": i}
                db[f"k{i}"] = b"v"
        finally:
            db.close()

    @staticmethod
    def shape(path: Path) -> dict[str, Any]:
        config = path / "rocksdict-config.json"
        return {
            "column_families": rocksdb_column_families(path),
            "foreign_files": sorted(
                p.name for p in path.iterdir() if not ROCKSDB_FILE.fullmatch(p.name)
            ),
            "rocksdict_config": json.loads(config.read_text()) if config.exists() else None,
        }
