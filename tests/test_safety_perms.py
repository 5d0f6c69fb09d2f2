"""No one gains access: whatever the tool creates is no more readable than its source (B16).

A private store (``chmod 600``) converted under the usual umask 022 must not give a
destination, a ``.partial``, a side file, a private read copy or an upgrade backup that
other local accounts can read. Every test runs the real command in a subprocess under
umask 022 and walks every file and directory the run created.
"""

from __future__ import annotations

import os
import pwd
from collections.abc import Iterator
from pathlib import Path

import pytest

from statemigrate.engines.base import Engine
from statemigrate.errors import UsageError
from statemigrate.model import TableInfo, TableKind
from statemigrate.perms import creation_umask, keep_owner, mode_of_store, no_wider_than
from statemigrate.registry import get_engine
from statemigrate.testing.cli import run_cli
from statemigrate.testing.killpoints import copies_natively
from statemigrate.testing.stores import spec, store_file, write_store
from statemigrate.testing.upgrade_conformance import EXAMPLE, seeded, xfail_reason

# (the source's file mode, its directories' mode, the bits nothing created may have)
PRIVATE = (0o600, 0o700, 0o077)  # nothing for group and others
GROUP_READ = (0o640, 0o750, 0o027)  # group may read; nobody writes but the owner
MODES = [pytest.param(*PRIVATE, id="0600"), pytest.param(*GROUP_READ, id="0640")]

CONTENT = {
    TableInfo("events", TableKind.VERSIONED): [(b"k%03d" % i, b"v" * i, i) for i in range(5)],
    TableInfo("settings"): [(b"theme", b"dark"), (b"token", b"secret")],
}

needs_root = pytest.mark.skipif(
    os.geteuid() != 0, reason="giving a store to another account (chown) needs root"
)


@pytest.fixture
def umask_022() -> Iterator[None]:
    """The usual umask, inherited by the command run in a subprocess."""
    old = os.umask(0o022)
    try:
        yield
    finally:
        os.umask(old)


def entries(top: Path) -> list[Path]:
    """Every file and directory below ``top`` (symbolic links, whose mode means nothing, left out)."""
    out = []
    for root, dirs, files in os.walk(top):
        for name in (*dirs, *files):
            p = Path(root) / name
            if not p.is_symlink():
                out.append(p)
    return out


def too_wide(paths: list[Path], forbidden: int) -> list[str]:
    """``mode path`` of each path that has any of the ``forbidden`` bits."""
    return [f"{p.stat().st_mode & 0o777:o} {p}" for p in paths if p.stat().st_mode & forbidden]


def store_entries(engine: type[Engine], path: Path) -> list[Path]:
    """A store's file or directory, everything below it, and its sidecars (``-wal`` …)."""
    out = []
    for top in engine.store_paths(path):
        out += [top, *entries(top)] if top.is_dir() else [top]
    return out


def chmod_store(engine: type[Engine], path: Path, file_mode: int, dir_mode: int) -> None:
    """Give a store's files, directories and sidecars these modes."""
    for p in reversed(store_entries(engine, path)):  # deepest first
        os.chmod(p, dir_mode if p.is_dir() else file_mode)


def private_source(engine: type[Engine], where: Path, file_mode: int, dir_mode: int) -> Path:
    """A tiny store of ``engine`` in its own directory, chmod'ed to these modes."""
    where.mkdir()
    path = write_store(engine, store_file(engine.name, where, "src"), CONTENT)
    chmod_store(engine, path, file_mode, dir_mode)
    return path


def sqlite_source(tmp: Path, file_mode: int) -> Path:
    """A tiny SQLite store with this mode, in a 0700 directory of its own."""
    return private_source(get_engine("sqlite"), tmp / "src", file_mode, 0o700)


# --- the mechanism ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("mode", "umask"),
    [
        (0o600, 0o077),
        (0o640, 0o027),
        (0o644, 0o022),
        (0o666, 0o000),
        (0o604, 0o072),
        (0o400, 0o077),
    ],
)
def test_creation_umask_allows_what_the_source_allows(mode: int, umask: int) -> None:
    # x follows r, so directories stay searchable where files are readable; the owner
    # keeps every bit (a 0400 source must not give directories the tool cannot fill).
    assert creation_umask(mode) == umask


def test_mode_of_a_directory_store_is_its_narrowest_entry(tmp_path: Path) -> None:
    (tmp_path / "db" / "sub").mkdir(parents=True)
    (tmp_path / "db" / "sub" / "data").write_bytes(b"x")
    os.chmod(tmp_path / "db", 0o755)
    os.chmod(tmp_path / "db" / "sub" / "data", 0o640)
    assert mode_of_store(tmp_path / "db") == 0o640
    assert mode_of_store(tmp_path / "missing") is None


