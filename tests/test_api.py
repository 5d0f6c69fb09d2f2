"""The library's surface: one door (statemigrate.api) for every verb, paths as str or
os.PathLike, errors exported from the package, and a package that imports lazily."""

from __future__ import annotations

import inspect as pyinspect
import json
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

import statemigrate
from statemigrate import api, errors
from statemigrate.cli import main
from statemigrate.engines.base import Engine
from statemigrate.engines.sqlite import SqliteEngine
from statemigrate.model import TableInfo, TableKind
from statemigrate.registry import get_engine
from statemigrate.schema import errors as schema_errors
from statemigrate.testing.stores import write_store
from statemigrate.testing.upgrade_conformance import EXAMPLE, schema_with, seeded

HANG_GUARD = 120  # seconds: a generous guard against a hung child, never a measurement


def python(code: str) -> str:
    """Run ``code`` in a fresh interpreter; its stdout."""
    proc = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    return proc.stdout


# --- a lazy package ------------------------------------------------------------------

VERB_MODULES = (
    "statemigrate.api",
    "statemigrate.pipeline",
    "statemigrate.verification",
    "statemigrate.cli",
    "statemigrate.schema.runner",
    "click",
    "tqdm",
    "alembic",
)
LOADED = (
    "import sys, importlib\n"
    "importlib.import_module(sys.argv[1] if len(sys.argv) > 1 else {module!r})\n"
    f"print(','.join(m for m in {VERB_MODULES!r} if m in sys.modules))\n"
)


def test_importing_an_engine_loads_no_verb_click_or_tqdm(engine: type[Engine]) -> None:
    assert python(LOADED.format(module=engine.__module__)).strip() == ""


def test_importing_the_package_loads_no_verb() -> None:
    assert python(LOADED.format(module="statemigrate")).strip() == ""


def test_the_names_resolve_on_first_use() -> None:
    out = python(
        "import sys, statemigrate\n"
        "assert 'statemigrate.api' not in sys.modules\n"
        "f = statemigrate.inspect\n"
        "print(f.__module__, 'statemigrate.api' in sys.modules, statemigrate.__version__)\n"
    )
    module, loaded, version = out.split()
    assert module == "statemigrate.api" and loaded == "True" and version


# --- one name, one thing -------------------------------------------------------------


def test_upgrade_is_the_function_and_the_machinery_is_statemigrate_schema() -> None:
    out = python(
        "import statemigrate, statemigrate.api, statemigrate.schema.op\n"
        "from statemigrate import op\n"
        "print(statemigrate.upgrade is statemigrate.api.upgrade,\n"
        "      op is statemigrate.schema.op, callable(statemigrate.upgrade))\n"
    )
    assert out.split() == ["True", "True", "True"]


def test_the_verbs_never_load_the_old_package(tmp_path: Path) -> None:
    store = seeded(get_engine("sqlite"), tmp_path, events=5)
    code = (
        "import sys, statemigrate\n"
        "statemigrate.upgrade(sys.argv[1], sys.argv[2], to='0003')\n"
        "statemigrate.current(sys.argv[1], schema=sys.argv[2])\n"
        "statemigrate.checksum(sys.argv[1])\n"
        "statemigrate.convert(sys.argv[1], sys.argv[3])\n"
        "import statemigrate.api, statemigrate.cli\n"
        "print('statemigrate.upgrade' in sys.modules, "
        "statemigrate.upgrade is statemigrate.api.upgrade)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-c", code, store, str(EXAMPLE), str(tmp_path / "copy.jsonl")],
        capture_output=True,
        text=True,
        timeout=HANG_GUARD,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.split() == ["False", "True"]


def test_there_is_no_upgrade_package_only_the_function() -> None:
    # The schema machinery is statemigrate.schema; the never-released shim package is gone.
    out = python(
        "import importlib, statemigrate, statemigrate.api\n"
        "try:\n"
        "    importlib.import_module('statemigrate.upgrade.runner')\n"
        "    print('imported')\n"
        "except ModuleNotFoundError:\n"
        "    print('missing')\n"
        "print(statemigrate.upgrade is statemigrate.api.upgrade)\n"
    )
    assert out.split() == ["missing", "True"]


def _error_classes() -> list[type[errors.StateMigrateError]]:
    found = []
    for module in (errors, schema_errors):
        for value in vars(module).values():
            if isinstance(value, type) and issubclass(value, errors.StateMigrateError):
                found.append(value)
    return found


@pytest.mark.parametrize("cls", _error_classes(), ids=lambda c: c.__name__)
def test_every_error_class_is_exported_from_the_package(cls: type) -> None:
    assert cls.__name__ in statemigrate.__all__
    assert getattr(statemigrate, cls.__name__) is cls


def test_exported_errors_carry_the_contracts_exit_codes() -> None:
    from statemigrate import DestinationError, SourceError, StoreBusyError, UsageError

    assert [UsageError.exit_code, StoreBusyError.exit_code] == [2, 3]
    assert [SourceError.exit_code, DestinationError.exit_code] == [4, 5]


@pytest.mark.parametrize("name", sorted(main.commands))
def test_every_command_is_a_documented_api_function(name: str) -> None:
    fn = getattr(api, name)
    assert callable(fn) and name in api.__all__ and name in statemigrate.__all__
    assert fn.__doc__ and ("Returns:" in fn.__doc__ or "Args:" in fn.__doc__), name
    for param in pyinspect.signature(fn).parameters.values():
        if param.name in ("store", "source", "destination", "a", "b", "schema", "manifest"):
            assert "PathLike" in str(param.annotation) or "StorePath" in str(param.annotation)


