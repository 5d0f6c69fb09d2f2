"""The standalone executable (``make standalone``) as an installer runs it: where no Python is.

Each command runs in a mount namespace of its own (``unshare --mount``, as root) in which
every directory holding an interpreter or site-packages is covered by an empty tmpfs (the
system's and pyenv's libraries, the project's venv, ``src/`` and ``plugins/``), every
``python3*`` executable by ``/dev/null``, and the environment is empty but ``PATH``. The
stores are made, held and checked outside it with the venv (statemigrate's testing helpers,
the stdlib's sqlite3, rocksdict). The bundle is built when ``dist/`` lacks it or any of its
sources is newer (a minute or two), by one process at a time: the tests are one xdist_group,
but another run in the same tree (or a pytest that ignores xdist_group: pytest 9 with
pytest-xdist 3.8, which renames ``item._nodeid``, which pytest 9's nodes no longer read; the
test extra pins pytest below 9) could build beside it, and two builds in one tree delete
each other's output (``make standalone`` starts with ``rm -rf build/standalone``).
"""

from __future__ import annotations

import glob
import json
import os
import platform
import shlex
import shutil
import sqlite3
import subprocess
import sys
from importlib.metadata import entry_points
from pathlib import Path

import pytest

from statemigrate.registry import get_engine
from statemigrate.testing.upgrade_conformance import (
    held_by_app,
    revision_file,
    schema_with,
    seeded,
)

REPO = Path(__file__).resolve().parents[1]
PLATFORM = f"{platform.system().lower()}-{platform.machine()}"
BUNDLE = REPO / "dist" / f"statemigrate-standalone-{PLATFORM}"
EXE = BUNDLE / "statemigrate"
EXAMPLE_STORE = REPO / "examples" / "app-state.sqlite"
SOURCES = [
    REPO / "src" / "statemigrate",
    REPO / "plugins" / "turbokv" / "python",
    REPO / "packaging" / "standalone",
]

HIDING_FAILED = "test_standalone: hiding Python failed"

pytestmark = [
    pytest.mark.xdist_group("standalone"),
    pytest.mark.xfail(
        sys.platform != "linux",
        reason="the test hides Python with a Linux mount namespace (unshare); "
        "the release workflow smoke-tests the build on macOS and Windows",
        strict=True,
    ),
]


def _newest_source() -> float:
    newest = 0.0
    for root in SOURCES:
        for path in root.rglob("*"):
            if path.is_file() and "__pycache__" not in path.parts:
                newest = max(newest, path.stat().st_mtime)
    return newest


@pytest.fixture(scope="session")
def bundle() -> Path:
    """The built bundle's executable, built first if it is missing or older than its sources."""
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        pytest.fail(
            "tests/test_standalone.py hides Python in a mount namespace: it needs root and "
            "unshare (util-linux); run it as root on Linux"
        )
    probe = in_namespace("true")
    if probe.returncode != 0:
        pytest.fail(f"cannot make a mount namespace (unshare --mount, as root): {probe.stderr}")
    sums = BUNDLE / "SHA256SUMS"
    import fcntl  # here: the module is collected (as a strict xfail) where there is no fcntl

    lock_path = REPO / "build" / "test-standalone.lock"
    lock_path.parent.mkdir(exist_ok=True)
    # Held while deciding and building: a second worker waits, then finds the bundle fresh.
    with lock_path.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not sums.exists() or sums.stat().st_mtime < _newest_source():
            build = subprocess.run(
                ["make", "standalone"], cwd=REPO, capture_output=True, text=True, check=False
            )
            assert build.returncode == 0, f"make standalone failed:\n{build.stdout}\n{build.stderr}"
    assert EXE.is_file(), f"make standalone made no {EXE}"
    check = subprocess.run(
        ["sha256sum", "--quiet", "-c", "SHA256SUMS"],
        cwd=BUNDLE,
        capture_output=True,
        text=True,
        check=False,
    )
    assert check.returncode == 0, f"the bundle does not match its SHA256SUMS: {check.stdout}"
    return EXE


