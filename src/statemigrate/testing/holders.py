"""A running app that holds a store: a real process per engine, for the busy tests.

Each holder is a ``python -c`` child that opens the store with the engine's own driver
the way an application does (never through statemigrate's writers), reads from it,
prints ``ready`` and then sits idle until it is killed:

- sqlite, libsql: a connection in WAL mode (the app switches the file to WAL, as apps
  do), one read done, no transaction open;
- turso: a pyturso connection, one read done;
- lmdb: the environment open (``lmdb.open``), one read transaction done;
- rocksdb: the database open with all its column families (``rocksdict.Rdict``);
- redb: the file open through redb's ``Database::open`` (the project's binding, the
  same call an app's redb makes), one read done;
- helixdb: an embedded client on the store's database (``Client.embedded``), the store
  named on its command line as an app names its data directory;
- jsonl: the dump open for reading (a dump carries no lock);
- fjall2, fjall3: the database open through the project's binding of the real crate
  (fjall 3 locks its ``lock`` file; fjall 2 has no lock).

With ``writing=True`` the app also sits inside a write transaction where the engine has
one (SQL engines: ``BEGIN IMMEDIATE``; LMDB: a write transaction). Every holder waits on
its standard input, so it also ends when the test process dies.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

# Seconds a holder may take to open the store and say "ready" before the test fails as a
# hang (a hang guard, not a time bound: opening takes well under a second).
START_GUARD = 60.0

_WAIT = "print('ready', flush=True)\nsys.stdin.read()\n"

APP_CODE: dict[str, str] = {
    "sqlite": (
        "import sys\n"
        "import apsw\n"
        "c = apsw.Connection(sys.argv[1])\n"
        "c.execute('PRAGMA journal_mode=WAL').fetchall()\n"
        "c.execute('SELECT count(*) FROM sqlite_schema').fetchall()\n"
        "if sys.argv[2] == 'write':\n"
        "    c.execute('BEGIN IMMEDIATE')\n"
    )
    + _WAIT,
    "libsql": (
        "import sys\n"
        "try:\n"
        "    import libsql\n"
        "except ImportError:\n"
        "    import libsql_experimental as libsql\n"
        "c = libsql.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('PRAGMA journal_mode=WAL').fetchall()\n"
        "c.execute('SELECT count(*) FROM sqlite_schema').fetchall()\n"
        "if sys.argv[2] == 'write':\n"
        "    c.execute('BEGIN IMMEDIATE')\n"
    )
    + _WAIT,
    "turso": (
        "import sys\n"
        "import turso\n"
        "c = turso.connect(sys.argv[1], isolation_level=None)\n"
        "c.execute('SELECT count(*) FROM sqlite_schema').fetchall()\n"
        "if sys.argv[2] == 'write':\n"
        "    c.execute('BEGIN IMMEDIATE')\n"
    )
    + _WAIT,
    "lmdb": (
        "import sys\n"
        "import lmdb\n"
        "env = lmdb.open(sys.argv[1], subdir=True, max_dbs=64)\n"
        "with env.begin() as txn:\n"
        "    txn.stat()\n"
        "if sys.argv[2] == 'write':\n"
        "    held = env.begin(write=True)\n"
    )
    + _WAIT,
    "rocksdb": (
        "import sys\n"
        "import rocksdict\n"
        "o = rocksdict.Options(raw_mode=True)\n"
        "names = rocksdict.Rdict.list_cf(sys.argv[1], o)\n"
        "db = rocksdict.Rdict(sys.argv[1], o, column_families={n: o for n in names if n != 'default'})\n"
    )
    + _WAIT,
    "redb": (
        "import sys\n"
        "from statemigrate import _native\n"
        "db = _native.RedbWriter(sys.argv[1], int(sys.argv[3]), False)\n"
        "db.list_tables()\n"
    )
    + _WAIT,
    "helixdb": (
        "import sys\n"
        "from helixdb import Client, Disk\n"
        "client = Client.embedded(Disk(sys.argv[3], sys.argv[4]))\n"
    )
    + _WAIT,
    "jsonl": ("import sys\nf = open(sys.argv[1], 'rb')\nf.readline()\n") + _WAIT,
    # fjall 3 takes a flock on its lock file; fjall 2 takes no lock at all.
    **{
        f"fjall{major}": (
            "import sys\n"
            "from statemigrate import _native\n"
            f"db = _native.FjallWriter(sys.argv[1], {major}, False)\n"
            "db.names()\n"
        )
        + _WAIT
        for major in (2, 3)
    },
}


def _extra_args(engine: str, path: Path) -> list[str]:
    """What an app knows beside the path: redb's file format, HelixDB's database name."""
    if engine == "redb":
        from ..engines.redb import read_header

        return [str(read_header(path)["format"])]
    if engine == "helixdb":
        from ..engines.helixdb import database_of

        database = database_of(path)
        if database is None:
            raise AssertionError(f"{path}: not a HelixDB store, nothing for the app to open")
        return [str(database.parent), database.name]
    return []


def _first_line(proc: subprocess.Popen[str], guard: float) -> str | None:
    """The child's first line of output, or None when it has said nothing after ``guard`` s."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        lines.put(proc.stdout.readline() if proc.stdout else "")

    threading.Thread(target=read, daemon=True).start()
    try:
        return lines.get(timeout=guard)
    except queue.Empty:
        return None


@contextmanager
def running(
    code: str, args: Sequence[str], *, cwd: Path | None = None, guard: float = START_GUARD
) -> Iterator[int]:
    """Run ``python -c code *args`` until it prints ``ready``; yield its pid; kill it on exit.

    Args:
        code: the program; it prints ``ready`` once it holds what it should.
        args: its arguments (``sys.argv[1:]``).
        cwd: its working directory (paths in ``args`` may be relative to it).
        guard: seconds after which a child that has not said ``ready`` fails the test
            as a hang.

    Raises:
        AssertionError: the child ended or hung before it was ready.
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )
    try:
        line = _first_line(proc, guard)
        if line is None:
            raise AssertionError(f"the holder did not say 'ready' within {guard:.0f}s (hang guard)")
        if line.strip() != "ready":
            proc.kill()
            err = proc.communicate()[1]
            raise AssertionError(f"the holder did not start: {line!r}\n{err[-2000:]}")
        yield proc.pid
    finally:
        proc.kill()
        proc.communicate()


@contextmanager
def app_holding(engine: str, path: Path, *, writing: bool = False) -> Iterator[int]:
    """A real app process holds the store at ``path`` open the way ``engine``'s apps do.

    Args:
        engine: the engine's name (a key of :data:`APP_CODE`).
        path: the store.
        writing: also sit inside an open write transaction, where the engine has them.

    Yields:
        The app's pid; the app is killed when the block ends.
    """
    args = [str(path), "write" if writing else "idle", *_extra_args(engine, path)]
    with running(APP_CODE[engine], args) as pid:
        yield pid


__all__ = ["APP_CODE", "START_GUARD", "app_holding", "running"]
