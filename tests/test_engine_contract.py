"""The engine contract: the plumbing every engine gets from the base, written once.

Every engine reads through the base (its one read is ``scan``; batch bounds, record
iteration and hidden metadata are the base's), no engine module imports another,
driver errors are mapped by one context manager fed by a declared table, "refuse if
held" probes the lock module's declared probes against real lock holders, and private
read copies are made and swept by one helper.
"""

from __future__ import annotations

import ast
import os
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest
from builtin_engines import builtin_engines  # tests/ is on sys.path, not a package

import statemigrate.engines
from statemigrate.engines import snapshot
from statemigrate.engines.errors import DriverErrors, Meaning, Rule
from statemigrate.engines.sqlite import APSW_ERRORS
from statemigrate.errors import DestinationError, SourceError, StoreBusyError, UsageError
from statemigrate.locks import LockProbe, lock_holder, refuse_if_held
from statemigrate.model import TableInfo
from statemigrate.testing import contract_suite
from statemigrate.testing.stores import store_path, write_store

HANG_GUARD = 60  # seconds: a generous bound on a child process, never a timing assertion


# --- every built-in engine: the shipped contract suite ----------------------------------
# (statemigrate.testing.contract_suite: it reads through the base, its declared name,
# suffixes and options hold; a plugin's engine runs the same class in its own tests)

for _name in builtin_engines():
    globals()[f"TestContract_{_name}"] = contract_suite(_name)


def _engine_modules() -> dict[str, list[Path]]:
    """Each module of statemigrate.engines, a package with all its files."""
    folder = Path(statemigrate.engines.__file__).parent
    modules = {p.stem: [p] for p in folder.glob("*.py")}
    modules.update(
        {p.parent.name: sorted(p.parent.rglob("*.py")) for p in folder.glob("*/__init__.py")}
    )
    return modules


def _imported(path: Path, node: ast.ImportFrom) -> list[list[str]]:
    """The absolute names an ``import from`` in ``path`` (a file of statemigrate.engines) takes."""
    folder = Path(statemigrate.engines.__file__).parent
    package = ["statemigrate", "engines", *path.relative_to(folder).parent.parts]
    base = package[: len(package) - node.level + 1] if node.level else []
    target = base + (node.module.split(".") if node.module else [])
    return [target + [a.name] for a in node.names] if not node.module else [target]


def test_no_engine_module_imports_another() -> None:
    # The built-in engines (a plugin distribution's engine, plugins/turbokv, lives in its own package).
    engines = set(builtin_engines())
    modules = _engine_modules()
    assert engines <= set(modules), "every built-in engine is a module of statemigrate.engines"
    assert len(modules["helixdb"]) > 1  # a package: every one of its files is read
    found = []
    for name, paths in modules.items():
        for path in paths:
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.ImportFrom):
                    found += [
                        (path.name, target[2])
                        for target in _imported(path, node)
                        if target[:2] == ["statemigrate", "engines"]
                        and len(target) > 2
                        and target[2] in engines - {name}
                    ]
    assert found == []


# --- one error mapping -------------------------------------------------------------------

TABLE = DriverErrors(
    rules=(
        Rule(Meaning.BUSY, words=("locked",)),
        Rule(Meaning.FULL, types=("OSError",), words=("no space",)),
        Rule(Meaning.DAMAGED, types=("PanicException",), message="{path}: damaged ({text})"),
    ),
    driver=("ValueError", "OSError"),
    source_failed="{path}: unreadable while {doing} ({text})",
)


class PanicException(BaseException):
    """Named as pyo3's panic (a BaseException, not an Exception)."""


def _raised(exc: BaseException, **how) -> BaseException:
    how.setdefault("source", True)
    how.setdefault("writing", False)
    with pytest.raises(BaseException) as info, TABLE.mapped(Path("/s"), "reading", **how):
        raise exc
    return info.value


@pytest.mark.parametrize("control", [KeyboardInterrupt(), SystemExit(3), GeneratorExit()])
def test_control_exceptions_pass_untouched(control: BaseException) -> None:
    assert _raised(control) is control


def test_the_contracts_own_errors_and_foreign_exceptions_pass_untouched() -> None:
    own = DestinationError("mine")
    foreign = KeyError("not the driver's")
    assert _raised(own) is own
    assert _raised(foreign) is foreign