# --- paths as str or os.PathLike -----------------------------------------------------


@pytest.fixture
def store(tmp_path: Path) -> Path:
    content = {
        TableInfo("events"): [(b"e%03d" % i, b"payload %d" % i) for i in range(40)],
        TableInfo("settings", TableKind.VERSIONED): [(b"s1", b"on", 3)],
    }
    return write_store(SqliteEngine, tmp_path / "a.sqlite", content)


def test_every_store_verb_takes_a_path_object(store: Path, tmp_path: Path) -> None:
    by_str = api.checksum(str(store))
    assert statemigrate.checksum(store).digest == by_str.digest
    assert api.inspect(store).tables == api.inspect(str(store)).tables
    with api.open_store(store) as reader:
        assert {t.name for t in reader.tables()} == {"events", "settings"}
    out = tmp_path / "b.rocksdb"
    report = api.convert(store, out)
    assert report.verified and report.store_digest == by_str.digest
    assert api.verify(store, out).equal
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(by_str.to_json()))
    assert api.verify_manifest(out, manifest).equal


def test_every_schema_verb_takes_a_path_object(tmp_path: Path) -> None:
    store = Path(seeded(get_engine("sqlite"), tmp_path, events=20).split(":", 1)[1])
    schema = Path(EXAMPLE)
    assert api.current(store, schema=schema).current == ["0001"]
    assert not api.check(store, schema).ok
    assert [r["revision"] for r in api.history(schema)][-1] == "0001"
    report = api.upgrade(store, schema, to="0002", backup=tmp_path / "before.sqlite")
    assert report.status == "upgraded" and report.to_revisions == ["0002"]
    assert (tmp_path / "before.sqlite").exists()
    assert api.stamp(store, schema, "head", dry_run=True).to_revisions == ["0005"]
    assert api.downgrade(store, schema, to="0001").to_revisions == ["0001"]
    assert api.finish_interrupted(store) is None
    mine = schema_with(tmp_path, {})
    path = api.revision(mine, "a thing", rev_id="0006")
    assert Path(path).parent == mine / "versions" and "0006" in Path(path).name


# --- the CLI only calls the library --------------------------------------------------

SCHEMA_COMMANDS = {
    "upgrade": ["upgrade", "{store}", "--schema", "{schema}", "--dry-run"],
    "downgrade": ["downgrade", "{store}", "--schema", "{schema}", "--to", "base", "--dry-run"],
    "stamp": ["stamp", "{store}", "head", "--schema", "{schema}", "--dry-run"],
    "current": ["current", "{store}"],
    "check": ["check", "{store}", "--schema", "{schema}"],
    "history": ["history", "--schema", "{schema}"],
    "revision": ["revision", "--schema", "{copy}", "-m", "x", "--rev-id", "0006"],
}


@pytest.mark.parametrize("verb", sorted(SCHEMA_COMMANDS))
def test_schema_commands_go_through_the_api(verb: str, tmp_path: Path, monkeypatch) -> None:
    store = seeded(get_engine("sqlite"), tmp_path, events=5)
    copy = schema_with(tmp_path, {})
    calls: list[str] = []
    real = getattr(api, verb)

    def through(*args, **kwargs):
        calls.append(verb)
        return real(*args, **kwargs)

    monkeypatch.setattr(api, verb, through)
    args = [a.format(store=store, schema=EXAMPLE, copy=copy) for a in SCHEMA_COMMANDS[verb]]
    res = CliRunner().invoke(main, args)
    assert calls == [verb], res.output
    assert res.exit_code in (0, 1) and "error" not in res.output, res.output


def test_a_library_hint_names_the_keyword_the_cli_hint_the_option(tmp_path: Path) -> None:
    src = tmp_path / "a.sqlite"
    write_store(SqliteEngine, src, {TableInfo("t"): [(b"k", b"v")]})
    dst = tmp_path / "b.sqlite"
    statemigrate.convert(src, dst)
    with pytest.raises(errors.DestinationError) as caught:
        statemigrate.convert(src, dst)
    assert caught.value.hint == "pass overwrite=True to replace it"
    assert caught.value.cli_hint == "pass --overwrite to replace it"
    res = CliRunner().invoke(main, ["convert", str(src), str(dst)])
    assert res.exit_code == 5 and "hint: pass --overwrite to replace it" in res.stderr


@pytest.mark.parametrize(
    ("cli", "library"),
    [
        (
            "free some space, then run the same command with --resume",
            "free some space, then call it again with resume=True",
        ),
        (
            "leave it out with --tables, or correct the layout",
            "leave it out with tables=[...], or correct the layout",
        ),
        (
            "--skip-foreign-tables leaves them out",
            "the option skip_foreign_tables=True leaves them out",
        ),
        (
            "name the engine as ENGINE:PATH or with --from",
            "name the engine as ENGINE:PATH or with from_engine=",
        ),
        ("stop the app", "stop the app"),
    ],
)
def test_hints_in_the_library_words(cli: str, library: str) -> None:
    assert errors.StateMigrateError("x", hint=cli).hint == library