def _hidden() -> tuple[list[str], list[str]]:
    """Directories covered by an empty tmpfs and executables covered by /dev/null."""
    dirs = {
        *glob.glob("/usr/lib/python3*"),
        *glob.glob("/usr/local/lib/python3*"),
        *glob.glob(os.path.expanduser("~/.local/lib/python3*")),
        os.path.expanduser("~/.pyenv"),
        sys.prefix,
        sys.base_prefix,
        str(REPO / "src"),
        str(REPO / "plugins"),
    }
    # /usr itself holds Debian's python: its libraries are covered above, not the whole tree.
    dirs = {
        os.path.realpath(d) for d in dirs if os.path.isdir(d) and d not in ("/usr", "/usr/local")
    }
    # One tmpfs over a directory hides what is under it (a second mount there would fail).
    dirs = {d for d in dirs if not any(d.startswith(o + os.sep) for o in dirs)}
    exes = {
        os.path.realpath(p)
        for d in ("/usr/bin", "/usr/local/bin", "/bin")
        for p in glob.glob(f"{d}/python3*")
        if os.path.isfile(p) and os.access(p, os.X_OK)
    }
    return sorted(dirs), sorted(exes)


def in_namespace(*argv: str | Path, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run ``argv`` where no Python is reachable (see the module's docstring)."""
    dirs, exes = _hidden()
    fail = f"|| {{ echo {HIDING_FAILED}; exit 99; }}\n"
    script = "".join(
        f"mount -t tmpfs -o size=1m,mode=0755 tmpfs {shlex.quote(d)} {fail}" for d in dirs
    )
    script += "".join(f"mount --bind /dev/null {shlex.quote(f)} {fail}" for f in exes)
    script += 'exec env -i PATH=/usr/bin:/bin LANG=C.UTF-8 "$@"\n'
    run = subprocess.run(
        ["unshare", "--mount", "--propagation", "private", "/bin/sh", "-c", script, "sh"]
        + [str(a) for a in argv],
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
        cwd="/",
    )
    # A namespace that could not hide Python must not pass for a command that failed in it.
    assert HIDING_FAILED not in run.stdout, f"hiding Python failed: {run.stderr}"
    return run


def one_json(run: subprocess.CompletedProcess[str]) -> dict:
    """The one JSON object the command printed on stdout (json.loads refuses anything more)."""
    try:
        return json.loads(run.stdout)
    except json.JSONDecodeError as e:
        raise AssertionError(
            f"stdout is not exactly one JSON object ({e}):\n{run.stdout}\n{run.stderr}"
        ) from e


def rows(path: Path, table: str) -> list[tuple]:
    """A table's rows as the stdlib's sqlite3 reads them."""
    with sqlite3.connect(f"file:{path}?mode=ro", uri=True) as db:
        return db.execute(f'SELECT * FROM "{table}" ORDER BY key').fetchall()


def file_bytes(spec: str) -> bytes:
    """The bytes of a SQLite store's file (its spec is ``sqlite:PATH``)."""
    return Path(spec.split(":", 1)[1]).read_bytes()


def test_no_python_is_reachable_in_the_namespace(bundle) -> None:
    dirs, exes = _hidden()
    assert exes, "no python3 executable found to hide"
    for python in [
        "python3",
        *exes,
        os.path.join(sys.base_prefix, "bin", "python3"),
        sys.executable,
    ]:
        run = in_namespace("/bin/sh", "-c", f'{shlex.quote(python)} -c "import sys; print(1)"')
        assert run.returncode != 0 and run.stdout == "", (python, run.stdout, run.stderr)
    run = in_namespace("find", *dirs, "-mindepth", "1")
    assert run.returncode == 0 and run.stdout == "", run.stdout  # every one is empty
    venv_cli = in_namespace(Path(sys.executable).parent / "statemigrate", "--version")
    assert venv_cli.returncode != 0 and venv_cli.stdout == "", venv_cli.stdout
    assert in_namespace(bundle, "--version").stdout.startswith("statemigrate, version ")


def test_every_engine_of_the_venv_is_in_the_bundle_with_its_driver(bundle) -> None:
    """The entry points travel as package metadata, and each engine's module and driver
    with them (they are imported lazily, out of PyInstaller's sight)."""
    registered = {ep.name for ep in entry_points(group="statemigrate.engines")}
    run = in_namespace(bundle, "engines", "--json")
    listed = {e["name"]: e["driver_installed"] for e in one_json(run)["engines"]}
    assert set(listed) == registered and all(listed.values()), listed


def test_the_executable_runs_a_child_s_code_as_python_c_would(bundle) -> None:
    """statemigrate opens a fjall store in a child of sys.executable first (``-c CODE``)."""
    code = "import sys\nfrom statemigrate import _native\nprint(sys.argv[1:])"
    run = in_namespace(bundle, "-c", code, "a", "b")
    assert run.returncode == 0 and run.stdout == "['a', 'b']\n", run.stdout + run.stderr


def test_converts_and_verifies_without_python(bundle, tmp_path) -> None:
    rocks, lite = tmp_path / "app-state.rocksdb", tmp_path / "app-state.sqlite"
    for dst in (rocks, lite):
        run = in_namespace(bundle, "convert", EXAMPLE_STORE, dst)
        assert run.returncode == 0, run.stderr
    run = in_namespace(bundle, "verify", rocks, lite)
    assert run.returncode == 0 and "equal" in run.stdout, run.stdout + run.stderr
    for table in ("events", "odd", "settings"):
        assert rows(lite, table) == rows(EXAMPLE_STORE, table), table
    # RocksDB read by rocksdict itself, outside: one column family per table, raw bytes.
    from rocksdict import AccessType, Options, Rdict

    raw = Options(raw_mode=True)
    families = Rdict.list_cf(str(rocks))
    db = Rdict(
        str(rocks),
        options=raw,
        access_type=AccessType.read_only(),
        column_families={name: raw for name in families},
    )
    try:
        for table in ("events", "odd"):
            assert list(db.get_column_family(table).items()) == rows(EXAMPLE_STORE, table)
    finally:
        db.close()


def _schema_reporting(tmp_path: Path, report: Path) -> Path:
    """The example schema plus 0006, which imports a helper module of the schema directory
    (on ``sys.path`` by ``prepend_sys_path``) and writes where its imports came from."""
    code = f"helper_paths.write({str(report)!r})\nop.create_table(helper_paths.TABLE)"
    revision = revision_file("0006", "0005", code, imports="import helper_paths")
    schema = schema_with(tmp_path, {"0006_report.py": revision}, name="reporting")
    ini = schema / "alembic.ini"
    ini.write_text(
        ini.read_text().replace(
            "script_location = %(here)s", "script_location = %(here)s\nprepend_sys_path = %(here)s"
        )
    )
    (schema / "helper_paths.py").write_text(
        # graphlib: in the standard library, imported by nothing else the bundle holds.
        "import graphlib, json, sys\n"
        "import alembic, sqlalchemy, statemigrate, statemigrate._native\n"
        "TABLE = 'report'\n\n\n"
        "def write(path):\n"
        "    paths = {'executable': sys.executable, 'prefix': sys.prefix,\n"
        "             'base_prefix': sys.base_prefix, 'statemigrate': statemigrate.__file__,\n"
        "             'native': statemigrate._native.__file__, 'alembic': alembic.__file__,\n"
        "             'sqlalchemy': sqlalchemy.__file__, 'json': json.__file__,\n"
        "             'graphlib': graphlib.__file__,\n"
        "             'helper': __file__, 'frozen': getattr(sys, 'frozen', False)}\n"
        "    with open(path, 'w') as f:\n"
        "        json.dump({'paths': paths, 'sys_path': sys.path}, f)\n"
    )
    return schema


def test_the_installer_step_without_python(bundle, tmp_path) -> None:
    sqlite = get_engine("sqlite")
    store = seeded(sqlite, tmp_path, events=50, name="a")
    twin = seeded(sqlite, tmp_path, events=50, name="b")  # upgraded by the venv, for the digest
    example = schema_with(tmp_path, {}, name="example")  # the package's own copy is under src/

    run = in_namespace(bundle, "upgrade", store, "--schema", example, "--json")
    report = one_json(run)
    assert run.returncode == 0 and report["exit_code"] == 0 and report["status"] == "upgraded"
    assert report["from"] == ["0001"] and report["to"] == ["0005"]
    assert [r["revision"] for r in report["revisions"]] == ["0002", "0003", "0004", "0005"]
    venv = subprocess.run(
        [Path(sys.executable).parent / "statemigrate", "upgrade", twin, "--schema", example]
        + ["--json"],
        capture_output=True,
        text=True,
        check=False,
    )
    assert venv.returncode == 0, venv.stderr
    assert report["digest_after"] == json.loads(venv.stdout)["digest_after"]

    run = in_namespace(bundle, "upgrade", store, "--schema", example, "--json")
    assert run.returncode == 0 and one_json(run)["status"] == "up_to_date"

    fresh = tmp_path / "new" / "state.sqlite"
    fresh.parent.mkdir()
    run = in_namespace(bundle, "upgrade", "--create", fresh, "--schema", example, "--json")
    report = one_json(run)
    assert run.returncode == 0 and report["status"] == "upgraded" and report["created"] is True
    assert fresh.is_file() and report["to"] == ["0005"]

    missing = tmp_path / "none" / "state.sqlite"
    run = in_namespace(bundle, "upgrade", missing, "--schema", example, "--json")
    assert run.returncode == 4 and one_json(run)["status"] == "missing"
    assert not missing.parent.exists()

    busy = seeded(sqlite, tmp_path, events=50, name="c")
    with held_by_app(busy) as pid:  # a process outside holds it: its lock is on the inode
        before = file_bytes(busy)  # as the holder left it (its writer puts it in WAL mode)
        run = in_namespace(bundle, "upgrade", busy, "--schema", example, "--json")
        assert file_bytes(busy) == before
    report = one_json(run)
    assert run.returncode == 3 and report["status"] == "busy" and report["exit_code"] == 3
    assert f"in use by another process (pid {pid})" in report["error"], report["error"]

    newer = schema_with(
        tmp_path,
        {"0006_n.py": revision_file("0006", "0005", "op.create_table('n')")},
        name="newer",
    )
    ahead = seeded(sqlite, tmp_path, events=10, name="d")
    stamp = subprocess.run(
        [Path(sys.executable).parent / "statemigrate", "upgrade", ahead, "--schema", newer],
        capture_output=True,
        text=True,
        check=False,
    )
    assert stamp.returncode == 0, stamp.stderr
    before = file_bytes(ahead)
    run = in_namespace(bundle, "upgrade", ahead, "--schema", example, "--json")
    report = one_json(run)
    assert run.returncode == 1 and report["status"] == "too_new" and report["exit_code"] == 1
    assert file_bytes(ahead) == before


def test_a_revision_imports_a_helper_of_its_schema_from_inside_the_bundle(bundle, tmp_path) -> None:
    out = tmp_path / "paths.json"
    schema = _schema_reporting(tmp_path, out)
    store = seeded(get_engine("sqlite"), tmp_path, events=10, name="s")
    run = in_namespace(bundle, "upgrade", store, "--schema", schema, "--json")
    report = one_json(run)
    assert run.returncode == 0 and report["to"] == ["0006"], run.stderr
    assert rows(Path(store.split(":", 1)[1]), "report") == []  # the table the helper named was made
    seen = json.loads(out.read_text())
    paths = seen["paths"]
    assert paths.pop("frozen") is True
    assert paths.pop("helper") == str(schema / "helper_paths.py")
    inside = str(BUNDLE.resolve()) + os.sep
    for name, path in paths.items():
        assert (str(Path(path).resolve()) + os.sep).startswith(inside), (name, path)
    for entry in seen["sys_path"]:
        resolved = str(Path(entry).resolve())
        assert (resolved + os.sep).startswith(inside) or resolved == str(schema), entry
