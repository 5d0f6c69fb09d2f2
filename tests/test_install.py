"""Install anywhere (issue 14): what a user's machine needs, checked without building.

- The package imports, and a convert either runs or refuses before writing, where the
  POSIX-only modules do not exist (Windows), simulated here by hiding them.
- ``struct flock`` is packed in each platform's C layout (Linux; macOS and the BSDs),
  checked against the C declarations transcribed into ``ctypes``, and against the
  kernel where the tests run.
- The package declares what it imports when it is imported, an upgrade needs nothing
  beyond the engine's own extra, the wheel is abi3 for the oldest supported Python and
  stripped; a wheel that ``make wheel`` left in ``dist/`` is checked (none is built here).
- Shell completion works as the README documents it.

No timed assertions: subprocesses have generous hang guards (HANG_GUARD).
"""

from __future__ import annotations

import ast
import ctypes
import hashlib
import importlib.machinery
import importlib.metadata
import json
import os
import re
import select
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

import statemigrate
from statemigrate.errors import StoreBusyError, UsageError
from statemigrate.fsutil import remove_path
from statemigrate.locks import (
    _flock_layout,
    _pack_flock,
    _unpack_flock,
    fcntl_holder,
    share_mode_holder,
)
from statemigrate.pipeline import destination
from statemigrate.registry import engine_names, get_engine

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: mypy's dependency provides it
    import tomli as tomllib

ROOT = Path(__file__).resolve().parents[1]
EXAMPLE = ROOT / "examples" / "app-state.sqlite"
HANG_GUARD = 120  # seconds: a subprocess still running then is a hang, not slowness
# Modules the Python documentation marks "Availability: Unix": absent on Windows.
POSIX_ONLY = ("fcntl", "grp", "pwd", "resource", "termios")
HIDE_POSIX = "import sys\n" + "".join(f"sys.modules[{m!r}] = None\n" for m in POSIX_ONLY)
WITH_FCNTL_CLI = "from statemigrate.cli import main\nmain(prog_name='statemigrate')\n"
WITHOUT_FCNTL_CLI = HIDE_POSIX + WITH_FCNTL_CLI
needs_fcntl = pytest.mark.skipif(sys.platform == "win32", reason="Windows has no POSIX locks")


def pyproject() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())


