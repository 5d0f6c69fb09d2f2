"""No write opens a file at a store through a link (issue 27, C2).

A user who owns a store plants a symbolic link where the engine keeps one of its side
files (LMDB's ``lock.mdb``, RocksDB's ``LOCK``, SQLite's ``-wal`` …), pointing at a file
of root's; root then runs a verb that writes the store (``stamp``, ``upgrade``, or a
``convert --resume`` into a ``.partial``). The driver would open the link with
``O_CREAT|O_RDWR`` and write its lock table, log or journal into root's file (LMDB
overwrote it with 8 KiB). Every such verb must refuse (exit 5, one line naming the file)
before the driver opens the store.

The store is owned by ``nobody``, who plants the link (``setpriv``), as a real attack
would; the target is root's, 0600, outside the store. Expected from outside the code
under test: the target's sha256, the sha256 of every other file of the store, LMDB's
records as py-lmdb reads them, and the list of files each driver opens for writing
(:data:`WRITTEN`, from the drivers' sources), against which the engines' declarations
(:attr:`Engine.side_files`) are checked too.
"""

from __future__ import annotations

import glob
import hashlib
import os
import pwd
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from statemigrate.fsutil import CRASH_ENV
from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.cli import describe, one_line_error, run_cli
from statemigrate.testing.example import EXAMPLE, seeded
from statemigrate.testing.stores import build_store, spec

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="planting as another account needs root")

# What each engine's writer opens at an existing store (a name inside a directory store,
# a suffix beside a one-file store, a shell pattern for files the store names by number,
# "" for the store's own file), read from the drivers' sources: LMDB's mdb_env_open
# opens data.mdb and lock.mdb O_CREAT|O_RDWR; SQLite's -wal, -shm and -journal; RocksDB's
# LOCK (O_CREAT, then a lock), LOG (renamed aside, made again) and IDENTITY; fjall 3's
# lock and journals (opened read-write and truncated at recovery), fjall 2's journals;
# HelixDB's writer lock (statemigrate's, truncated to hold its pid); TurboKV's lock;
# the JSON-lines writer's checkpoint and the temporary file it renames over it.
WRITTEN: dict[str, tuple[str, ...]] = {
    "lmdb": ("lock.mdb", "data.mdb"),
    "sqlite": ("", "-wal", "-shm", "-journal"),
    "libsql": ("", "-wal", "-shm", "-journal"),
    "turso": ("", "-wal", "-shm"),
    "rocksdb": ("LOCK", "LOG", "IDENTITY"),
    "fjall3": ("lock", "*.jnl"),
    "fjall2": ("journals/*",),
    "helixdb": ("statemigrate.lock",),
    "redb": ("",),
    "turbokv": (".turbokv.lock",),
    "jsonl": ("", ".checkpoint", ".checkpoint.tmp"),
}
# Files whose content the driver checks before it writes: the link leads to a copy of
# the store's own file (root's other store), which the driver would then write.
CHECKED = ("", "data.mdb", "*.jnl", "journals/*", "IDENTITY")

VERBS = {
    "stamp base": ["stamp", "--schema", str(EXAMPLE), "{store}", "base"],
    "stamp 0002": ["stamp", "--schema", str(EXAMPLE), "{store}", "0002"],
    "upgrade": ["upgrade", "--schema", str(EXAMPLE), "{store}"],
}


def cases() -> list[tuple[str, str, str]]:
    out = []
    for name in engine_names():
        verbs = [*VERBS, "convert --resume"]
        if not get_engine(name).capabilities.in_place:
            verbs = ["convert --resume"]
        out += [(name, f, v) for f in WRITTEN.get(name, ()) for v in verbs]
    return out


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def tree(path: Path, planted: Path) -> dict[str, str]:
    """sha256 of every regular file of the store (a file or a tree), links not followed."""
    roots = [path] + [p for p in path.parent.glob(path.name + "-*") if p != path]
    out: dict[str, str] = {}
    for root in roots:
        files = [root] if not root.is_dir() else sorted(p for p in root.rglob("*"))
        for f in files:
            if f == planted or f.is_symlink() or not f.is_file():
                continue
            if f.name in ("lock.mdb", "LOCK", "lock", ".turbokv.lock") or f.name.startswith("LOG"):
                continue  # rewritten by every open (reader tables, info logs)
            if f.name.endswith("-shm"):
                continue
            out[str(f.relative_to(path.parent))] = sha256(f)
    return out


def lmdb_records(path: Path) -> dict[bytes, list[tuple[bytes, bytes]]]:
    """Every named database's records, read by py-lmdb (read-only, no lock file written)."""
    import lmdb

    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=64)
    try:
        with env.begin() as txn:
            names = [k for k, _v in txn.cursor()]
            return {n: list(txn.cursor(env.open_db(n, txn=txn))) for n in names}
    finally:
        env.close()


