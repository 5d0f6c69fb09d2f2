"""The upgrade verbs through click's CliRunner: output, --json, and the installer's exit codes."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from statemigrate.cli import main
from statemigrate.registry import get_engine
from statemigrate.testing.upgrade_conformance import (
    EXAMPLE,
    held_by_app,
    revision_file,
    schema_with,
    seeded,
)

VERBS = ["upgrade", "downgrade", "stamp", "current", "check", "history", "revision"]


def run(*args: str):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


@pytest.fixture
def store(tmp_path) -> str:
    return seeded(get_engine("sqlite"), tmp_path, events=50)


def test_installer_can_tell_every_outcome_apart(store, tmp_path) -> None:
    # busy: the app holds the store (and there is work to do)
    with held_by_app(store):
        r = run("upgrade", store, "--schema", EXAMPLE, "--json")
    assert r.exit_code == 3
    assert json.loads(r.output.split("statemigrate: error")[0])["status"] == "busy"
    # success
    r = run("upgrade", store, "--schema", EXAMPLE, "--json")
    report = json.loads(r.output)
    assert r.exit_code == 0 and report["status"] == "upgraded"
    assert report["from"] == ["0001"] and report["to"] == ["0005"]
    assert [x["revision"] for x in report["revisions"]] == ["0002", "0003", "0004", "0005"]
    assert all("seconds" in x for x in report["revisions"])
    assert report["engine"] == "sqlite" and report["digest_before"] != report["digest_after"]
    # nothing to do
    r = run("upgrade", store, "--schema", EXAMPLE, "--json")
    assert r.exit_code == 0 and json.loads(r.output)["status"] == "up_to_date"
    # too new: a newer app's schema wrote 0006
    newer = schema_with(
        tmp_path, {"0006_n.py": revision_file("0006", "0005", "op.create_table('n')")}
    )
    assert run("upgrade", store, "--schema", newer).exit_code == 0
    r = run("upgrade", store, "--schema", EXAMPLE, "--json")
    assert (
        r.exit_code == 1
        and json.loads(r.output.split("statemigrate: error")[0])["status"] == "too_new"
    )
    # failure
    bad = schema_with(
        tmp_path,
        {
            "0006_n.py": revision_file("0006", "0005", "op.create_table('n')"),
            "0007_bad.py": revision_file("0007", "0006", "op.drop_table('nope')"),
        },
        name="bad",
    )
    r = run("upgrade", store, "--schema", bad, "--json")
    out = json.loads(r.output.split("statemigrate: error")[0])
    assert r.exit_code == 5 and out["status"] == "failed" and "0007" in out["error"]


def test_errors_are_one_line(store) -> None:
    with held_by_app(store):
        r = CliRunner().invoke(main, ["upgrade", store, "--schema", str(EXAMPLE)])
    assert r.exit_code == 3
    assert r.output.startswith("statemigrate: error: ") and "Traceback" not in r.output


def test_check_current_stamp_downgrade(store) -> None:
    r = run("check", store, "--schema", EXAMPLE)
    assert r.exit_code == 1 and "0001" in r.output and "0005" in r.output
    assert run("current", store).output.strip().endswith("at 0001")
    assert run("upgrade", store, "--schema", EXAMPLE, "--to", "0003").exit_code == 0
    r = run("current", store, "--json")
    assert json.loads(r.output)["current"] == ["0003"]
    assert run("upgrade", store, "--schema", EXAMPLE).exit_code == 0
    r = run("check", store, "--schema", EXAMPLE, "--json")
    assert r.exit_code == 0 and json.loads(r.output)["ok"] is True
    r = run("downgrade", store, "--schema", EXAMPLE, "--to", "-2", "--json")
    assert r.exit_code == 0 and json.loads(r.output)["to"] == ["0003"]
    r = run("stamp", store, "0005", "--schema", EXAMPLE, "--dry-run")
    assert r.exit_code == 0 and "would be stamped 0005" in r.output
    assert run("current", store).output.strip().endswith("at 0003")
    r = run("downgrade", store, "--schema", EXAMPLE, "--to", "base")
    assert r.exit_code == 0 and "base" in r.output


def test_dry_run_and_backup(store, tmp_path) -> None:
    r = run("upgrade", store, "--schema", EXAMPLE, "--dry-run")
    assert (
        r.exit_code == 0
        and "op.rekey 'events', seq_first" in r.output
        and "nothing was changed" in r.output
    )
    assert run("current", store).output.strip().endswith("at 0001")
    backup = tmp_path / "before.sqlite"
    r = run("upgrade", store, "--schema", EXAMPLE, "--backup", backup)
    assert r.exit_code == 0 and f"backup written to {backup}" in r.output
    assert run("current", f"sqlite:{backup}").output.strip().endswith("at 0001")


def test_history_and_revision(tmp_path) -> None:
    r = run("history", "--schema", EXAMPLE)
    assert r.exit_code == 0 and r.output.splitlines()[0].startswith("0004 -> 0005 (head)")
    rows = json.loads(run("history", "--schema", EXAMPLE, "--json").output)["revisions"]
    assert [x["revision"] for x in rows] == ["0005", "0004", "0003", "0002", "0001"]
    schema = schema_with(tmp_path, {})
    r = run("revision", "--schema", schema, "-m", "add a thing", "--rev-id", "0006", "--json")
    path = json.loads(r.output)["path"]
    text = Path(path).read_text()
    assert "from statemigrate import op" in text and "down_revision = '0005'" in text
    assert run("history", "--schema", schema).output.startswith("0005 -> 0006 (head), add a thing")


def test_every_verb_has_help() -> None:
    for verb in VERBS:
        r = run(verb, "--help")
        assert r.exit_code == 0 and len(r.output) > 200, verb


def test_jsonl_is_refused_clearly(tmp_path, store) -> None:
    from statemigrate.api import convert

    dump = tmp_path / "dump.jsonl"
    convert(store, str(dump))
    r = CliRunner().invoke(main, ["upgrade", str(dump), "--schema", str(EXAMPLE)])
    assert r.exit_code == 2 and "does not support schema upgrades in place" in r.output


def test_retry_after_a_failed_revision_keeps_the_first_backup(store, tmp_path) -> None:
    """The installer runs the same command again: the first try's backup (the state from
    before the install) is kept, and the retry's backup gets the UTC time in its name."""
    backup = tmp_path / "state.pre.sqlite"
    broken = schema_with(
        tmp_path,
        {"0006_bad.py": revision_file("0006", "0005", "op.drop_table('nope')")},
        name="broken",
    )
    r = run("upgrade", store, "--schema", broken, "--backup", backup, "--json")
    failed = json.loads(r.stdout)
    assert r.exit_code == 5 and failed["status"] == "failed" and "0006" in failed["error"]
    assert run("current", f"sqlite:{backup}").output.strip().endswith("at 0001")
    first = backup.read_bytes()
    fixed = schema_with(
        tmp_path, {"0006_ok.py": revision_file("0006", "0005", "op.create_table('n')")}, name="ok"
    )
    r = run("upgrade", store, "--schema", fixed, "--backup", backup, "--json")
    report = json.loads(r.stdout)
    assert r.exit_code == 0 and report["status"] == "upgraded", r.output
    assert report["from"] == ["0005"] and report["to"] == ["0006"]
    second = Path(report["backup"])
    assert second != backup and second.parent == backup.parent
    assert second.name.startswith("state.pre.") and second.suffix == ".sqlite"
    assert backup.read_bytes() == first  # the state from before the install, untouched
    assert run("current", f"sqlite:{second}").output.strip().endswith("at 0005")
    # Text output says which file is which.
    third = schema_with(
        tmp_path,
        {
            "0006_ok.py": revision_file("0006", "0005", "op.create_table('n')"),
            "0007_ok.py": revision_file("0007", "0006", "op.create_table('m')"),
        },
        name="third",
    )
    r = run("upgrade", store, "--schema", third, "--backup", backup)
    assert r.exit_code == 0 and f"{backup} was there already" in r.output, r.output
    assert len(list(tmp_path.glob("state.pre.*.sqlite"))) == 2