def python(code: str, *args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess:
    """Run ``code`` in a fresh interpreter (failed as a hang after HANG_GUARD)."""
    return subprocess.run(
        [sys.executable, "-c", code, *args],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        env=dict(os.environ, **(env or {})),
        check=False,
    )


def sha256(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


def dist_name(requirement: str) -> str:
    """The normalised distribution name of a requirement string (PEP 503)."""
    name = re.match(r"[A-Za-z0-9._-]+", requirement)
    assert name, requirement
    return re.sub(r"[-_.]+", "-", name.group(0)).lower()


# --- without the POSIX-only modules (as on Windows) --------------------------------------


def test_every_module_imports_without_the_posix_only_modules() -> None:
    walk = (
        HIDE_POSIX + "import importlib, pkgutil, statemigrate\n"
        "for m in pkgutil.walk_packages(statemigrate.__path__, 'statemigrate.'):\n"
        "    try:\n"
        "        importlib.import_module(m.name)\n"
        "    except Exception as exc:\n"
        "        print(f'{m.name}: {type(exc).__name__}: {exc}')\n"
        "print('walked', len(list(pkgutil.walk_packages(statemigrate.__path__))))\n"
    )
    proc = python(walk)
    assert proc.returncode == 0, proc.stderr
    *failures, walked = proc.stdout.splitlines()
    assert failures == [], "\n".join(failures)
    assert int(walked.split()[1]) > 10, proc.stdout  # the walk saw the package


def test_without_fcntl_a_convert_ends_as_it_does_with_fcntl(engine, tmp_path) -> None:
    """Same exit code and error lines, at most one warning line more; a refusal leaves
    nothing, a success verifies."""
    src = tmp_path / "src.sqlite"
    src.write_bytes(EXAMPLE.read_bytes())
    before = sha256(src)
    out = tmp_path / "out"
    out.mkdir()
    dst = out / f"dst.{engine.name}"
    args = ("convert", "--quiet", f"sqlite:{src}", f"{engine.name}:{dst}")
    posix = python(WITH_FCNTL_CLI, *args)
    for p in out.iterdir():
        remove_path(p)
    proc = python(WITHOUT_FCNTL_CLI, *args)
    assert sha256(src) == before
    assert proc.returncode == posix.returncode, proc.stderr
    lines = proc.stderr.splitlines()
    warned = [line for line in lines if line.startswith("statemigrate: warning:")]
    assert len(warned) <= 1, proc.stderr
    assert [line for line in lines if line not in warned] == posix.stderr.splitlines()
    if proc.returncode == 0:
        check = python(WITH_FCNTL_CLI, "verify", f"sqlite:{src}", f"{engine.name}:{dst}")
        assert check.returncode == 0, check.stdout + check.stderr
    else:
        assert list(out.iterdir()) == [], proc.stderr


def one_warning(stderr: str) -> str:
    """The one line a run without POSIX locks prints on stderr (nothing else)."""
    lines = [line for line in stderr.splitlines() if line.strip()]
    assert len(lines) == 1, stderr
    assert lines[0].startswith("statemigrate: warning: "), stderr
    assert "no POSIX file locks" in lines[0], stderr
    return lines[0]


def cli_without_fcntl(*args: object, env: dict[str, str] | None = None):
    return python(WITHOUT_FCNTL_CLI, *map(str, args), env=env)


def test_without_fcntl_a_convert_runs(tmp_path) -> None:
    dst = tmp_path / "dst.jsonl"
    proc = cli_without_fcntl("convert", "--quiet", f"sqlite:{EXAMPLE}", f"jsonl:{dst}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr == ""  # a new destination: no probe missed anything, the lock held
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst.jsonl"]  # the lock is gone
    check = cli_without_fcntl("verify", f"sqlite:{EXAMPLE}", f"jsonl:{dst}")
    assert check.returncode == 0, check.stdout + check.stderr


def test_without_fcntl_replacing_a_store_says_in_one_line_what_it_cannot_see(tmp_path) -> None:
    dst = tmp_path / "dst.sqlite"
    dst.write_bytes(EXAMPLE.read_bytes())
    proc = cli_without_fcntl("convert", "--quiet", "--overwrite", f"sqlite:{EXAMPLE}", dst)
    assert proc.returncode == 0, proc.stderr
    assert "stop the apps that use the stores first" in one_warning(proc.stderr)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst.sqlite"]


def test_without_fcntl_checksum_verify_inspect_and_upgrade_run(tmp_path) -> None:
    for verb in (("checksum",), ("verify", EXAMPLE), ("inspect",)):
        proc = cli_without_fcntl(verb[0], EXAMPLE, *verb[1:])
        assert proc.returncode == 0, f"{verb}: {proc.stderr}"
        assert "Traceback" not in proc.stderr, proc.stderr
    store = tmp_path / "state.sqlite"
    schema = ROOT / "schemas" / "example"
    proc = cli_without_fcntl("upgrade", store, "--create", "--schema", schema, "--json")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert json.loads(proc.stdout)["status"] == "upgraded", proc.stdout
    one_warning(proc.stderr)
    again = cli_without_fcntl("upgrade", store, "--schema", schema, "--json")
    assert again.returncode == 0, again.stdout + again.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["state.sqlite"]


# A process that holds a destination's lock the way a convert does, until stdin closes.
HOLD_LOCK = (
    "from pathlib import Path\n"
    "from statemigrate.stores.lockfile import writer_lock\n"
    "with writer_lock(Path(sys.argv[1])):\n"
    "    print('ready', flush=True); sys.stdin.read()\n"
)
# msvcrt.locking (Windows) for this test, over POSIX byte-range locks (fcntl.lockf) on
# the same bytes, taken before fcntl is hidden from statemigrate: the Windows lock's
# code (which byte, the pid beside it, release before removal) runs here.
MSVCRT_OVER_LOCKF = (
    "import fcntl as _posix, os, sys, types\n"
    "import subprocess  # first: it takes any module named msvcrt for Windows\n"
    "msvcrt = types.ModuleType('msvcrt'); msvcrt.LK_UNLCK, msvcrt.LK_NBLCK = 0, 2\n"
    "def _locking(fd, mode, nbytes):\n"
    "    at = os.lseek(fd, 0, os.SEEK_CUR)\n"
    "    if mode == msvcrt.LK_UNLCK:\n"
    "        return _posix.lockf(fd, _posix.LOCK_UN, nbytes, at)\n"
    "    try:\n"
    "        _posix.lockf(fd, _posix.LOCK_EX | _posix.LOCK_NB, nbytes, at)\n"
    "    except BlockingIOError:\n"
    "        raise PermissionError(13, 'Permission denied') from None\n"
    "msvcrt.locking = _locking; sys.modules['msvcrt'] = msvcrt\n"
)


def ready_child(code: str, arg: Path) -> subprocess.Popen:
    """A child running ``code`` with ``arg``, returned once it has printed ``ready``."""
    child = subprocess.Popen(
        [sys.executable, "-c", code, str(arg)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    ready, _, _ = select.select([child.stdout], [], [], HANG_GUARD)
    assert ready and child.stdout.readline().strip() == "ready"
    return child


def hold_lock(final: Path, prelude: str) -> subprocess.Popen:
    """A child holding ``final``'s lock (under ``prelude``'s platform) once it says ready."""
    return ready_child(prelude + HOLD_LOCK, final)


@pytest.mark.parametrize(
    "prelude", [HIDE_POSIX, MSVCRT_OVER_LOCKF + HIDE_POSIX], ids=["exclusive-create", "msvcrt"]
)
def test_without_fcntl_a_second_convert_of_the_same_destination_is_refused(
    tmp_path, prelude: str
) -> None:
    """Exit 3 naming the writer's pid, nothing written; once it is done the convert runs."""
    src = tmp_path / "src.sqlite"
    src.write_bytes(EXAMPLE.read_bytes())
    dst = tmp_path / "dst.sqlite"
    cli = prelude + "from statemigrate.cli import main\nmain(prog_name='statemigrate')\n"
    child = hold_lock(dst, prelude)
    try:
        proc = python(cli, "convert", "--quiet", str(src), str(dst))
        assert proc.returncode == 3, proc.stderr
        lines = [line for line in proc.stderr.splitlines() if line.startswith("statemigrate:")]
        assert lines[-1] == (
            f"statemigrate: error: {dst}: another statemigrate (pid {child.pid}) is writing "
            "this destination"
        ), proc.stderr
        assert sorted(p.name for p in tmp_path.iterdir()) == ["dst.sqlite.lock", "src.sqlite"]
    finally:
        child.stdin.close()
        assert child.wait(timeout=HANG_GUARD) == 0
    assert sorted(p.name for p in tmp_path.iterdir()) == ["src.sqlite"]  # released, removed
    proc = python(cli, "convert", "--quiet", str(src), str(dst))
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst.sqlite", "src.sqlite"]


def test_without_any_file_lock_a_killed_runs_lock_is_refused_with_a_hint(tmp_path) -> None:
    """Nothing removes an exclusive-create lock of a killed run: exit 5, say which, how."""
    dst = tmp_path / "dst.sqlite"
    killed = cli_without_fcntl(
        "convert", "--quiet", EXAMPLE, dst, env={"STATEMIGRATE_CRASH_AT": "locked"}
    )
    assert killed.returncode == -9, killed.stderr
    lock = tmp_path / "dst.sqlite.lock"
    pid = lock.read_text()
    assert pid.isdigit()
    proc = cli_without_fcntl("convert", "--quiet", EXAMPLE, dst)
    assert proc.returncode == 5, proc.stderr
    refusal = (
        f"statemigrate: error: {lock}: left by statemigrate pid {pid}, which is no longer "
        "running (this platform has no file locks, so nothing removed it)"
    )
    hint = f"hint: remove {lock}, then run the same command"
    assert proc.stderr.splitlines()[-2:] == [refusal, hint], proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst.sqlite.lock"]
    lock.unlink()
    proc = cli_without_fcntl("convert", "--quiet", EXAMPLE, dst)
    assert proc.returncode == 0, proc.stderr
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst.sqlite"]


def test_without_any_file_lock_a_link_at_the_lock_is_refused(tmp_path) -> None:
    target = tmp_path / "precious"
    target.write_text("kept\n")
    dst = tmp_path / "dst.sqlite"
    (tmp_path / "dst.sqlite.lock").symlink_to(target)
    proc = cli_without_fcntl("convert", "--quiet", EXAMPLE, dst)
    assert proc.returncode == 5, proc.stderr
    assert "a symbolic link where statemigrate keeps its lock" in proc.stderr
    assert target.read_text() == "kept\n"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst.sqlite.lock", "precious"]


def test_a_file_not_shared_is_held_on_windows_only(tmp_path, monkeypatch) -> None:
    """Windows answers a file opened without sharing with PermissionError (no pid)."""
    store = tmp_path / "store"
    store.write_bytes(b"x")
    assert share_mode_holder(store, platform="nt") is None  # shared: not held

    def denied(*_args, **_kwargs):
        raise PermissionError(13, "Permission denied", str(store))

    monkeypatch.setattr(os, "open", denied)  # the answer Windows gives, not a store
    assert share_mode_holder(store, platform="nt") == -1
    assert share_mode_holder(store, platform="posix") is None  # there: the mode bits


def test_on_windows_a_store_an_app_will_not_let_go_is_busy_and_resumes(
    tmp_path, monkeypatch
) -> None:
    """Windows refuses to replace a file an app opened without sharing: exit 3, and the
    built store waits as ``.partial`` for ``--resume``."""
    dst = tmp_path / "dst.sqlite"
    dst.write_bytes(EXAMPLE.read_bytes())
    (tmp_path / "src.sqlite").write_bytes(EXAMPLE.read_bytes())
    old = sha256(dst)

    def refused(built: Path, final: Path) -> None:
        os.rename(built, final.with_name(final.name + ".swap"))  # place's first step
        raise PermissionError(13, "Permission denied", str(final))  # what Windows says

    monkeypatch.setattr(destination, "_WINDOWS", True)
    monkeypatch.setattr(destination, "place", refused)
    with pytest.raises(StoreBusyError) as caught:
        statemigrate.convert(tmp_path / "src.sqlite", dst, overwrite=True)
    assert str(caught.value) == f"{dst}: store is in use by another process (pid unknown)"
    assert "resume=True" in (caught.value.hint or "")  # the library's words
    assert "--resume" in (caught.value.cli_hint or "")  # the command line's
    assert sha256(dst) == old
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dst.sqlite",
        "dst.sqlite.partial",
        "dst.sqlite.partial.done",
        "src.sqlite",
    ]
    monkeypatch.undo()  # the app let go
    report = statemigrate.convert(tmp_path / "src.sqlite", dst, overwrite=True, resume=True)
    assert report.resumed
    assert sorted(p.name for p in tmp_path.iterdir()) == ["dst.sqlite", "src.sqlite"]
    assert statemigrate.verify(tmp_path / "src.sqlite", dst).equal


# --- struct flock per platform -----------------------------------------------------------


class LinuxFlock(ctypes.Structure):
    """<asm-generic/fcntl.h> (x86_64, aarch64; off_t is 64 bits under Python's build)."""

    _fields_ = [
        ("l_type", ctypes.c_short),
        ("l_whence", ctypes.c_short),
        ("l_start", ctypes.c_int64),
        ("l_len", ctypes.c_int64),
        ("l_pid", ctypes.c_int32),
    ]


class BsdFlock(ctypes.Structure):
    """macOS <sys/fcntl.h> (FreeBSD adds ``int l_sysid`` after these)."""

    _fields_ = [
        ("l_start", ctypes.c_int64),
        ("l_len", ctypes.c_int64),
        ("l_pid", ctypes.c_int32),
        ("l_type", ctypes.c_short),
        ("l_whence", ctypes.c_short),
    ]


@pytest.mark.parametrize(
    ("platform", "c_struct"),
    [("linux", LinuxFlock), ("darwin", BsdFlock), ("freebsd14", BsdFlock)],
)
def test_struct_flock_is_packed_in_the_platforms_c_layout(platform, c_struct) -> None:
    fields = {"type": 2, "whence": 1, "start": 1 << 40, "len": 7, "pid": 123456}
    layout = _flock_layout(platform)
    c_bytes = bytes(c_struct(**{f"l_{k}": v for k, v in fields.items()}))
    packed = _pack_flock(layout, **fields)
    assert packed[: len(c_bytes)] == c_bytes
    assert set(packed[len(c_bytes) :]) == {0}  # room for trailing fields, zeroed
    assert _unpack_flock(layout, c_bytes + b"\0" * 8) == fields


def test_an_unknown_struct_flock_is_one_clear_line() -> None:
    with pytest.raises(UsageError) as caught:
        _flock_layout("sunos5")
    assert "sunos5" in str(caught.value) and "\n" not in str(caught.value)


@needs_fcntl
def test_the_probe_reads_the_kernels_answer_on_this_platform(tmp_path) -> None:
    """A child's write lock is seen with its pid; a shared one only by a readers probe."""
    target = tmp_path / "store"
    target.write_bytes(b"x" * 16)
    for kind, seen_by_writers_probe in (("LOCK_EX", True), ("LOCK_SH", False)):
        hold = (
            "import fcntl, sys\n"
            f"f = open(sys.argv[1], 'r+b'); fcntl.lockf(f, fcntl.{kind})\n"
            "print('ready', flush=True); sys.stdin.read()\n"
        )
        child = ready_child(hold, target)
        try:
            assert fcntl_holder(target, readers=True) == child.pid
            assert fcntl_holder(target) == (child.pid if seen_by_writers_probe else None)
        finally:
            child.kill()
            child.wait(timeout=HANG_GUARD)
    assert fcntl_holder(target, readers=True) is None


# --- what the package declares ------------------------------------------------------------


def _module_level_imports(tree: ast.Module) -> set[str]:
    """Top-level names imported when a module is imported (not in functions, not under
    ``if TYPE_CHECKING``, not in a ``try`` that catches ImportError)."""
    found: set[str] = set()
    pending = list(tree.body)
    while pending:
        node = pending.pop()
        if isinstance(node, ast.Import):
            found |= {a.name.split(".")[0] for a in node.names}
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            found.add(node.module.split(".")[0])
        elif isinstance(node, ast.If):
            if "TYPE_CHECKING" not in ast.unparse(node.test):
                pending += node.body + node.orelse
        elif isinstance(node, ast.Try):
            caught = {ast.unparse(h.type) for h in node.handlers if h.type is not None}
            if not caught & {"ImportError", "ModuleNotFoundError"}:
                pending += node.body + node.orelse + node.finalbody
        elif isinstance(node, ast.ClassDef | ast.With):
            pending += node.body
    return found


def test_everything_imported_with_the_package_is_a_declared_dependency() -> None:
    package = Path(statemigrate.__file__).parent
    imported: dict[str, str] = {}
    for path in sorted(package.rglob("*.py")):
        for name in _module_level_imports(ast.parse(path.read_text())):
            if name not in sys.stdlib_module_names and name != "statemigrate":
                imported.setdefault(name, str(path.relative_to(package)))
    declared = {dist_name(r) for r in pyproject()["project"]["dependencies"]}
    owners = importlib.metadata.packages_distributions()
    undeclared = {
        module: where
        for module, where in imported.items()
        if not {dist_name(d) for d in owners.get(module, [module])} & declared
    }
    assert undeclared == {}, f"imported at import time but not a dependency: {undeclared}"
    assert {"click", "xxhash"} <= imported.keys()  # the scan sees real imports


def test_an_upgrade_needs_nothing_beyond_the_engines_own_extra() -> None:
    project = pyproject()["project"]
    base = {dist_name(r) for r in project["dependencies"]}
    extras = project["optional-dependencies"]
    for name in engine_names():
        eng = get_engine(name)
        if eng.capabilities.in_place:
            # A plugin's engine (plugins/turbokv) has no extra here: its distribution's own.
            own = extras.get(eng.extra, [])
            assert "alembic" in base | {dist_name(r) for r in own}, name
    assert "apsw" in {dist_name(r) for r in extras["sqlite"]}
    assert extras["upgrade"] == [] or {dist_name(r) for r in extras["upgrade"]} <= base


def test_the_extension_is_built_for_the_stable_abi_of_the_oldest_python() -> None:
    oldest = re.fullmatch(r">=\s*3\.(\d+)", pyproject()["project"]["requires-python"])
    assert oldest, "requires-python is not of the form >=3.N"
    cargo = tomllib.loads((ROOT / "rust" / "Cargo.toml").read_text())
    pyo3 = cargo["dependencies"]["pyo3"]
    assert f"abi3-py3{oldest.group(1)}" in pyo3.get("features", []), pyo3
    assert pyproject()["tool"]["maturin"].get("strip") is True


def test_one_native_extension_beside_the_package() -> None:
    """A second build of another ABI (``_native.abi3.so`` beside ``_native.cpython-311…``)
    would be shadowed by the first in the import order and silently never run."""
    from statemigrate import _native

    here = Path(_native.__file__).parent
    builds = sorted(
        p.name
        for p in here.iterdir()
        if p.name.startswith("_native.")
        and any(p.name.endswith(s) for s in importlib.machinery.EXTENSION_SUFFIXES)
    )
    assert builds == [Path(_native.__file__).name], (
        f"{here}: {builds}; Python loads {Path(_native.__file__).name}: remove the others"
    )


def built_wheels() -> list[Path]:
    return sorted((ROOT / "dist").glob("statemigrate-*.whl"))


@pytest.mark.skipif(not built_wheels(), reason="no wheel in dist/ (`make wheel` builds one)")
@pytest.mark.parametrize("wheel", built_wheels() or [None], ids=lambda w: getattr(w, "name", ""))
def test_a_built_wheel_is_abi3_and_stripped(wheel: Path) -> None:
    oldest = pyproject()["project"]["requires-python"].split(".")[-1].strip()
    python_tag, abi_tag, platform_tag = wheel.name[: -len(".whl")].split("-")[2:]
    assert (python_tag, abi_tag) == (f"cp3{oldest}", "abi3"), wheel.name
    with zipfile.ZipFile(wheel) as whl:
        names = whl.namelist()
        info = next(n for n in names if n.endswith(".dist-info/WHEEL"))
        tags = [
            line.split(": ", 1)[1]
            for line in whl.read(info).decode().splitlines()
            if line.startswith("Tag: ")
        ]
        assert tags and all(t.startswith(f"cp3{oldest}-abi3-") for t in tags), tags
        native = [n for n in names if re.fullmatch(r"statemigrate/_native\..*(so|pyd)", n)]
        assert native in (["statemigrate/_native.abi3.so"], ["statemigrate/_native.pyd"]), native
        if "linux" in platform_tag:
            assert platform_tag.startswith(("manylinux", "musllinux")), wheel.name
            assert b".symtab" not in whl.read(native[0]), "the extension is not stripped"


# --- shell completion (README) -----------------------------------------------------------


def test_bash_completion_is_generated_and_completes_commands() -> None:
    run = "from statemigrate.cli import main\nmain(prog_name='statemigrate')\n"
    script = python(run, env={"_STATEMIGRATE_COMPLETE": "bash_source"})
    assert script.returncode == 0, script.stderr
    assert "complete -o nosort -F _statemigrate_completion statemigrate" in script.stdout
    answer = python(
        run,
        env={
            "_STATEMIGRATE_COMPLETE": "bash_complete",
            "COMP_WORDS": "statemigrate conv",
            "COMP_CWORD": "1",
        },
    )
    assert answer.returncode == 0, answer.stderr
    assert answer.stdout.split() == ["plain,convert"], answer.stdout


# --- the release workflow (it runs on GitHub only) -----------------------------------------

PLATFORMS = {"linux-x86_64", "linux-aarch64", "macos-x86_64", "macos-arm64", "windows-x86_64"}


def test_the_release_workflow_builds_smoke_tests_and_publishes_every_platform() -> None:
    yaml = pytest.importorskip("yaml", reason="PyYAML (the [test] extra) reads the workflow")
    workflow = yaml.safe_load((ROOT / ".github" / "workflows" / "release.yml").read_text())
    jobs = workflow["jobs"]
    builds = jobs["wheel"]["strategy"]["matrix"]["include"]
    assert {b["platform"] for b in builds} == PLATFORMS
    maturin = next(s for s in jobs["wheel"]["steps"] if "maturin-action" in s.get("uses", ""))
    assert "--release" in maturin["with"]["args"]
    assert {b["manylinux"] for b in builds if b["platform"].startswith("linux")} == {"2_28"}
    smoke = jobs["smoke"]["strategy"]["matrix"]
    assert set(smoke["platform"]) == PLATFORMS
    oldest = pyproject()["project"]["requires-python"].removeprefix(">=")
    assert oldest in smoke["python"], smoke["python"]
    script = "\n".join(step.get("run", "") for step in jobs["smoke"]["steps"])
    for command in (
        "convert examples/app-state.sqlite out/app-state.jsonl",
        "convert examples/app-state.sqlite out/app-state.sqlite",
        "verify out/app-state.jsonl out/app-state.sqlite",
        "pytest",
    ):
        assert command in script, command
    assert (ROOT / "examples" / "app-state.sqlite").is_file()
    triggers = workflow.get("on", workflow.get(True))  # YAML 1.1 reads a bare `on` as True
    assert triggers["push"]["tags"] == ["v*"]
    publish = jobs["publish"]
    assert set(publish["needs"]) == {"smoke", "sdist"}
    assert publish["permissions"] == {"id-token": "write"}
    assert any("pypi-publish" in s.get("uses", "") for s in publish["steps"])


# A HelixDB writer held until stdin closes, then closed (its lock file removed).
HOLD_HELIX_WRITER = (
    "from pathlib import Path\n"
    "from statemigrate.engines.helixdb import HelixdbEngine\n"
    "w = HelixdbEngine.open_writer(Path(sys.argv[1]))\n"
    "print('ready', flush=True); sys.stdin.read(); w.close()\n"
)
SECOND_HELIX_WRITER = (
    "from pathlib import Path\n"
    "from statemigrate.engines.helixdb import HelixdbEngine\n"
    "from statemigrate.errors import StoreBusyError\n"
    "try:\n"
    "    HelixdbEngine.open_writer(Path(sys.argv[1])).close()\n"
    "except StoreBusyError as exc:\n"
    "    print('busy', exc.exit_code, exc)\n"
    "else:\n"
    "    print('opened')\n"
)


def test_with_msvcrt_locks_a_second_helixdb_writer_is_refused(tmp_path) -> None:
    """The HelixDB writer's own store lock under Windows' msvcrt.locking (emulated, fcntl
    hidden): a second writer is refused with exit 3 while the first holds the store,
    and opens once it has closed (the lock file removed). The holder's pid is named
    from the lock file, which no probe sees without fcntl."""
    from statemigrate.engines.helixdb import HelixdbEngine
    from statemigrate.model import TableInfo
    from statemigrate.testing.stores import write_store

    store = write_store(HelixdbEngine, tmp_path / "s.helixdb", {TableInfo("t"): [(b"a", b"1")]})
    prelude = MSVCRT_OVER_LOCKF + HIDE_POSIX
    child = ready_child(prelude + HOLD_HELIX_WRITER, store)
    try:
        second = python(prelude + SECOND_HELIX_WRITER, str(store))
        want = f"busy 3 {store}: store is in use by another process (pid {child.pid})"
        assert second.stdout.strip() == want, second.stdout + second.stderr
    finally:
        child.stdin.close()
        assert child.wait(timeout=HANG_GUARD) == 0
    assert not (store / "statemigrate.lock").exists()
    after = python(prelude + SECOND_HELIX_WRITER, str(store))
    assert after.stdout.split() == ["opened"], after.stdout + after.stderr
