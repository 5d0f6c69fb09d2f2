"""Links and special files inside a directory store (issue 27, C1 and C8).

A user who owns a store can plant ``OPTIONS-000014 -> /root/secret`` in it; statemigrate
runs as root in an installer. Nothing may follow such a link: every verb that reads,
copies, images or backs up the store refuses it (exit 4, one line naming the link)
before anything is written, and the secret's bytes end up in no file anywhere. A link
whose target lies inside the same store is that file (C8: a store whose table files are
relative links reads exactly as the store without them).

Run as a real attack would: the store and the replaced destination are owned by
``nobody``, the tool runs as root. Expectations come from outside the code under test:
the secret's own bytes and sha256, the source tree's hashes taken before, rocksdict
reading the original store.
"""

from __future__ import annotations

import hashlib
import os
import secrets
import shutil
import stat
from pathlib import Path

import pytest

from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.cli import describe, one_line_error, run_cli
from statemigrate.testing.example import EXAMPLE, seeded
from statemigrate.testing.stores import leftovers

DIR_ENGINES = [n for n in engine_names() if get_engine(n).capabilities.directory]
NOBODY = 65534

# Files to plant a link at, per engine (glob patterns inside the store; the last match
# in name order is taken): each engine's metadata and table files, its journal.
PLANTS: dict[str, tuple[str, ...]] = {
    "rocksdb": ("OPTIONS-*", "*.sst", "MANIFEST-*", "CURRENT"),
    "fjall2": ("partitions/events/segments/*", "journals/*", "partitions/events/config"),
    "fjall3": ("keyspaces/*/tables/*", "*.jnl", "keyspaces/*/current"),
    "helixdb": ("db/manifest/*.manifest", "db/wal/*.sst", "db/compacted/*.sst"),
    "turbokv": ("MANIFEST", "sstables/**/*.sst", "wal/*.wal"),
    "lmdb": ("data.mdb",),
}
# The table files C8 moves into a subdirectory of the store and links back relatively.
TABLE_FILES: dict[str, str] = {
    "rocksdb": "*.sst",
    "fjall2": "partitions/*/segments/*",
    "fjall3": "keyspaces/*/tables/*",
    "helixdb": "db/compacted/*.sst",
    "turbokv": "sstables/**/*.sst",
}
# Not a link case: LMDB's data.mdb is one file that no engine images (lock.mdb: H2's).
OTHER_ENGINE = "sqlite"


def cases() -> list:
    return [
        pytest.param(n, pattern, id=f"{n}-{pattern}")
        for n in DIR_ENGINES
        for pattern in PLANTS.get(n, ())
    ]


def chown_tree(path: Path, uid: int = NOBODY) -> None:
    """Give every entry below ``path`` (and ``path``) to ``uid``, links themselves included."""
    os.lchown(path, uid, uid)
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            os.lchown(os.path.join(root, name), uid, uid)


def tree_state(path: Path) -> dict[str, str]:
    """What is in a tree, links not followed: a file's sha256, a link's target text."""
    out = {}
    for root, dirs, files in os.walk(path):
        for name in (*dirs, *files):
            p = Path(root) / name
            st = os.lstat(p)
            rel = str(p.relative_to(path))
            if stat.S_ISLNK(st.st_mode):
                out[rel] = "link:" + os.readlink(p)
            elif stat.S_ISREG(st.st_mode):
                out[rel] = hashlib.sha256(p.read_bytes()).hexdigest()
            else:
                out[rel] = stat.filemode(st.st_mode)
    return out


def files_holding(root: Path, needle: bytes, but: Path) -> list[str]:
    """Every regular file below ``root`` (``but`` aside) whose bytes contain ``needle``."""
    found = []
    for r, _dirs, files in os.walk(root):
        for name in files:
            p = Path(r) / name
            if p == but or not stat.S_ISREG(os.lstat(p).st_mode):
                continue
            if needle in p.read_bytes():
                found.append(str(p))
    return found


def planted(path: Path, pattern: str) -> Path:
    matches = sorted(p for p in path.glob(pattern) if p.is_file() and not p.is_symlink())
    assert matches, f"no {pattern} in {sorted(os.listdir(path))}"
    return matches[-1]