def test_a_driver_panic_is_mapped_though_it_is_a_base_exception() -> None:
    err = _raised(PanicException("called unwrap on Err\nbacktrace"))
    assert isinstance(err, SourceError) and err.exit_code == 4
    assert err.message == "/s: damaged (called unwrap on Err)"  # one line
    assert isinstance(err.__cause__, PanicException)


def test_rules_decide_in_order_and_unmatched_errors_follow_the_side() -> None:
    busy = _raised(ValueError("database is LOCKED"), holder=lambda: 4242, busy_hint="stop it")
    assert isinstance(busy, StoreBusyError) and "pid 4242" in busy.message
    assert busy.hint == "stop it"
    full = _raised(OSError("No space left on device"))
    assert (
        isinstance(full, DestinationError)
        and full.message == "/s: disk full (No space left on device)"
    )
    read = _raised(ValueError("bad page"))
    assert isinstance(read, SourceError)
    assert read.message == "/s: unreadable while reading (bad page)"
    wrote = _raised(ValueError("bad page"), source=False, writing=True)
    assert isinstance(wrote, DestinationError) and wrote.message == "/s: reading failed (bad page)"


def test_a_private_read_copy_is_named_as_the_store() -> None:
    text = "Corruption: block checksum mismatch in /tmp/statemigrate-rocksdb-ro-12-ab/000009.sst"
    err = _raised(ValueError(text), failed="{path}: {text}")
    assert "statemigrate-rocksdb-ro-" not in str(err) and "000009.sst" in str(err)


def test_a_real_driver_error_is_mapped_by_its_engines_table(tmp_path) -> None:
    import apsw

    conn = apsw.Connection(str(tmp_path / "s.sqlite"))
    conn.execute("CREATE TABLE t (k BLOB PRIMARY KEY)")
    conn.execute("INSERT INTO t VALUES (x'01')")
    mapped = APSW_ERRORS.mapped(tmp_path / "s.sqlite", "writing", source=False, writing=True)
    with pytest.raises(DestinationError) as err, mapped:
        conn.execute("INSERT INTO t VALUES (x'01')")
    conn.close()
    assert "duplicate or out-of-order key" in err.value.message
    assert isinstance(err.value.__cause__, apsw.ConstraintError)


# --- one lock module ---------------------------------------------------------------------

HOLD = (
    "import fcntl, os, sys\n"
    "fd = os.open(sys.argv[1], os.O_RDWR)\n"
    "how = sys.argv[2]\n"
    "if how == 'flock':\n"
    "    fcntl.flock(fd, fcntl.LOCK_EX)\n"
    "else:\n"
    "    fcntl.lockf(fd, fcntl.LOCK_EX if how == 'write' else fcntl.LOCK_SH)\n"
    "print('ready', flush=True)\n"
    "sys.stdin.read()\n"
)