def test_no_wider_than_narrows_restores_and_never_widens(tmp_path: Path) -> None:
    store = tmp_path / "store"
    store.write_bytes(b"x")
    os.chmod(store, 0o640)
    old = os.umask(0o022)
    try:
        with no_wider_than(store, tmp_path / "missing", None):
            assert os.umask(0o022) == 0o027
            os.umask(0o027)
        assert os.umask(0o077) == 0o022
        with no_wider_than(store):  # the process's narrower umask is kept
            assert os.umask(0o077) == 0o077
        with no_wider_than(tmp_path / "missing"):  # nothing to follow: unchanged
            assert os.umask(0o077) == 0o077
    finally:
        os.umask(old)


def test_no_wider_than_changes_nothing_without_posix_modes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from statemigrate import perms

    store = tmp_path / "store"
    store.write_bytes(b"x")
    os.chmod(store, 0o600)
    monkeypatch.setattr(perms, "_POSIX", False)
    old = os.umask(0o022)
    try:
        with no_wider_than(store):
            assert os.umask(0o022) == 0o022
        keep_owner(store, store)  # no chown on Windows: nothing happens, no error
    finally:
        os.umask(old)


# --- convert ---------------------------------------------------------------------------


@pytest.mark.parametrize(("file_mode", "dir_mode", "forbidden"), MODES)
def test_destination_is_no_wider_than_the_source(
    engine: type[Engine],
    tmp_path: Path,
    umask_022: None,
    file_mode: int,
    dir_mode: int,
    forbidden: int,
) -> None:
    src = sqlite_source(tmp_path, file_mode)
    out = tmp_path / "out"
    out.mkdir()
    dst = store_file(engine.name, out, "dst")
    run = run_cli(["convert", "-q", src, spec(engine.name, dst)])
    assert run.returncode == 0, run.stderr
    made = entries(out)
    assert dst in made
    assert too_wide(made, forbidden) == []
    # Nor narrower: the verb's umask is the source's (README "No one gains access"), so
    # under the usual 022 the app's group that read the source reads the destination.
    assert not_as_the_source(engine, dst, made, file_mode, dir_mode) == []


# Files a driver itself writes owner-only, whatever the umask: fjall rewrites its
# partitions' ``levels`` (fjall 2) and keyspaces' ``current`` (fjall 3) files 0600.
OWNER_ONLY_BY_THE_DRIVER = {"fjall2": {"levels"}, "fjall3": {"current"}}


def not_as_the_source(
    engine: type[Engine], dst: Path, made: list[Path], file_mode: int, dir_mode: int
) -> list[str]:
    """``mode path`` of each entry of a new store whose mode is not the source's: its
    file (or directory, and every directory in it) ``dir_mode``, every file ``file_mode``."""
    own = OWNER_ONLY_BY_THE_DRIVER.get(engine.name, set())
    wrong = []
    for p in made:
        mode = p.stat().st_mode & 0o777
        if p.is_dir():
            want = {dir_mode}
        elif p.name in own:
            want = {file_mode, 0o600}
        else:
            want = {file_mode}
        if mode not in want:
            wrong.append(f"{mode:o} {p}")
    return wrong


@pytest.mark.parametrize(("file_mode", "dir_mode", "forbidden"), MODES)
def test_a_directory_source_bounds_the_destination(
    engine: type[Engine],
    tmp_path: Path,
    umask_022: None,
    file_mode: int,
    dir_mode: int,
    forbidden: int,
) -> None:
    """A store of each engine as the source (directories 0700/0750 holding 0600/0640 files)."""
    src = private_source(engine, tmp_path / "src", file_mode, dir_mode)
    out = tmp_path / "out"
    out.mkdir()
    dst = out / "dst.jsonl"
    run = run_cli(["convert", "-q", spec(engine.name, src), dst])
    assert run.returncode == 0, run.stderr
    assert too_wide(entries(out), forbidden) == [] and dst.is_file()
    assert dst.stat().st_mode & 0o777 == file_mode  # nor narrower than the source's files


