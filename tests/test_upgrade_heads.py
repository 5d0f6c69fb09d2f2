"""An upgrade of a store already at the schema's head, answered without Alembic
(statemigrate.schema.heads): the same report as Alembic's answer, and Alembic left out
only where the schema is a plain one."""

from __future__ import annotations

import hashlib
import json
import shutil
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from statemigrate.api import current, upgrade
from statemigrate.registry import engine_names, get_engine
from statemigrate.schema import runner
from statemigrate.schema.heads import already_at_head, literal_head
from statemigrate.testing.upgrade_conformance import EXAMPLE, revision_file, seeded

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
    monkeypatch.setattr(runner, "already_at_head", lambda *_a, **_k: None)  # Alembic answers
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
    from statemigrate.schema.errors import RevisionUnknownError

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


# Hostile revision files, Alembic itself the oracle (issue 27, C4). Each keeps the
# top-level literals of a plain schema with one head, while the module Alembic loads
# says something else: 0005's ``down_revision`` (or ``revision``) is changed by a
# statement after the literals, or a new file's literals hold a loop.
REASSIGNED = {
    "in an if block": 'if True:\n    down_revision = "0003"\n',
    "in a try block": 'try:\n    down_revision = "0003"\nexcept ImportError:\n    pass\n',
    "in a while loop": 'while down_revision != "0003":\n    down_revision = "0003"\n',
    "as a for target": 'for down_revision in ["0003"]:\n    pass\n',
    "as a with target": (
        'import contextlib\n\nwith contextlib.nullcontext("0003") as down_revision:\n    pass\n'
    ),
    "by an annotated assignment in a block": 'if True:\n    down_revision: str = "0003"\n',
    "by a second annotated assignment": 'down_revision: str = "0003"\n',
    "by a second assignment": 'down_revision = "0003"\n',
    "by an augmented assignment": 'down_revision += "x"\n',
    "by tuple unpacking": 'revision, down_revision = "0005", "0003"\n',
    "by a chained assignment": 'down_revision = other = "0003"\n',
    "by a walrus": '(down_revision := "0003")\n',
    "through globals()": 'globals()["down_revision"] = "0003"\n',
    "through vars()": 'vars()["down_revision"] = "0003"\n',
    "through exec": "exec('down_revision = \"0003\"')\n",
    "through eval": "eval('globals().update(down_revision=\"0003\")')\n",
    "through setattr on sys.modules": (
        'import sys\n\nsetattr(sys.modules[__name__], "down_revision", "0003")\n'
    ),
    "through the frame's globals": 'import sys\n\nsys._getframe().f_globals["down_revision"] = "0003"\n',
    "in a function declaring it global": (
        'def _move():\n    global down_revision\n    down_revision = "0003"\n\n\n_move()\n'
    ),
    "by an import as": "from string import digits as down_revision\n",
    "by del": "del down_revision\n",
    "by a def of that name": "def down_revision():\n    pass\n",
    "by a match capture": 'match "0003":\n    case down_revision:\n        pass\n',
    "by an except name": "try:\n    raise ValueError\nexcept ValueError as down_revision:\n    pass\n",
}


def reassigned(tail: str) -> Callable[[Path], None]:
    def apply(schema: Path) -> None:
        edit(last_revision(schema), "depends_on = None\n", "depends_on = None\n" + tail)

    return apply


def new_files(files: dict[str, str]) -> Callable[[Path], None]:
    def apply(schema: Path) -> None:
        for name, text in files.items():
            (schema / "versions" / name).write_text(text)

    return apply


HOSTILE: dict[str, Callable[[Path], None]] = {
    **{f"down_revision set {what}": reassigned(tail) for what, tail in REASSIGNED.items()},
    "a self-loop": new_files({"0006_loop.py": revision_file("0006", "0006", "pass")}),
    "a self-loop hiding the real parent": new_files(
        {
            "0006_loop.py": revision_file("0006", "0006", "pass").replace(
                "depends_on = None\n", 'depends_on = None\nif True:\n    down_revision = "0005"\n'
            )
        }
    ),
    "a cycle of two": new_files(
        {
            "0006_a.py": revision_file("0006", "0007", "pass"),
            "0007_b.py": revision_file("0007", "0006", "pass"),
        }
    ),
}


def alembics_head(schema: Path) -> str | None:
    """Alembic's own answer: the one head of the schema it loads, or None (several heads,
    or the schema does not load)."""
    from alembic.script import ScriptDirectory

    try:
        heads = ScriptDirectory(str(schema)).get_heads()
    except Exception:  # noqa: BLE001  # any failure to load: Alembic has no head to give
        return None
    return heads[0] if len(heads) == 1 else None