@pytest.fixture
def secret(tmp_path: Path):
    """A root-only file (0600, in a 0700 directory) holding a unique random byte string."""
    vault = tmp_path / "vault"
    vault.mkdir(mode=0o700)
    path = vault / "secret"
    data = b"SECRET-" + secrets.token_hex(24).encode() + b"\n"
    path.write_bytes(data)
    os.chmod(path, 0o600)
    return path, data, hashlib.sha256(data).hexdigest()


def assert_link_refused(run, link: Path) -> None:
    assert run.returncode == 4, describe(run)
    line = one_line_error(run)
    assert str(link) in line and "link" in line, line
    assert "damaged" not in line and "corrupt" not in line, line


@pytest.mark.parametrize(("name", "pattern"), cases())
def test_a_link_out_of_the_store_is_never_followed(
    name: str, pattern: str, tmp_path: Path, secret
) -> None:
    """convert (same engine onto a nobody-owned store with --overwrite, and to another
    engine), checksum and upgrade --backup all refuse the link, exit 4, naming it;
    nothing is left at any destination and the secret is in no file."""
    secret_path, secret_data, secret_sha = secret
    eng = get_engine(name)
    src = Path(seeded(eng, tmp_path, events=40, name="src").split(":", 1)[1])
    dst = Path(seeded(eng, tmp_path, events=5, name="dst").split(":", 1)[1])
    link = planted(src, pattern)
    link.unlink()
    os.symlink(secret_path, link)
    chown_tree(src)
    chown_tree(dst)
    src_before, dst_before = tree_state(src), tree_state(dst)

    same = run_cli(["convert", "--quiet", "--overwrite", f"{name}:{src}", f"{name}:{dst}"])
    assert_link_refused(same, link)
    assert tree_state(dst) == dst_before and leftovers(dst) == []

    other = tmp_path / "other.sqlite"
    cross = run_cli(["convert", "--quiet", f"{name}:{src}", f"{OTHER_ENGINE}:{other}"])
    assert_link_refused(cross, link)
    assert not os.path.lexists(other) and leftovers(other) == []

    assert_link_refused(run_cli(["checksum", f"{name}:{src}"]), link)

    backup = tmp_path / "backups" / "before"
    backup.parent.mkdir()
    up = run_cli(["upgrade", "--quiet", f"{name}:{src}", "--schema", EXAMPLE, "--backup", backup])
    assert_link_refused(up, link)
    assert os.listdir(backup.parent) == []

    assert tree_state(src) == src_before
    assert files_holding(tmp_path, secret_data.strip(), but=secret_path) == []
    assert hashlib.sha256(secret_path.read_bytes()).hexdigest() == secret_sha


def rocksdb_items(path: Path) -> dict[str, list[tuple[bytes, bytes]]]:
    """Every column family's records, read by rocksdict from a copy of the store."""
    import tempfile

    import rocksdict

    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "copy"
        shutil.copytree(path, copy)  # rocksdict writes into what it opens
        opts = rocksdict.Options(raw_mode=True)
        names = rocksdict.Rdict.list_cf(str(copy), opts)
        db = rocksdict.Rdict(
            str(copy),
            opts,
            column_families={n: opts for n in names if n != "default"},
            access_type=rocksdict.AccessType.read_only(),
        )
        try:
            out = {}
            for n in names:
                cf = db if n == "default" else db.get_column_family(n)
                out[n] = list(cf.items())
                del cf
            return out
        finally:
            db.close()