def test_interrupted_destination_and_side_files_are_private(
    engine: type[Engine], tmp_path: Path, umask_022: None
) -> None:
    """Killed after its first batch: ``.partial``, ``.lock`` and every side file are 0600/0700."""
    src = sqlite_source(tmp_path, 0o600)
    out = tmp_path / "out"
    out.mkdir()
    dst = store_file(engine.name, out, "dst")
    args = ["convert", "-q", "--batch-records", "2", src, spec(engine.name, dst)]
    # sqlite -> sqlite is the engine's own copy: killed in the middle of it instead.
    point = "native copy" if copies_natively("sqlite", engine.name) else "batch"
    run = run_cli(args, env={"STATEMIGRATE_CRASH_AT": point})
    assert run.returncode == -9, run.stderr
    made = entries(out)
    names = {p.name for p in made}
    assert {"dst" + dst.suffix + ".partial", "dst" + dst.suffix + ".lock"} <= names, names
    assert too_wide(made, 0o077) == []
    resumed = run_cli([*args[:2], "--resume", *args[2:]])
    assert resumed.returncode == 0, resumed.stderr
    assert too_wide(entries(out), 0o077) == [] and dst.exists()


def test_private_read_copies_are_private(
    engine: type[Engine], tmp_path: Path, umask_022: None
) -> None:
    """RocksDB, Turso and HelixDB read through private copies under $TMPDIR: killed, they stay."""
    src = private_source(engine, tmp_path / "src", 0o600, 0o700)
    tmpdir = tmp_path / "tmpdir"
    tmpdir.mkdir()
    out = tmp_path / "out"
    out.mkdir()
    args = ["convert", "-q", "--batch-records", "2", spec(engine.name, src), out / "dst.jsonl"]
    run = run_cli(args, env={"STATEMIGRATE_CRASH_AT": "batch", "TMPDIR": str(tmpdir)})
    assert run.returncode == -9, run.stderr
    assert (out / "dst.jsonl.partial").exists()
    assert too_wide(entries(tmpdir) + entries(out), 0o077) == []


@needs_root
def test_overwrite_keeps_the_replaced_stores_owner_and_mode(
    engine: type[Engine], tmp_path: Path, umask_022: None
) -> None:
    """A world-readable source replaces an app's 0640 store owned by ``nobody``."""
    nobody = pwd.getpwnam("nobody")
    src = sqlite_source(tmp_path, 0o644)
    out = tmp_path / "out"
    out.mkdir()
    dst = store_file(engine.name, out, "dst")
    write_store(engine, dst, {TableInfo("old"): [(b"k", b"v")]})
    chmod_store(engine, dst, 0o640, 0o750)
    for p in store_entries(engine, dst):
        os.chown(p, nobody.pw_uid, nobody.pw_gid)
    top_mode = dst.stat().st_mode & 0o777
    run = run_cli(["convert", "-q", "--overwrite", src, spec(engine.name, dst)])
    assert run.returncode == 0, run.stderr
    placed = store_entries(engine, dst)
    assert dst.stat().st_mode & 0o777 == top_mode
    assert too_wide(placed, 0o027) == []
    assert [
        str(p)
        for p in placed
        if (p.stat().st_uid, p.stat().st_gid) != (nobody.pw_uid, nobody.pw_gid)
    ] == []


@needs_root
def test_overwrite_with_a_narrower_source_takes_the_narrower_mode(
    tmp_path: Path, umask_022: None
) -> None:
    src = sqlite_source(tmp_path, 0o600)
    dst = write_store(get_engine("sqlite"), tmp_path / "dst.sqlite", {TableInfo("old"): []})
    os.chmod(dst, 0o644)
    run = run_cli(["convert", "-q", "--overwrite", src, dst])
    assert run.returncode == 0, run.stderr
    assert dst.stat().st_mode & 0o777 == 0o600


# --- upgrade ---------------------------------------------------------------------------


@pytest.mark.parametrize(("file_mode", "dir_mode", "forbidden"), MODES)
def test_upgrade_backup_has_the_stores_mode(
    engine: type[Engine],
    tmp_path: Path,
    umask_022: None,
    request: pytest.FixtureRequest,
    file_mode: int,
    dir_mode: int,
    forbidden: int,
) -> None:
    """``upgrade --backup``: the backup has the store's mode; nothing it creates is wider."""
    reason = xfail_reason(engine)
    if reason:
        request.applymarker(pytest.mark.xfail(strict=True, raises=UsageError, reason=reason))
    work = tmp_path / "work"
    work.mkdir()
    store_spec = seeded(engine, work, events=20)
    store = Path(store_spec.split(":", 1)[1])
    chmod_store(engine, store, file_mode, dir_mode)
    top_mode = store.stat().st_mode & 0o777
    backup = work / ("backup" + store.suffix)
    run = run_cli(
        ["upgrade", store_spec, "--schema", EXAMPLE, "--to", "+1", "--backup", backup],
        timeout=120,
    )
    assert run.returncode == 0, run.stderr
    assert backup.stat().st_mode & 0o777 == top_mode
    assert too_wide(entries(work), forbidden) == []