@pytest.mark.parametrize("what", list(HOSTILE))
def test_the_literal_head_is_alembics_or_none_on_hostile_files(what: str, tmp_path: Path) -> None:
    schema = schema_copy(tmp_path)
    HOSTILE[what](schema)
    alembic = alembics_head(schema)
    assert alembic != "0005", "the hostile file must move Alembic's head away from 0005"
    assert literal_head(schema) in (None, alembic), f"Alembic's head: {alembic}"


# Alembic's own generic template writes annotated ids; code elsewhere in the file that
# never touches the four names keeps the fast path.
BENIGN = {
    "annotated ids (Alembic's template)": lambda s: edit(
        last_revision(s),
        'revision = "0005"\ndown_revision = "0004"\n',
        'revision: str = "0005"\ndown_revision: str | None = "0004"\n',
    ),
    "other names set in blocks": reassigned(
        "from typing import TYPE_CHECKING\n\nif TYPE_CHECKING:\n    import os\nfor name in []:\n"
        "    pass\nmessage = revision + down_revision\n"
    ),
}


@pytest.mark.parametrize("what", list(BENIGN))
def test_plain_files_keep_the_literal_head(what: str, tmp_path: Path) -> None:
    schema = schema_copy(tmp_path)
    BENIGN[what](schema)
    assert alembics_head(schema) == "0005"
    assert literal_head(schema) == "0005"


def cli_json(*args: object) -> tuple[str, int]:
    """``--json``'s status and the exit code of a command run in this process."""
    from click.testing import CliRunner

    from statemigrate.cli import main

    run = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    out, _end = json.JSONDecoder().raw_decode(run.output)
    return out["status"], run.exit_code


@pytest.mark.parametrize("what", list(HOSTILE))
def test_upgrade_on_hostile_files_answers_as_alembic_does(
    what: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A store at 0005, then a hostile revision file: ``upgrade --json`` says what the full
    Alembic path says (same status, same exit code), and ``up_to_date`` only where
    ``check`` finds the store at head."""

    stores = []
    for name in ("fast", "alembic"):
        (tmp_path / name).mkdir()
        spec = seeded(get_engine("sqlite"), tmp_path / name, events=5)
        upgrade(spec, EXAMPLE, digests=False)
        stores.append(spec)
    schema = schema_copy(tmp_path)
    HOSTILE[what](schema)
    checked, check_exit = cli_json("check", stores[0], "--schema", schema, "--json")
    fast = cli_json("upgrade", stores[0], "--schema", schema, "--json", "--no-digest")
    with monkeypatch.context() as m:
        m.setattr(runner, "already_at_head", lambda *_a, **_k: None)
        slow = cli_json("upgrade", stores[1], "--schema", schema, "--json", "--no-digest")
    assert fast == slow, f"check said {checked} (exit {check_exit})"
    assert (fast[0] == "up_to_date") == (check_exit == 0), f"check said {checked}"


def test_a_revision_file_changed_after_it_was_applied_goes_to_alembic(tmp_path: Path) -> None:
    """The literals are trusted only for the bytes the store recorded as applied: a file
    edited since (its sha256 no longer the recorded one) is Alembic's to answer."""
    spec = seeded(get_engine("sqlite"), tmp_path, events=5)
    schema = schema_copy(tmp_path)
    upgrade(spec, schema, digests=False)
    report, said = cli_at_head(spec, schema)
    assert report["status"] == "up_to_date" and said == "exit 0 False"
    path = last_revision(schema)
    before = hashlib.sha256(path.read_bytes()).hexdigest()
    path.write_text(path.read_text() + "# edited after it was applied\n")
    assert hashlib.sha256(path.read_bytes()).hexdigest() != before
    assert literal_head(schema) == "0005"  # the literals alone still say 0005
    report, said = cli_at_head(spec, schema)
    assert report["status"] == "up_to_date", report
    assert said == "exit 0 True"


@pytest.mark.parametrize("engine", IN_PLACE)
def test_every_engines_recorded_checksums_decide_the_fast_path(engine: str, tmp_path: Path) -> None:
    """The checksums each engine keeps beside its stamp are read: equal to the files'
    sha256 the fast path answers, one file edited since and it declines."""
    spec = seeded(get_engine(engine), tmp_path, events=5)
    schema = schema_copy(tmp_path)
    upgrade(spec, schema, digests=False)
    eng_name, path = spec.split(":", 1)
    report = already_at_head(path, eng_name, schema)
    assert report is not None and report.to_revisions == ["0005"]
    files = sorted((schema / "versions").glob("*.py"))
    want = {f.name[:4]: hashlib.sha256(f.read_bytes()).hexdigest() for f in files}
    assert upgrade(spec, schema, digests=False).status == "up_to_date"
    first = files[0]
    first.write_bytes(first.read_bytes() + b"\n")
    assert literal_head(schema) == "0005"
    assert already_at_head(path, eng_name, schema) is None
    assert current(spec).checksums == want  # what the store recorded: the files' sha256
