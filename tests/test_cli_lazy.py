"""The command line loads engines lazily, and a plugin that cannot be imported breaks nothing.

`statemigrate --help` must not import the engine modules (their drivers, their native
code), and a third-party engine whose module raises anything at all on import is
listed as broken by `statemigrate engines` while every other command works.
"""

from __future__ import annotations

import base64
import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

from statemigrate.model import TableInfo
from statemigrate.registry import get_engine
from statemigrate.testing.stores import write_store

HANG_GUARD = 120  # seconds: a generous guard against a hung child, never a measurement

# The engine modules `import statemigrate.cli` may load: the contract itself, which the
# verbs' signatures and the CLI's option parsing are written in (the Engine and Reader
# classes, the typed options, the declared driver errors). No engine's own module.
CONTRACT = {
    "statemigrate.engines.base",
    "statemigrate.engines.access",
    "statemigrate.engines.errors",
    "statemigrate.engines.options",
}

LOADED_ENGINE_MODULES = (
    "import json, sys\n"
    "print(json.dumps(sorted(m for m in sys.modules if m.startswith('statemigrate.engines.'))))\n"
)

PLUGIN_ERROR = "brokenplug needs a licence server"


def run_python(code: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
        env=env,
    )


def test_importing_the_cli_loads_no_engine_module() -> None:
    proc = run_python("import statemigrate.cli\n" + LOADED_ENGINE_MODULES)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout))
    assert loaded <= CONTRACT, f"engine modules loaded by the import: {sorted(loaded - CONTRACT)}"


def test_the_help_loads_no_engine_module() -> None:
    code = (
        "from statemigrate.cli import main\n"
        "try:\n"
        "    main(['--help'], prog_name='statemigrate')\n"
        "except SystemExit as exc:\n"
        "    assert exc.code == 0, exc.code\n" + LOADED_ENGINE_MODULES
    )
    proc = run_python(code)
    assert proc.returncode == 0, proc.stderr
    loaded = set(json.loads(proc.stdout.splitlines()[-1]))
    assert loaded <= CONTRACT, f"engine modules loaded by --help: {sorted(loaded - CONTRACT)}"


def broken_plugin(root: Path, error: str) -> dict[str, str]:
    """A third-party distribution on ``root`` whose engine module raises ``error`` when
    imported, registered through a real ``statemigrate.engines`` entry point.

    Returns:
        The environment of a child process that sees it.
    """
    (root / "brokenplug.py").write_text(
        f"raise {error}\n",
        encoding="utf-8",
    )
    info = root / "brokenplug-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: brokenplug\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[statemigrate.engines]\nbrokenplug = brokenplug:BrokenEngine\n", encoding="utf-8"
    )
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(root), env.get("PYTHONPATH")]))
    return env


def cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statemigrate", *args],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
        env=env,
    )


def test_the_fake_plugin_is_registered(tmp_path: Path) -> None:
    # The fixture is real: the child's entry points list the plugin beside the built-ins.
    env = broken_plugin(tmp_path, f"RuntimeError({PLUGIN_ERROR!r})")
    proc = run_python(
        "from importlib.metadata import entry_points\n"
        "print(sorted(ep.name for ep in entry_points(group='statemigrate.engines')))\n",
        env,
    )
    assert proc.returncode == 0, proc.stderr
    assert "'brokenplug'" in proc.stdout and "'sqlite'" in proc.stdout, proc.stdout


def test_a_plugin_raising_at_import_leaves_help_working(tmp_path: Path) -> None:
    env = broken_plugin(tmp_path, f"RuntimeError({PLUGIN_ERROR!r})")
    proc = cli(env, "--help")
    assert proc.returncode == 0, proc.stderr
    assert "Usage:" in proc.stdout and "convert" in proc.stdout
    convert_help = cli(env, "convert", "--help")
    assert convert_help.returncode == 0, convert_help.stderr
    assert "--batch-records" in convert_help.stdout