def _hold(path: Path, how: str) -> subprocess.Popen:
    proc = subprocess.Popen(
        [sys.executable, "-c", HOLD, str(path), how],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stdout.readline().strip() == "ready"
    return proc


def _release(proc: subprocess.Popen) -> None:
    assert proc.stdin is not None
    proc.stdin.close()
    proc.wait(timeout=HANG_GUARD)


@pytest.mark.parametrize(
    ("how", "probe", "seen"),
    [
        ("write", "write", True),
        ("shared", "write", False),  # a reader beside other readers is no writer
        ("shared", "any", True),  # an open LMDB environment, an idle WAL connection
        ("flock", "flock", True),  # redb
        ("flock", "write", False),
    ],
)
def test_declared_probes_find_a_real_holder(tmp_path, how: str, probe: str, seen: bool) -> None:
    store = tmp_path / "store"
    store.mkdir()
    (store / "LOCK").write_bytes(b"")
    proc = _hold(store / "LOCK", how)
    try:
        probes = (LockProbe("LOCK", probe),)
        assert lock_holder(store, probes) == (proc.pid if seen else None)
        if seen:
            with pytest.raises(StoreBusyError, match=f"pid {proc.pid}") as err:
                refuse_if_held(store, probes, hint="stop the app")
            assert err.value.hint == "stop the app"
        else:
            refuse_if_held(store, probes)
    finally:
        _release(proc)
    assert lock_holder(store, (LockProbe("LOCK", probe),)) is None


def test_probes_of_files_beside_a_one_file_store(tmp_path) -> None:
    store = tmp_path / "s.sqlite"
    store.write_bytes(b"")
    (tmp_path / "s.sqlite-shm").write_bytes(b"")
    proc = _hold(tmp_path / "s.sqlite-shm", "write")
    try:
        assert lock_holder(store, (LockProbe(""),)) is None
        assert lock_holder(store, (LockProbe(""), LockProbe("-shm"))) == proc.pid
    finally:
        _release(proc)


def test_an_unknown_probe_is_a_bug_not_a_free_store(tmp_path) -> None:
    (tmp_path / "f").write_bytes(b"")
    with pytest.raises(ValueError, match="unknown lock probe"):
        lock_holder(tmp_path / "f", (LockProbe("", "psychic"),))


# --- one private-copy helper ---------------------------------------------------------------


def _dead_pid() -> int:
    proc = subprocess.Popen([sys.executable, "-c", "pass"])
    proc.wait(timeout=HANG_GUARD)
    return proc.pid


def test_private_copies_are_private_named_with_the_pid_and_swept(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))
    stale = tmp_path / f"statemigrate-turso-ro-{_dead_pid()}-x1"
    live = tmp_path / f"statemigrate-helixdb-ro-{os.getpid()}-x2"
    unrelated = tmp_path / "statemigrate-turso-ro-nopid"
    for d in (stale, live, unrelated):
        d.mkdir()
    made = snapshot.private_dir("rocksdb")
    assert made.parent == tmp_path
    assert made.name.startswith(f"statemigrate-rocksdb-ro-{os.getpid()}-")
    assert stat.S_IMODE(made.stat().st_mode) == 0o700
    assert not stale.exists() and live.exists() and unrelated.exists()
    source = tmp_path / "src"
    source.mkdir()
    (source / "data").write_bytes(b"records")
    (source / "sub").mkdir()
    (source / "sub" / "more").write_bytes(b"more records")
    image = made / "image"
    snapshot.replicate(source, image)  # the one way a store's files reach a private copy
    assert (image / "data").read_bytes() == b"records"
    assert (image / "sub" / "more").read_bytes() == b"more records"
    snapshot.remove(made)
    assert not made.exists() and (source / "data").read_bytes() == b"records"


def test_a_writer_without_in_place_reads_refuses_at_once(tmp_path) -> None:
    from statemigrate.registry import get_engine

    jsonl = get_engine("jsonl")
    writer = jsonl.create_writer(tmp_path / "d.jsonl")
    try:
        with pytest.raises(UsageError, match="cannot read tables in place"):
            writer.read_batches(TableInfo("t"))
    finally:
        writer.close()


@pytest.mark.parametrize(
    ("before", "batch"),
    [
        (b"k5", [(b"k5", b"v")]),  # the key given as `after` again
        (b"k5", [(b"k3", b"v"), (b"k9", b"v")]),  # starts before it
        (b"k5", [(b"k6", b"v"), (b"k4", b"v")]),  # ends before it: the next batch repeats
        (None, [(b"k6", b"v"), (b"k4", b"v")]),  # ends before its own start
    ],
)
def test_a_batch_that_does_not_move_past_the_last_key_is_refused(tmp_path, before, batch):
    """A damaged store that leads a reader back to keys it gave would scan forever; the
    base refuses the batch (exit 4), so every scan of every engine ends (the check is
    the base's, the same for every engine: one real store stands for them)."""
    from statemigrate.engines.access import _check_progress
    from statemigrate.registry import get_engine

    engine = get_engine("sqlite")
    path = write_store(engine, store_path(engine, tmp_path), {TableInfo("t"): [(b"a", b"1")]})
    with engine.open_reader(path) as reader:
        with pytest.raises(SourceError, match="not read in key order") as err:
            _check_progress(reader, TableInfo("t"), before, batch)
        assert err.value.exit_code == 4
        _check_progress(reader, TableInfo("t"), b"k5", [(b"k6", b"v"), (b"k7", b"v")])
