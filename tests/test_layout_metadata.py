"""Where a key-value layout keeps statemigrate's metadata: ``store``, ``inline``, ``none``.

``none`` is the app's shape exactly: nothing of statemigrate's in the store, a convert's
checkpoint in a side file beside ``DST.partial`` that goes when the store is placed.
Expectations come from the engines' own drivers (py-lmdb, rocksdict): which databases and
column families exist, and every pair they hold.
"""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import lmdb
import pytest
import rocksdict
from click.testing import CliRunner

from statemigrate import api
from statemigrate.cli import main
from statemigrate.registry import get_engine
from statemigrate.testing.cli import run_cli
from statemigrate.testing.upgrade_conformance import EXAMPLE, seeded

EVENTS = [(b"e%05d" % i, b"payload %d" % i) for i in range(400)]


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def lmdb_app(path: Path) -> Path:
    """py-lmdb: 400 records in the unnamed database, as a Postfix-style app keeps them."""
    env = lmdb.open(str(path))
    with env.begin(write=True) as txn:
        for k, v in EVENTS:
            txn.put(k, v)
    env.close()
    return path


def lmdb_contents(path: Path) -> tuple[list[tuple[bytes, bytes]], list[bytes]]:
    """Every pair of the unnamed database, and the names of the named databases (py-lmdb)."""
    env = lmdb.open(str(path), readonly=True, lock=False, max_dbs=8)
    with env.begin() as txn:
        pairs = [(bytes(k), bytes(v)) for k, v in txn.cursor()]
    env.close()
    named = []
    for k, v in pairs:
        if len(v) == 48:  # an MDB_db record: a named database's entry
            try:
                e = lmdb.open(str(path), readonly=True, lock=False, max_dbs=8)
                e.open_db(k, create=False)
                named.append(k)
                e.close()
            except lmdb.Error:
                pass
    return pairs, named


NONE = 'engine = "lmdb"\nmetadata = "none"\n[kv]\nmode = "namespaces"\ntables = { events = "" }\n'
STORE = 'engine = "lmdb"\nmetadata = "store"\n[kv]\nmode = "namespaces"\ntables = { events = "" }\n'


def _layout(tmp_path: Path, text: str, name: str = "l.toml") -> Path:
    p = tmp_path / name
    p.write_text(text)
    return p


def test_metadata_none_writes_the_apps_shape_only(tmp_path: Path) -> None:
    src = lmdb_app(tmp_path / "app.lmdb")
    lay = _layout(tmp_path, NONE)
    mid = tmp_path / "mid.sqlite"
    assert run("convert", "-q", "--source-layout", lay, src, mid).exit_code == 0
    back = tmp_path / "back.lmdb"
    r = run("convert", "-q", "--dest-layout", lay, mid, f"lmdb:{back}")
    assert r.exit_code == 0, r.output
    pairs, named = lmdb_contents(back)
    assert pairs == EVENTS and named == []
    assert sorted(os.listdir(tmp_path)) == ["app.lmdb", "back.lmdb", "l.toml", "mid.sqlite"]


def test_metadata_store_keeps_statemigrates_database(tmp_path: Path) -> None:
    src = lmdb_app(tmp_path / "app.lmdb")
    lay = _layout(tmp_path, STORE)
    back = tmp_path / "back.lmdb"
    r = run(
        "convert",
        "-q",
        "--source-layout",
        _layout(tmp_path, NONE, "n.toml"),
        "--dest-layout",
        lay,
        src,
        f"lmdb:{back}",
    )
    assert r.exit_code == 0, r.output
    pairs, named = lmdb_contents(back)
    assert named == [b"__statemigrate__"]
    assert [p for p in pairs if p[0] != b"__statemigrate__"] == EVENTS