@pytest.mark.parametrize("name", [n for n in DIR_ENGINES if n in TABLE_FILES])
def test_table_files_linked_inside_the_store_read_exactly(name: str, tmp_path: Path) -> None:
    """C8: table files moved into a subdirectory of the store and linked back by relative
    links read as the store did before: the same digest, and (RocksDB) the same records
    as rocksdict reads from the original, through the same-engine copy too."""
    eng = get_engine(name)
    # 12,000 events: table files above the size below which images copy small files.
    plain = Path(seeded(eng, tmp_path, events=12_000, name="plain").split(":", 1)[1])
    linked = tmp_path / f"linked.{name}"
    shutil.copytree(plain, linked, symlinks=True)
    moved = 0
    for f in sorted(linked.glob(TABLE_FILES[name])):
        if not f.is_file() or f.is_symlink():
            continue
        kept = linked / "kept" / f.relative_to(linked)
        kept.parent.mkdir(parents=True, exist_ok=True)
        os.rename(f, kept)
        os.symlink(os.path.relpath(kept, f.parent), f)
        moved += 1
    assert moved, "no table file to link"
    chown_tree(linked)

    want = run_cli(["checksum", f"{name}:{plain}"])
    got = run_cli(["checksum", f"{name}:{linked}"])
    assert want.returncode == 0, describe(want)
    assert got.returncode == 0, describe(got)
    assert got.stdout.split()[0] == want.stdout.split()[0]

    copy = tmp_path / f"copy.{name}"
    run = run_cli(["convert", "--quiet", f"{name}:{linked}", f"{name}:{copy}"])
    assert run.returncode == 0, describe(run)
    assert not any(os.path.islink(Path(r) / f) for r, _d, fs in os.walk(copy) for f in fs)
    if name == "rocksdb":
        assert rocksdb_items(copy) == rocksdb_items(plain)
    other = tmp_path / "other.sqlite"
    run = run_cli(["convert", "--quiet", f"{name}:{linked}", f"{OTHER_ENGINE}:{other}"])
    assert run.returncode == 0, describe(run)


@pytest.mark.parametrize("name", DIR_ENGINES)
def test_a_link_inside_the_store_to_one_of_its_directories_is_refused(
    name: str, tmp_path: Path
) -> None:
    """A link to a directory (even the store's own) is not a store's file: exit 4, named."""
    eng = get_engine(name)
    src = Path(seeded(eng, tmp_path, events=10, name="src").split(":", 1)[1])
    link = src / "loop"
    os.symlink(".", link)
    run = run_cli(["checksum", f"{name}:{src}"])
    assert_link_refused(run, link)


@pytest.mark.parametrize("name", DIR_ENGINES)
def test_a_fifo_inside_the_store_is_refused_before_any_copy(name: str, tmp_path: Path) -> None:
    """A FIFO among the store's files: the same-engine convert and upgrade --backup are
    exit 4 naming it, with nothing at the destination or the backup path."""
    eng = get_engine(name)
    src = Path(seeded(eng, tmp_path, events=10, name="src").split(":", 1)[1])
    fifo = src / "999999.fifo"
    os.mkfifo(fifo)
    dst = tmp_path / f"dst.{name}"
    run = run_cli(["convert", "--quiet", f"{name}:{src}", f"{name}:{dst}"])
    assert run.returncode == 4, describe(run)
    assert "FIFO" in one_line_error(run) and str(fifo) in one_line_error(run)
    assert not os.path.lexists(dst) and leftovers(dst) == []
    backup = tmp_path / "backups" / "before"
    backup.parent.mkdir()
    up = run_cli(["upgrade", "--quiet", f"{name}:{src}", "--schema", EXAMPLE, "--backup", backup])
    assert up.returncode == 4, describe(up)
    assert "FIFO" in one_line_error(up) and str(fifo) in one_line_error(up)
    assert os.listdir(backup.parent) == []


@pytest.mark.parametrize("way", ["copy", "link", "link-or-symlink"])
def test_a_link_swapped_in_after_the_walk_is_refused_not_followed(
    way: str, tmp_path: Path, secret, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The owner swaps a file for a link between the walk and the copy (the race a
    check by path alone loses): the descriptor's check refuses it, exit 4 naming the
    file, and the destination is removed with nothing of the secret in it."""
    from statemigrate.engines import snapshot
    from statemigrate.errors import SourceError

    secret_path, secret_data, _sha = secret
    store = tmp_path / "store"
    (store / "sub").mkdir(parents=True)
    victim = store / "sub" / "000001.sst"
    victim.write_bytes(b"table")
    walk = snapshot.store_files

    def walk_then_swap(*args, **kwargs):
        found = walk(*args, **kwargs)
        victim.unlink()
        os.symlink(secret_path, victim)
        return found

    monkeypatch.setattr(snapshot, "store_files", walk_then_swap)
    dest = tmp_path / "dest"
    with pytest.raises(SourceError) as refused:
        snapshot.replicate(store, dest, lambda f: way)  # type: ignore[arg-type, return-value]
    assert str(victim) in refused.value.message and "link" in refused.value.message
    assert not os.path.lexists(dest)
    assert files_holding(tmp_path, secret_data.strip(), but=secret_path) == []