def sqlite_store(path: Path) -> dict[str, list[tuple[bytes, bytes]]]:
    """A SQLite store of two tables; its records, as written."""
    content = {
        TableInfo("accounts"): [(b"a%03d" % i, b"balance %d" % i) for i in range(20)],
        TableInfo("blocks"): [(b"\x00\xff%d" % i, bytes(range(i))) for i in range(5)],
    }
    write_store(get_engine("sqlite"), path, content)
    with sqlite3.connect(path) as db:  # the store is a SQLite file: sqlite3 itself says so
        assert db.execute("PRAGMA integrity_check").fetchone() == ("ok",)
    return {t.name: recs for t, recs in content.items()}


def jsonl_records(path: Path) -> dict[str, set[tuple[bytes, bytes]]]:
    """The records of a jsonl dump, decoded with the documented encoding (base64 of the
    key and the value, on record lines after their table's line)."""
    out: dict[str, set[tuple[bytes, bytes]]] = {}
    table = None
    for line in path.read_bytes().splitlines():
        obj = json.loads(line)
        if "k" in obj:
            assert table is not None
            out[table].add((base64.b64decode(obj["k"]), base64.b64decode(obj["v"])))
        elif "table" in obj and "tables" not in obj:
            table = obj["table"]
            out.setdefault(table, set())
    return out


def test_a_plugin_raising_at_import_leaves_convert_working(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    env = broken_plugin(plugin, f"RuntimeError({PLUGIN_ERROR!r})")
    source = tmp_path / "state.db"
    written = sqlite_store(source)
    dest = tmp_path / "state.jsonl"
    proc = cli(env, "convert", str(source), str(dest))
    assert proc.returncode == 0, proc.stderr
    got = jsonl_records(dest)
    assert got == {name: set(recs) for name, recs in written.items()}


def test_engines_lists_a_plugin_raising_at_import_as_broken(tmp_path: Path) -> None:
    env = broken_plugin(tmp_path, f"RuntimeError({PLUGIN_ERROR!r})")
    proc = cli(env, "engines", "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {row["name"]: row for row in json.loads(proc.stdout)["engines"]}
    assert PLUGIN_ERROR in rows["brokenplug"]["error"]
    assert "RuntimeError" in rows["brokenplug"]["error"]
    assert rows["sqlite"]["driver_installed"] is True
    text = cli(env, "engines")
    assert text.returncode == 0, text.stderr
    assert any("brokenplug" in line and PLUGIN_ERROR in line for line in text.stdout.splitlines())


def test_a_plugin_with_a_syntax_error_leaves_every_command_working(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    env = broken_plugin(plugin, "def (:")  # not Python: SyntaxError, not an ImportError
    assert cli(env, "--help").returncode == 0
    source = tmp_path / "state.db"
    written = sqlite_store(source)
    dest = tmp_path / "state.jsonl"
    proc = cli(env, "convert", str(source), str(dest))
    assert proc.returncode == 0, proc.stderr
    assert jsonl_records(dest) == {name: set(recs) for name, recs in written.items()}
    rows = {r["name"]: r for r in json.loads(cli(env, "engines", "--json").stdout)["engines"]}
    assert "SyntaxError" in rows["brokenplug"]["error"]


def test_naming_the_broken_plugin_is_one_line_and_a_usage_error(tmp_path: Path) -> None:
    plugin = tmp_path / "plugin"
    plugin.mkdir()
    env = broken_plugin(plugin, f"RuntimeError({PLUGIN_ERROR!r})")
    source = tmp_path / "state.db"
    sqlite_store(source)
    proc = cli(env, "convert", str(source), str(tmp_path / "out.x"), "--to", "brokenplug")
    assert proc.returncode == 2, proc.stderr
    assert "brokenplug" in proc.stderr and PLUGIN_ERROR in proc.stderr
    assert "Traceback" not in proc.stderr
    assert not (tmp_path / "out.x").exists()