def test_a_killed_convert_into_metadata_none_resumes_from_its_side_file(tmp_path: Path) -> None:
    src = lmdb_app(tmp_path / "app.lmdb")
    lay = _layout(tmp_path, NONE)
    mid = tmp_path / "mid.sqlite"
    assert run("convert", "-q", "--source-layout", lay, src, mid).exit_code == 0
    out = tmp_path / "out.lmdb"
    args = [
        "convert",
        "-q",
        "--dest-layout",
        str(lay),
        "--batch-records",
        "50",
        str(mid),
        f"lmdb:{out}",
    ]
    killed = run_cli(args, env={"STATEMIGRATE_CRASH_AT": "batch"}, timeout=120)  # a hang guard
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    partial = Path(str(out) + ".partial")
    side = tmp_path / "out.lmdb.partial.sm-meta.json"
    assert partial.exists() and side.exists()  # the checkpoint lives beside the .partial
    r = run(*args, "--resume")
    assert r.exit_code == 0, r.output
    pairs, named = lmdb_contents(out)
    assert pairs == EVENTS and named == []
    assert not side.exists() and not partial.exists()


def test_an_upgrade_of_a_store_without_metadata_is_refused_naming_the_layout(
    tmp_path: Path,
) -> None:
    """``metadata = "none"`` can record no schema revision: stamping (or upgrading) the
    store is refused (exit 5) with the way out, and the store keeps exactly what it had."""
    default = seeded(get_engine("sqlite"), tmp_path, events=50)
    with api.open_store(default) as reader:
        names = [t.name for t in reader.tables()]
    # Listed: without metadata an empty table leaves no trace of its own.
    lay = _layout(
        tmp_path,
        'engine = "lmdb"\nversioned = ["settings"]\nmetadata = "none"\n[kv]\nmode = "prefix"\n'
        f'namespace = "state"\nprefix = "{{name}}/"\ntables = {json.dumps(names)}\n',
    )
    app = tmp_path / "app.lmdb"
    r = run("convert", "-q", "--dest-layout", lay, default, f"lmdb:{app}")
    assert r.exit_code == 0, r.output
    before = api.checksum(f"lmdb:{app}", options={"layout": str(lay)}).digest
    # Its revision was not carried (nowhere to keep it); adopting it is refused, naming why.
    r = run("stamp", "--layout", lay, app, "0001", "--schema", EXAMPLE)
    assert r.exit_code == 5, r.output
    assert "metadata 'none'" in r.stderr and "schema revision" in r.stderr, r.stderr
    assert api.checksum(f"lmdb:{app}", options={"layout": str(lay)}).digest == before
    assert not list(tmp_path.glob("app.lmdb.sm-meta*"))


@pytest.mark.parametrize("engine", ["lmdb", "rocksdb"])
def test_metadata_inline_keeps_it_in_the_layouts_namespace(engine: str, tmp_path: Path) -> None:
    """``metadata = "inline"``: the metadata under the reserved table name in the
    namespace; an upgrade records its revision there and the store gets no namespace of
    statemigrate's (LMDB too: before, inline metadata was refused for LMDB)."""
    default = seeded(get_engine("sqlite"), tmp_path, events=50)
    lay = _layout(
        tmp_path,
        f'engine = "{engine}"\nversioned = ["settings"]\nmetadata = "inline"\n[kv]\n'
        'mode = "prefix"\nnamespace = "state"\nprefix = "{name}/"\n',
    )
    app = tmp_path / f"app.{engine}"
    r = run("convert", "-q", "--dest-layout", lay, default, f"{engine}:{app}")
    assert r.exit_code == 0, r.output
    r = run("upgrade", "-q", "--layout", lay, app, "--schema", EXAMPLE, "--to", "0003")
    assert r.exit_code == 0, r.output
    r = run("current", "--layout", lay, app)
    assert r.exit_code == 0 and "0003" in r.stdout, r.output
    if engine == "lmdb":
        env = lmdb.open(str(app), readonly=True, lock=False, max_dbs=8)
        with env.begin() as txn:
            names = [bytes(k) for k, _ in txn.cursor()]
        env.close()
        assert names == [b"state"]
    else:
        opts = rocksdict.Options(raw_mode=True)
        assert sorted(rocksdict.Rdict.list_cf(str(app), opts)) == ["default", "state"]