def side_path(store: Path, name: str) -> Path:
    """Where ``name`` (the notation of :data:`WRITTEN`) is at ``store``."""
    if name == "" or name.startswith((".checkpoint", "-")):
        return Path(str(store) + name)
    if any(c in name for c in "*?["):
        found = sorted(glob.glob(glob.escape(str(store)) + "/" + name))
        assert found, f"{store}: nothing matches {name}"
        return Path(found[0])
    return store / name


@pytest.fixture
def world() -> Iterator[Path]:
    """A directory both accounts can reach (pytest's own is root's, 0700)."""
    top = Path(tempfile.mkdtemp(prefix="sm-sidefiles-"))
    os.chmod(top, 0o711)
    try:
        yield top
    finally:
        shutil.rmtree(top, ignore_errors=True)


def as_nobody(*argv: str) -> None:
    subprocess.run(
        ["setpriv", "--reuid", "nobody", "--regid", "nogroup", "--clear-groups", *argv],
        check=True,
        capture_output=True,
    )


def give_to_nobody(path: Path) -> None:
    nobody = pwd.getpwnam("nobody")
    for p in [path, *(path.rglob("*") if path.is_dir() else [])]:
        os.lchown(p, nobody.pw_uid, nobody.pw_gid)


def partial_store(engine: str, app: Path) -> tuple[list[str], Path]:
    """A ``.partial`` a killed convert left (a checkpoint in it); the resume's arguments."""
    src_engine = "sqlite" if engine == "jsonl" else "jsonl"
    src = app / f"src.{src_engine}"
    build_store(src_engine, src, 300)
    final = app / f"dst.{engine}"
    args = ["convert", "--quiet", "--batch-records", "20", spec(src_engine, src)]
    args.append(spec(engine, final))
    killed = run_cli(args, env={CRASH_ENV: "batch"}, timeout=120)
    assert killed.returncode == -9, describe(killed)
    partial = final.with_name(final.name + ".partial")
    assert partial.exists(), "the killed convert left no .partial"
    return [*args[:-1], "--resume", spec(engine, final)], partial


@needs_root
@pytest.mark.parametrize(("engine", "name", "verb"), cases())
def test_no_write_goes_through_a_link_at_a_side_file(
    world: Path, engine: str, name: str, verb: str
) -> None:
    victim_dir = world / "root"
    victim_dir.mkdir(mode=0o700)
    app = world / "app"
    app.mkdir()
    if verb == "convert --resume":
        args, store = partial_store(engine, app)
    else:
        store = Path(seeded(get_engine(engine), app, events=20).split(":", 1)[1])
        args = [a.replace("{store}", spec(engine, store)) for a in VERBS[verb]]
    side = side_path(store, name)
    target = victim_dir / "secret"
    if name in CHECKED and (side.is_file() or side.is_dir()):
        # root's other store (a copy of this one): what the driver would accept and write
        if side.is_dir():
            shutil.copytree(side, target)
        else:
            shutil.copyfile(side, target)
    else:
        target.write_bytes(os.urandom(8192 + 1000))
    if not target.is_dir():
        os.chmod(target, 0o600)
    before_target = tree(target, target) if target.is_dir() else sha256(target)
    give_to_nobody(app)
    if side.is_dir():
        shutil.rmtree(side)
    elif side.exists():
        side.unlink()
    as_nobody("ln", "-s", str(target), str(side))
    before = tree(store, side)
    records = lmdb_records(store) if engine == "lmdb" and name != "data.mdb" else None

    run = run_cli(args, timeout=120)

    after_target = tree(target, target) if target.is_dir() else sha256(target)
    assert after_target == before_target, f"{target} was written through {side}: {describe(run)}"
    # Exit 5: the writer refuses the store. A directory store's link out of it is also
    # refused by the rule every verb applies to a store's files first (issue 27, C1:
    # exit 4, the store cannot be read as it is); either names the link.
    codes = (4, 5) if get_engine(engine).capabilities.directory else (5,)
    assert run.returncode in codes, describe(run)
    line = one_line_error(run)
    assert str(side) in line and "link" in line, line
    assert side.is_symlink(), "the planted link was removed or replaced"
    assert tree(store, side) == before
    if records is not None:
        assert lmdb_records(store) == records


def test_every_engine_declares_what_its_writer_opens() -> None:
    """The declaration the check reads holds every file :data:`WRITTEN` names (and the
    store's own path is checked for every engine)."""
    missing = {}
    for name in engine_names():
        declared = {f.name for f in get_engine(name).side_files}
        wanted = set(WRITTEN.get(name, ())) - {""}
        if wanted - declared:
            missing[name] = sorted(wanted - declared)
    assert missing == {}
    assert set(WRITTEN) == set(engine_names())
