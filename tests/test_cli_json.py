"""``--json``: one object on stdout on every path, valid against its published schema.

The schemas are ``docs/schemas/<command>.schema.json``. Each command is run on success
and on the failures a user meets (a missing store, the wrong engine, a usage error, a
store an app holds, a damaged file, a refused destination), and every object printed
is validated; the status and the exit code always agree.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from click.testing import CliRunner

from statemigrate.cli import main
from statemigrate.engines.sqlite import SqliteEngine
from statemigrate.model import TableInfo, TableKind
from statemigrate.testing.holders import app_holding
from statemigrate.testing.stores import write_store

SCHEMAS = Path(__file__).resolve().parents[1] / "docs" / "schemas"
COMMANDS = ["convert", "verify", "checksum", "inspect"]
SCHEMA_FILE = {"downgrade": "upgrade", "stamp": "upgrade"}  # one shape for the three
READ_ONLY = ["current", "check", "history", "revision"]  # the other schema commands
EVERY = [*COMMANDS, "upgrade", *READ_ONLY, "engines"]  # one schema file each


def schema_of(command: str) -> dict[str, Any]:
    name = SCHEMA_FILE.get(command, command)
    return json.loads((SCHEMAS / f"{name}.schema.json").read_text())


def run_json(*args: object) -> tuple[int, dict[str, Any]]:
    """Run a command with --json; its stdout must be exactly one object valid against
    its command's schema, whose exit_code is the process's."""
    res = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    command = str(args[0])
    data = json.loads(res.stdout)  # one document, nothing else on stdout
    jsonschema.validate(data, schema_of(command), cls=jsonschema.Draft202012Validator)
    documented = schema_of(command)["properties"]["schema_version"]["const"]
    assert data["command"] == command and data["schema_version"] == documented
    assert data["exit_code"] == res.exit_code, (data, res.output)
    if res.exit_code not in (0, 1):
        assert res.stderr.startswith("statemigrate: error: ") or "Error:" in res.stderr
    return res.exit_code, data


@pytest.fixture
def src(tmp_path: Path) -> Path:
    content = {
        TableInfo("events"): [(b"e%03d" % i, b"payload %d" % i) for i in range(50)],
        TableInfo("settings", TableKind.VERSIONED): [(b"s1", b"on", 3)],
    }
    return write_store(SqliteEngine, tmp_path / "a.sqlite", content)


@pytest.mark.parametrize("command", EVERY)
def test_every_schema_is_a_valid_draft_2020_12_schema(command: str) -> None:
    schema = schema_of(command)
    jsonschema.Draft202012Validator.check_schema(schema)
    assert jsonschema.Draft202012Validator(schema["properties"]["command"]).is_valid(command)
    assert sorted(p.name for p in SCHEMAS.iterdir()) == sorted(f"{c}.schema.json" for c in EVERY)


@pytest.mark.parametrize("command", EVERY)
def test_the_schemas_can_fail(command: str) -> None:
    """A status paired with another command's exit code, or a failure without its
    error, is rejected: the schemas pin what they promise."""
    version = schema_of(command)["properties"]["schema_version"]["const"]
    base = {"schema_version": version, "command": command, "error": "x", "hint": None}
    validator = jsonschema.Draft202012Validator(schema_of(command))
    assert validator.is_valid({**base, "status": "busy", "exit_code": 3})
    assert not validator.is_valid({**base, "status": "failed", "exit_code": 4})
    assert not validator.is_valid({**base, "status": "busy", "exit_code": 3, "error": None})
    assert not validator.is_valid({**base, "status": "ok", "exit_code": 0})  # no report


def test_success_objects(src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "b.rocksdb"
    code, conv = run_json("convert", src, dst, "--json")
    assert code == 0 and conv["status"] == "converted" and conv["error"] is None
    assert conv["records"] == 51 and conv["bytes"] == sum(t["bytes"] for t in conv["tables"]) > 0
    assert conv["seconds"] == round(conv["seconds"], 3)
    code, again = run_json("convert", src, dst, "--resume", "--json")
    assert code == 0 and again["status"] == "already_complete"
    code, ver = run_json("verify", src, dst, "--json")
    assert code == 0 and ver["status"] == "equal" and ver["digest_a"] == conv["store_digest"]
    code, summed = run_json("checksum", dst, "--json")
    assert code == 0 and summed["status"] == "ok" and summed["digest"] == conv["store_digest"]
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(summed))  # the envelope does not stop it being a manifest
    code, against = run_json("verify", src, "--manifest", manifest, "--json")
    assert code == 0 and against["status"] == "equal"
    code, seen = run_json("inspect", src, "--json")
    assert code == 0 and seen["status"] == "ok"
    # --no-verify: valid against the schema (version 2), its digests null.
    code, fast = run_json("convert", src, tmp_path / "c.rocksdb", "--no-verify", "--json")
    assert code == 0 and fast["verified"] is False and fast["store_digest"] is None
    assert [t["digest"] for t in fast["tables"]] == [None] * len(conv["tables"])
    assert [(t["table"], t["records"]) for t in seen["tables"]] == [("events", 50), ("settings", 1)]


def test_different_is_exit_1_with_status_different(src: Path, tmp_path: Path) -> None:
    other = tmp_path / "c.sqlite"
    write_store(SqliteEngine, other, {TableInfo("events"): [(b"e000", b"changed")]})
    code, data = run_json("verify", src, other, "--json")
    assert code == 1 and data["status"] == "different" and data["difference_count"] > 0


@pytest.mark.parametrize(
    "args",
    [
        ["convert", "{missing}", "{out}"],
        ["verify", "{missing}", "{src}"],
        ["checksum", "{missing}"],
        ["inspect", "{missing}"],
    ],
    ids=COMMANDS,
)
def test_missing_store_is_status_missing_exit_4(args, src: Path, tmp_path: Path) -> None:
    values = {"missing": tmp_path / "nope.sqlite", "out": tmp_path / "o.sqlite", "src": src}
    code, data = run_json(*[a.format(**values) for a in args], "--json")
    assert code == 4 and data["status"] == "missing", data
    assert "no such file" in data["error"]


@pytest.mark.parametrize(
    "args",
    [
        ["convert", "rocksdb:{src}", "{out}"],
        ["verify", "{src}", "rocksdb:{src}"],
        ["checksum", "rocksdb:{src}"],
        ["inspect", "rocksdb:{src}"],
    ],
    ids=COMMANDS,
)
def test_wrong_engine_is_status_unreadable_exit_4(args, src: Path, tmp_path: Path) -> None:
    values = {"out": tmp_path / "o.sqlite", "src": src}
    code, data = run_json(*[a.format(**values) for a in args], "--json")
    assert code == 4 and data["status"] == "unreadable", data


@pytest.mark.parametrize(
    "args",
    [
        ["convert", "{src}", "--json"],  # no destination
        ["convert", "{src}", "{out}", "--batch-records", "0", "--json"],
        ["verify", "{src}", "--json"],  # neither B nor --manifest: the library's usage error
        ["checksum", "{src}", "--json", "--no-such-option"],
        ["inspect", "--json"],
    ],
    ids=["convert-arg", "convert-range", "verify", "checksum", "inspect"],
)
def test_usage_error_is_one_object_exit_2(args, src: Path, tmp_path: Path) -> None:
    values = {"out": tmp_path / "o.sqlite", "src": src}
    code, data = run_json(*[a.format(**values) for a in args])
    assert code == 2 and data["status"] == "usage_error" and data["error"], data
    assert not (tmp_path / "o.sqlite").exists()


def test_busy_store_is_status_busy_exit_3(tmp_path: Path) -> None:
    store = tmp_path / "held.rocksdb"
    write_store(
        __import__("statemigrate.registry", fromlist=["get_engine"]).get_engine("rocksdb"),
        store,
        {TableInfo("t"): [(b"k", b"v")]},
    )
    with app_holding("rocksdb", store) as pid:
        results = [
            run_json("convert", store, tmp_path / "o.sqlite", "--json"),
            run_json("verify", store, store, "--json"),
            run_json("checksum", store, "--json"),
            run_json("inspect", store, "--json"),
        ]
    for code, data in results:
        assert code == 3 and data["status"] == "busy" and f"pid {pid}" in data["error"], data


def test_damaged_store_is_status_unreadable_exit_4(src: Path, tmp_path: Path) -> None:
    damaged = tmp_path / "cut.sqlite"
    shutil.copy(src, damaged)
    with damaged.open("r+b") as f:
        f.truncate(damaged.stat().st_size // 2)
    for args in (
        ["convert", damaged, tmp_path / "o.sqlite"],
        ["verify", damaged, src],
        ["checksum", damaged],
        ["inspect", damaged],
    ):
        code, data = run_json(*args, "--json")
        assert code == 4 and data["status"] == "unreadable", data


def test_refused_destination_is_status_failed_exit_5(src: Path, tmp_path: Path) -> None:
    dst = tmp_path / "taken.sqlite"
    shutil.copy(src, dst)
    code, data = run_json("convert", src, dst, "--json")
    assert code == 5 and data["status"] == "failed" and data["hint"], data
    assert data["source"] == str(src) and data["destination"] == str(dst)


def test_schema_commands_print_the_envelope_on_usage_errors(tmp_path: Path) -> None:
    code, data = run_json("upgrade", tmp_path / "s.sqlite", "--json", "--bogus")
    assert code == 2 and data["status"] == "usage_error" and "--bogus" in data["error"]


def test_upgrade_downgrade_stamp_objects_on_every_path(tmp_path: Path) -> None:
    from statemigrate.registry import get_engine
    from statemigrate.testing.upgrade_conformance import (
        EXAMPLE,
        held_by_app,
        revision_file,
        schema_with,
        seeded,
    )

    store = seeded(get_engine("sqlite"), tmp_path, events=20)
    code, data = run_json("upgrade", store, "--schema", EXAMPLE, "--dry-run", "--json")
    assert code == 0 and data["status"] == "dry_run"
    with held_by_app(store):
        code, data = run_json("upgrade", store, "--schema", EXAMPLE, "--json")
    assert code == 3 and data["status"] == "busy" and data["store"] == store
    code, data = run_json("upgrade", store, "--schema", EXAMPLE, "--json")
    assert (
        code == 0 and data["status"] == "upgraded" and data["seconds"] == round(data["seconds"], 3)
    )
    code, data = run_json("upgrade", store, "--schema", EXAMPLE, "--json")
    assert code == 0 and data["status"] == "up_to_date" and data["digest_before"] is None
    code, data = run_json("downgrade", store, "--schema", EXAMPLE, "--to", "-1", "--json")
    assert code == 0 and data["status"] == "downgraded" and data["to"] == ["0004"]
    code, data = run_json("stamp", store, "0005", "--schema", EXAMPLE, "--json")
    assert code == 0 and data["status"] == "stamped"
    newer = schema_with(
        tmp_path, {"0006_n.py": revision_file("0006", "0005", "op.create_table('n')")}
    )
    assert run_json("upgrade", store, "--schema", newer, "--json")[0] == 0
    code, data = run_json("upgrade", store, "--schema", EXAMPLE, "--json")
    assert code == 1 and data["status"] == "too_new"
    bad = schema_with(
        tmp_path,
        {
            "0006_n.py": revision_file("0006", "0005", "op.create_table('n')"),
            "0007_bad.py": revision_file("0007", "0006", "op.drop_table('nope')"),
        },
        name="bad",
    )
    code, data = run_json("upgrade", store, "--schema", bad, "--json")
    assert code == 5 and data["status"] == "failed" and "0007" in data["error"]
    code, data = run_json("upgrade", tmp_path / "none.sqlite", "--schema", EXAMPLE, "--json")
    assert code == 4 and data["status"] == "missing"
    code, data = run_json("upgrade", store, "--json")  # no --schema
    assert code == 2 and data["status"] == "usage_error"
    code, data = run_json("stamp", store, "--schema", EXAMPLE, "--json")  # no REVISION
    assert code == 2 and data["status"] == "usage_error"


def test_current_check_history_revision_objects(tmp_path: Path) -> None:
    from statemigrate.registry import get_engine
    from statemigrate.testing.upgrade_conformance import (
        EXAMPLE,
        revision_file,
        schema_with,
        seeded,
    )

    store = seeded(get_engine("sqlite"), tmp_path, events=5)
    code, data = run_json("current", store, "--json")
    assert code == 0 and data["status"] == "ok" and data["current"] == ["0001"]
    assert data["heads"] is None and "ok" not in data  # no --schema: nothing to compare
    code, data = run_json("current", store, "--schema", EXAMPLE, "--json")
    assert code == 0 and data["heads"] == ["0005"] and data["ok"] is False
    code, data = run_json("check", store, "--schema", EXAMPLE, "--json")
    assert code == 1 and data["status"] == "behind" and data["error"] is None
    assert data["current"] == ["0001"] and data["heads"] == ["0005"] and data["ok"] is False
    assert run_json("upgrade", store, "--schema", EXAMPLE, "--no-digest", "--json")[0] == 0
    code, data = run_json("check", store, "--schema", EXAMPLE, "--json")
    assert code == 0 and data["status"] == "at_head" and data["ok"] is True
    newer = schema_with(
        tmp_path, {"0006_n.py": revision_file("0006", "0005", "op.create_table('n')")}
    )
    assert run_json("upgrade", store, "--schema", newer, "--no-digest", "--json")[0] == 0
    code, data = run_json("check", store, "--schema", EXAMPLE, "--json")
    assert code == 1 and data["status"] == "too_new" and data["unknown"] == ["0006"], data

    code, data = run_json("history", "--schema", EXAMPLE, "--json")
    assert code == 0 and data["status"] == "ok" and data["schema"] == str(EXAMPLE)
    assert [r["revision"] for r in data["revisions"]] == ["0005", "0004", "0003", "0002", "0001"]
    assert data["revisions"][0]["is_head"] is True

    schema = schema_with(tmp_path, {}, name="fresh")
    code, data = run_json("revision", "--schema", schema, "-m", "x", "--dry-run", "--json")
    assert code == 0 and data["status"] == "dry_run" and data["path"] is None
    assert not list((Path(schema) / "versions").glob("0006*"))
    args = ["revision", "--schema", schema, "-m", "add a thing", "--rev-id", "0006", "--json"]
    code, data = run_json(*args)
    assert code == 0 and data["status"] == "written" and data["dry_run"] is False
    assert Path(data["path"]).is_file() and data["message"] == "add a thing"


@pytest.mark.parametrize(
    "args, code, status",
    [
        (["current", "{missing}"], 4, "missing"),
        (["check", "{missing}", "--schema", "{example}"], 4, "missing"),
        (["current", "rocksdb:{src}"], 4, "unreadable"),
        (["check", "rocksdb:{src}", "--schema", "{example}"], 4, "unreadable"),
        (["check", "{src}", "--schema", "{nowhere}"], 2, "usage_error"),  # not a schema
        (["history", "--schema", "{nowhere}"], 2, "usage_error"),
        (["revision", "--schema", "{example}", "-m", "x", "--head", "zzzz"], 2, "usage_error"),
        (["current"], 2, "usage_error"),  # click's: no STORE
        (["check", "{src}"], 2, "usage_error"),  # click's: no --schema
        (["history", "--bogus"], 2, "usage_error"),
        (["revision", "--schema", "{example}"], 2, "usage_error"),  # click's: no -m
    ],
    ids=[
        "current-missing",
        "check-missing",
        "current-wrong-engine",
        "check-wrong-engine",
        "check-no-schema-dir",
        "history-no-schema-dir",
        "revision-unknown-head",
        "current-no-store",
        "check-no-schema",
        "history-bogus-option",
        "revision-no-message",
    ],
)
def test_current_check_history_revision_failures(
    args: list[str], code: int, status: str, src: Path, tmp_path: Path
) -> None:
    from statemigrate.testing.upgrade_conformance import EXAMPLE

    values = {
        "missing": tmp_path / "nope.sqlite",
        "src": src,
        "example": EXAMPLE,
        "nowhere": tmp_path / "no-schema",
    }
    got, data = run_json(*[a.format(**values) for a in args], "--json")
    assert (got, data["status"]) == (code, status), data
    assert data["error"] and "revisions" not in data and "current" not in data
    assert not (tmp_path / "nope.sqlite").exists()


def test_current_and_check_of_a_held_store_are_busy(tmp_path: Path) -> None:
    """An app holding a RocksDB store (its LOCK): current and check say busy, exit 3."""
    from statemigrate.registry import get_engine
    from statemigrate.testing.upgrade_conformance import EXAMPLE

    store = tmp_path / "held.rocksdb"
    write_store(get_engine("rocksdb"), store, {TableInfo("t"): [(b"k", b"v")]})
    with app_holding("rocksdb", store) as pid:
        results = [
            run_json("current", store, "--json"),
            run_json("check", store, "--schema", EXAMPLE, "--json"),
        ]
    for code, data in results:
        assert code == 3 and data["status"] == "busy" and f"pid {pid}" in data["error"], data


def test_check_of_a_revision_changed_after_it_ran_is_status_changed(tmp_path: Path) -> None:
    from statemigrate.registry import get_engine
    from statemigrate.testing.upgrade_conformance import revision_file, schema_with, seeded

    store = seeded(get_engine("sqlite"), tmp_path, events=5)
    schema = schema_with(
        tmp_path, {"0006_n.py": revision_file("0006", "0005", "op.create_table('n')")}
    )
    assert run_json("upgrade", store, "--schema", schema, "--no-digest", "--json")[0] == 0
    changed = next((Path(schema) / "versions").glob("0006_*.py"))
    changed.write_text(changed.read_text().replace("create_table('n')", "create_table('m')"))
    code, data = run_json("check", store, "--schema", schema, "--json")
    assert code == 1 and data["status"] == "changed" and data["at_head"] is True, data
    assert [f["revision"] for f in data["changed_files"]] == ["0006"]


def test_engines_lists_every_engine_with_its_options_in_the_envelope() -> None:
    code, out = run_json("engines", "--json")
    assert code == 0 and out["status"] == "ok" and out["error"] is None
    by_name = {e["name"]: e for e in out["engines"]}
    assert {"sqlite", "rocksdb", "redb", "lmdb", "jsonl"} <= set(by_name)
    assert "rocksdb_format_version" in {o["name"] for o in by_name["rocksdb"]["options"]}
    code, out = run_json("engines", "--json", "--bogus")
    assert code == 2 and out["status"] == "usage_error" and "--bogus" in out["error"]
