"""``upgrade --create`` on a first install: an empty directory (what an installer's
``mkdir -p`` makes) is a missing store for every directory engine; a directory holding
anything else is refused as before; ``--backup`` backs up nothing that did not exist."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest
from click.testing import CliRunner

from statemigrate.api import upgrade
from statemigrate.cli import main
from statemigrate.registry import engine_names, get_engine
from statemigrate.schema.first_install import make_store
from statemigrate.testing.upgrade_conformance import EXAMPLE, empty_store

IN_PLACE = [n for n in engine_names() if get_engine(n).capabilities.in_place]
DIRECTORY = [n for n in IN_PLACE if get_engine(n).capabilities.directory]
NOBODY = 65534


def cli(*args: object) -> tuple[dict, int]:
    """``--json``'s object and the exit code of a command run in this process."""
    run = CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)
    out, _end = json.JSONDecoder().raw_decode(run.stdout)
    return out, run.exit_code


def reference_digest(tmp_path: Path) -> str:
    """The digest of a new store brought to head (SQLite's, made by create_writer)."""
    (tmp_path / "reference").mkdir()
    spec = empty_store(get_engine("sqlite"), tmp_path / "reference")
    digest = upgrade(spec, EXAMPLE).digest_after
    assert digest
    return digest


def tree(path: Path) -> list[Path]:
    return [path, *(Path(r) / n for r, ds, fs in os.walk(path) for n in (*ds, *fs))]


def test_the_directory_engines_are_known() -> None:
    assert {"rocksdb", "lmdb", "fjall2", "fjall3", "helixdb"} <= set(DIRECTORY)


@pytest.mark.parametrize("engine", DIRECTORY)
def test_create_makes_the_store_in_an_empty_directory(engine: str, tmp_path: Path) -> None:
    """The directory an installer made (its mode, and as root its owner) becomes the
    store, brought to head; a second run finds it there."""
    want = reference_digest(tmp_path)
    target = tmp_path / "install" / "state"
    target.mkdir(parents=True)
    os.chmod(target, 0o750)
    if os.geteuid() == 0:
        os.chown(target, NOBODY, NOBODY)
    spec = f"{engine}:{target}"
    report, code = cli("upgrade", spec, "--schema", EXAMPLE, "--create", "--dry-run", "--json")
    assert code == 0 and report["status"] == "dry_run" and report["to"] == ["0005"], report
    assert os.listdir(target) == [], "a dry run makes nothing"
    report, code = cli("upgrade", spec, "--schema", EXAMPLE, "--create", "--json")
    assert code == 0, report
    assert report["status"] == "upgraded" and report["created"] is True
    assert report["from"] == [] and report["to"] == ["0005"]
    assert report["digest_after"] == want
    assert stat.S_IMODE(target.stat().st_mode) == 0o750
    if os.geteuid() == 0:
        assert target.stat().st_uid == NOBODY
    assert os.listdir(target.parent) == ["state"], "nothing left beside the store"
    report, code = cli("upgrade", spec, "--schema", EXAMPLE, "--create", "--json")
    assert code == 0 and report["status"] == "up_to_date" and report["created"] is False


@pytest.mark.parametrize("engine", DIRECTORY)
def test_the_store_made_in_an_empty_directory_is_its_owners(engine: str, tmp_path: Path) -> None:
    """Every file of the new store is no wider than the directory, and (as root) has its
    owner: the app the installer made the directory for can open it."""
    eng = get_engine(engine)
    target = tmp_path / "state"
    target.mkdir()
    os.chmod(target, 0o700)
    if os.geteuid() == 0:
        os.chown(target, NOBODY, NOBODY)
    assert make_store(eng, target) is True
    with eng.open_reader(target) as reader:
        assert reader.list_tables() == []
    for p in tree(target):
        assert stat.S_IMODE(p.lstat().st_mode) & 0o077 == 0, p
        if os.geteuid() == 0:
            assert p.lstat().st_uid == NOBODY, p
    assert os.listdir(tmp_path) == ["state"]
    assert make_store(eng, target) is False, "a store is there now"


@pytest.mark.parametrize("engine", DIRECTORY)
def test_create_refuses_a_directory_holding_something_else(engine: str, tmp_path: Path) -> None:
    target = tmp_path / "state"
    target.mkdir()
    (target / "notes.txt").write_text("mine\n")
    report, code = cli("upgrade", f"{engine}:{target}", "--schema", EXAMPLE, "--create", "--json")
    assert code == 4 and report["exit_code"] == 4, report
    assert os.listdir(target) == ["notes.txt"] and (target / "notes.txt").read_text() == "mine\n"
    assert os.listdir(tmp_path) == ["state"]


def test_an_empty_directory_is_no_single_file_store(tmp_path: Path) -> None:
    """Only a directory engine's store is a directory: ``sqlite:DIR`` stays refused."""
    target = tmp_path / "state"
    target.mkdir()
    report, code = cli("upgrade", f"sqlite:{target}", "--schema", EXAMPLE, "--create", "--json")
    assert code == 4 and report["exit_code"] == 4, report
    assert os.listdir(target) == [] and os.listdir(tmp_path) == ["state"]


@pytest.mark.parametrize("engine", IN_PLACE)
def test_create_with_backup_backs_up_nothing_that_did_not_exist(
    engine: str, tmp_path: Path
) -> None:
    eng = get_engine(engine)
    target = tmp_path / f"state{eng.suffixes[0] if eng.suffixes else ''}"
    backup = tmp_path / "backup"
    report, code = cli(
        "upgrade",
        f"{engine}:{target}",
        "--schema",
        EXAMPLE,
        "--create",
        "--backup",
        backup,
        "--json",
    )
    assert code == 0 and report["created"] is True, report
    assert report["backup"] is None
    assert not os.path.lexists(backup)
    assert sorted(os.listdir(tmp_path)) == sorted(p.name for p in eng.store_paths(target))


@pytest.mark.parametrize("engine", ["rocksdb", "lmdb"])
def test_what_an_interrupted_create_left_is_started_over(engine: str, tmp_path: Path) -> None:
    """Killed while the new store's files moved up, a run leaves its private folder and
    some files in the directory, which was empty: the next --create starts over."""
    from statemigrate.schema.first_install import BUILDING

    target = tmp_path / "state"
    (target / BUILDING / "store").mkdir(parents=True)
    (target / BUILDING / "store" / "half").write_bytes(b"x")
    (target / "moved-already").write_bytes(b"y")
    report, code = cli("upgrade", f"{engine}:{target}", "--schema", EXAMPLE, "--create", "--json")
    assert code == 0 and report["created"] is True and report["to"] == ["0005"], report
    names = set(os.listdir(target))
    assert BUILDING not in names and "moved-already" not in names
    report, code = cli("check", f"{engine}:{target}", "--schema", EXAMPLE, "--json")
    assert code == 0 and report["status"] == "at_head", report
