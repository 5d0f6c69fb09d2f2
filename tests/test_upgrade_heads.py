"""An upgrade of a store already at the schema's head, answered without Alembic
(statemigrate.schema.heads): the same report as Alembic's answer, and Alembic left out
only where the schema is a plain one."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from statemigrate.registry import engine_names, get_engine
from statemigrate.schema import heads as heads_module
from statemigrate.schema.heads import literal_head
from statemigrate.testing.upgrade_conformance import EXAMPLE, seeded
from statemigrate.upgrade import upgrade

IN_PLACE = [n for n in engine_names() if get_engine(n).capabilities.in_place]


def report_of(spec: str, **kw: object) -> dict:
    out = upgrade(spec, EXAMPLE, digests=True, **kw).to_json()  # type: ignore[arg-type]
    out.pop("seconds")
    return out


@pytest.mark.parametrize("engine", IN_PLACE)
def test_at_head_the_report_is_alembics(
    engine: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    spec = seeded(get_engine(engine), tmp_path, events=20)
    first = report_of(spec)
    assert first["status"] == "upgraded"
    quick = report_of(spec)
    monkeypatch.setattr(heads_module, "literal_head", lambda _dir: None)  # Alembic answers
    slow = report_of(spec)
    assert quick == slow
    assert quick["status"] == "up_to_date" and quick["to"] == ["0005"]


def test_the_example_schemas_head_is_read_from_its_literals() -> None:
    assert literal_head(EXAMPLE) == "0005"


# A process that upgrades the store at argv[1] (already at head) through the CLI and
# says whether Alembic was imported.
CLI_AT_HEAD = (
    "import sys\n"
    "from statemigrate.cli import main\n"
    "try:\n"
    "    main(['upgrade', sys.argv[1], '--schema', sys.argv[2], '--json'], prog_name='statemigrate')\n"
    "except SystemExit as exc:\n"
    "    print('exit', exc.code, 'alembic' in sys.modules, file=sys.stderr)\n"
)


def cli_at_head(spec: str, schema: Path) -> tuple[dict, str]:
    run = subprocess.run(
        [sys.executable, "-c", CLI_AT_HEAD, spec, str(schema)],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    return json.loads(run.stdout), run.stderr.strip().splitlines()[-1]


def test_the_installers_run_at_head_does_not_load_alembic(tmp_path: Path) -> None:
    spec = seeded(get_engine("sqlite"), tmp_path, events=20)
    upgrade(spec, EXAMPLE, digests=False)
    report, said = cli_at_head(spec, EXAMPLE)
    assert report["status"] == "up_to_date", report
    assert said == "exit 0 False"
    # A store behind the head loads Alembic and runs the revisions.
    (tmp_path / "behind").mkdir()
    behind = seeded(get_engine("sqlite"), tmp_path / "behind", events=20)
    report, said = cli_at_head(behind, EXAMPLE)
    assert report["status"] == "upgraded", report
    assert said == "exit 0 True"


def schema_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "schema"
    shutil.copytree(EXAMPLE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    return copy


def edit(path: Path, old: str, new: str) -> None:
    text = path.read_text()
    assert old in text, path
    path.write_text(text.replace(old, new, 1))


def last_revision(schema: Path) -> Path:
    return next((schema / "versions").glob("0005_*.py"))


EDITS = {
    "branch labels": lambda s: edit(
        last_revision(s), "branch_labels = None", 'branch_labels = ("x",)'
    ),
    "depends_on": lambda s: edit(last_revision(s), "depends_on = None", 'depends_on = "0002"'),
    "an id that is no literal": lambda s: edit(
        last_revision(s), 'revision = "0005"', 'revision = "00" + "05"'
    ),
    "a syntax error": lambda s: last_revision(s).write_text("revision = (\n"),
    "two heads": lambda s: (s / "versions" / "0006_other.py").write_text(
        'revision = "0006"\ndown_revision = "0004"\nbranch_labels = None\ndepends_on = None\n'
    ),
    "a parent with no file": lambda s: edit(
        last_revision(s), 'down_revision = "0004"', 'down_revision = "09"'
    ),
    "a revision named twice": lambda s: (s / "versions" / "0005_again.py").write_text(
        'revision = "0005"\ndown_revision = "0004"\n'
    ),
    "other version locations": lambda s: edit(
        s / "alembic.ini", "[alembic]\n", "[alembic]\nversion_locations = %(here)s/more\n"
    ),
    "a script location elsewhere": lambda s: edit(
        s / "alembic.ini", "script_location = %(here)s", "script_location = /elsewhere"
    ),
}


@pytest.mark.parametrize("what", list(EDITS))
def test_alembic_answers_any_schema_that_is_not_plain(what: str, tmp_path: Path) -> None:
    schema = schema_copy(tmp_path)
    assert literal_head(schema) == "0005"
    EDITS[what](schema)
    assert literal_head(schema) is None


def test_a_store_stamped_elsewhere_than_the_head_gets_alembics_answer(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store at an older revision is upgraded; one at a revision the schema does not
    know is refused as too new (exit 1), exactly as without this path."""
    from statemigrate.upgrade import RevisionUnknownError

    spec = seeded(get_engine("sqlite"), tmp_path, events=20)
    assert upgrade(spec, EXAMPLE, to="0003", digests=False).status == "upgraded"
    assert upgrade(spec, EXAMPLE, digests=False).to_revisions == ["0005"]
    newer = schema_copy(tmp_path)
    (newer / "versions" / "0006_newer.py").write_text(
        'revision = "0006"\ndown_revision = "0005"\n\n\ndef upgrade():\n    pass\n\n\n'
        "def downgrade():\n    pass\n"
    )
    assert upgrade(spec, newer, digests=False).to_revisions == ["0006"]
    with pytest.raises(RevisionUnknownError):
        upgrade(spec, EXAMPLE, digests=False)