def test_a_taken_backup_name_without_a_suffix_gets_the_time_at_its_end(store, tmp_path) -> None:
    taken = tmp_path / "state.sqlite.pre-2.0"  # an installer's "$STATE.pre-$VERSION"
    taken.write_bytes(b"an earlier backup")
    r = run("upgrade", store, "--schema", EXAMPLE, "--backup", taken, "--json")
    backup = Path(json.loads(r.stdout)["backup"])
    assert r.exit_code == 0 and taken.read_bytes() == b"an earlier backup"
    assert re.fullmatch(r"state\.sqlite\.pre-2\.0\.\d{8}T\d{6}Z", backup.name), backup.name
    assert run("current", f"sqlite:{backup}").output.strip().endswith("at 0001")


def test_at_the_target_the_stamp_answers_without_digests(store) -> None:
    assert run("upgrade", store, "--schema", EXAMPLE).exit_code == 0
    r = run("upgrade", store, "--schema", EXAMPLE, "--json")
    report = json.loads(r.stdout)
    assert r.exit_code == 0 and report["status"] == "up_to_date" and report["revisions"] == []
    assert report["digest_before"] is None and report["digest_after"] is None


def test_an_apps_store_without_a_revision_is_told_how_to_adopt_it(tmp_path) -> None:
    """A store holding the schema's tables but no stamp (made before the app used
    statemigrate): revision 0001 finds its table there (exit 5, the store unchanged) and
    the hint names ``stamp``; after ``stamp`` the upgrade runs from there."""
    from statemigrate.engines.base import META_REVISION
    from statemigrate.testing.upgrade_conformance import EXAMPLE, digest, seeded

    eng = get_engine("sqlite")
    spec = seeded(eng, tmp_path, events=20)  # at 0001
    path = Path(spec.split(":", 1)[1])
    with eng.open_writer(path) as w:  # the stamp taken away: an app's own store
        w.put_metadata({META_REVISION: None})
        w.finish()
    before = digest(spec)
    run = CliRunner().invoke(main, ["upgrade", spec, "--schema", str(EXAMPLE)])
    assert run.exit_code == 5, run.output
    lines = run.output.strip().splitlines()
    assert lines[-2] == "statemigrate: error: revision 0001: table 'events' already exists"
    assert lines[-1].startswith(f"hint: {path} holds tables but no schema revision"), lines
    assert f"statemigrate stamp {path} --schema {EXAMPLE} REVISION" in lines[-1]
    assert digest(spec) == before
    stamped = CliRunner().invoke(main, ["stamp", spec, "--schema", str(EXAMPLE), "0001"])
    assert stamped.exit_code == 0, stamped.output
    done = CliRunner().invoke(main, ["upgrade", spec, "--schema", str(EXAMPLE), "--json"])
    assert done.exit_code == 0, done.output
