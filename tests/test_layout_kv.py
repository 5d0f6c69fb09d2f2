"""An app's own ``[kv]`` layout: RocksDB keys prefixed ``table/`` in one column family.

The "app" here is plain rocksdict writing ``events/<key>`` and ``settings/<key>`` into
the default column family, a setting's version appended to its value as 8 little-endian
bytes, knowing nothing of statemigrate; what comes back is read with plain rocksdict
too, so the expectations never come from the code under test. The SQLite side is the
one-table app of ``test_layout.py`` (plain apsw).
"""

from __future__ import annotations

import json
import signal
import struct
from pathlib import Path

import pytest
import rocksdict
from click.testing import CliRunner
from test_layout import EXAMPLE_LAYOUT as SQLITE_LAYOUT
from test_layout import app_rows, app_store, expected_rows

from statemigrate import api
from statemigrate.cli import main
from statemigrate.errors import DestinationError
from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.cli import run_cli
from statemigrate.testing.conformance import CASES as CONFORMANCE_CASES
from statemigrate.testing.conformance import in_layout

ROOT = Path(__file__).resolve().parents[1]
LAYOUT = ROOT / "schemas" / "layouts" / "prefix.rocksdb.toml"

# The same state as test_layout.py's SQLite app: plain events, versioned settings.
EVENTS = [(i.to_bytes(4, "big")[::-1], b"event %d" % i) for i in range(300)]
SETTINGS = [(b"\x00", b"zero key", 7), (b"theme", b"dark", 2**64 - 1), (b"\xff\x00", b"x", 0)]


def run(*args: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _open(path: Path, **kw: object) -> rocksdict.Rdict:
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    names = rocksdict.Rdict.list_cf(str(path), opts) if (path / "CURRENT").exists() else []
    families = {n: opts for n in names if n != "default"}
    return rocksdict.Rdict(str(path), opts, column_families=families, **kw)


def app_store_rocksdb(path: Path, extra: dict[bytes, bytes] | None = None) -> Path:
    """The app's RocksDB store: ``table/`` prefixes, little-endian version suffixes."""
    db = _open(path)
    for k, v in EVENTS:
        db[b"events/" + k] = v
    for k, v, ver in SETTINGS:
        db[b"settings/" + k] = v + ver.to_bytes(8, "little")
    for k, v in (extra or {}).items():
        db[k] = v
    db.close()
    return path


def app_pairs(path: Path) -> list[tuple[bytes, bytes]]:
    """Every pair of the default column family, read with plain rocksdict (as the app)."""
    opts = rocksdict.Options(raw_mode=True)
    db = rocksdict.Rdict(str(path), opts, access_type=rocksdict.AccessType.read_only())
    try:
        return [(bytes(k), bytes(v)) for k, v in db.items()]
    finally:
        db.close()


def expected_pairs() -> list[tuple[bytes, bytes]]:
    pairs = [(b"events/" + k, v) for k, v in EVENTS]
    pairs += [(b"settings/" + k, v + ver.to_bytes(8, "little")) for k, v, ver in SETTINGS]
    return sorted(pairs)


def expected_state() -> dict[str, tuple[str, list[tuple]]]:
    return {
        "events": ("plain", sorted(EVENTS)),
        "settings": ("versioned", sorted(SETTINGS)),
    }


def test_the_app_store_reads_as_the_state_model(tmp_path: Path) -> None:
    src = app_store_rocksdb(tmp_path / "app.rocksdb")
    with get_engine("rocksdb").open_reader(src, {"layout": str(LAYOUT)}) as reader:
        tables = {t.name: (t.kind.value, list(reader.iter_records(t))) for t in reader.tables()}
        after = list(reader.iter_records(reader.tables()[0], EVENTS[5][0]))
    assert tables == expected_state()
    assert after == [r for r in sorted(EVENTS) if r[0] > EVENTS[5][0]]


@pytest.mark.parametrize("via", engine_names())
def test_app_layout_to_every_engine_and_back_is_exact(via: str, tmp_path: Path) -> None:
    eng = get_engine(via)
    eng.require_driver()
    src = app_store_rocksdb(tmp_path / "app.rocksdb")
    mid = tmp_path / f"mid{eng.suffixes[0] if eng.suffixes else ''}"
    back = tmp_path / "back.rocksdb"
    r = run("convert", "-q", "--source-layout", LAYOUT, src, f"{via}:{mid}")
    assert r.exit_code == 0, r.output
    r = run("convert", "-q", "--dest-layout", LAYOUT, f"{via}:{mid}", f"rocksdb:{back}")
    assert r.exit_code == 0, r.output
    assert app_pairs(back) == expected_pairs() == app_pairs(src)
    digest = api.checksum(src, options={"layout": str(LAYOUT)}).digest
    assert api.checksum(f"{via}:{mid}").digest == digest
    r = run("verify", "-q", "--layout-a", LAYOUT, src, f"{via}:{mid}")
    assert r.exit_code == 0 and r.stdout.splitlines()[-1] == "equal", r.output


def test_the_sqlite_app_and_the_rocksdb_app_convert_into_each_other(tmp_path: Path) -> None:
    """The issue's pair: kv(tbl, k, v, ver) in SQLite <-> table/ prefixes in RocksDB."""
    sqlite_app = app_store(tmp_path / "app.sqlite")
    rocks_app = app_store_rocksdb(tmp_path / "app.rocksdb")
    to_rocks = tmp_path / "to.rocksdb"
    to_sqlite = tmp_path / "to.sqlite"
    r = run("convert", "-q", "--source-layout", SQLITE_LAYOUT, "--dest-layout", LAYOUT,
            sqlite_app, f"rocksdb:{to_rocks}")  # fmt: skip
    assert r.exit_code == 0, r.output
    r = run("convert", "-q", "--source-layout", LAYOUT, "--dest-layout", SQLITE_LAYOUT,
            rocks_app, to_sqlite)  # fmt: skip
    assert r.exit_code == 0, r.output
    # SQLite's app stores -1 for the version 2^64-1 (signed INTEGER): the same state.
    assert app_pairs(to_rocks) == expected_pairs()
    assert app_rows(to_sqlite) == expected_rows() == app_rows(sqlite_app)
    r = run("verify", "-q", "--layout-a", SQLITE_LAYOUT, "--layout-b", LAYOUT, sqlite_app,
            rocks_app)  # fmt: skip
    assert r.exit_code == 0 and r.stdout.splitlines()[-1] == "equal", r.output
    a = run("checksum", "--layout", LAYOUT, rocks_app)
    b = run("checksum", "--layout", SQLITE_LAYOUT, sqlite_app)
    assert a.exit_code == b.exit_code == 0 and a.stdout == b.stdout


def test_inspect_takes_a_kv_layout(tmp_path: Path) -> None:
    src = app_store_rocksdb(tmp_path / "app.rocksdb")
    r = run("inspect", "--json", "--layout", LAYOUT, src)
    assert r.exit_code == 0, r.output
    tables = {t["table"]: t["records"] for t in json.loads(r.stdout)["tables"]}
    assert tables == {"events": len(EVENTS), "settings": len(SETTINGS)}


def test_written_store_holds_the_layouts_namespace_and_the_metadata_only(tmp_path: Path) -> None:
    src = app_store_rocksdb(tmp_path / "app.rocksdb")
    out = tmp_path / "out.rocksdb"
    r = run("convert", "-q", "--source-layout", LAYOUT, "--dest-layout", LAYOUT, src,
            f"rocksdb:{out}")  # fmt: skip
    assert r.exit_code == 0, r.output
    opts = rocksdict.Options(raw_mode=True)
    assert sorted(rocksdict.Rdict.list_cf(str(out), opts)) == ["__statemigrate__", "default"]
    assert app_pairs(out) == expected_pairs()


def test_a_named_namespace_and_other_encodings_round_trip(tmp_path: Path) -> None:
    """Every version encoding, in a column family of its own, with a head before the name."""
    sqlite_app = app_store(tmp_path / "app.sqlite")
    digest = api.checksum(sqlite_app, options={"layout": str(SQLITE_LAYOUT)}).digest
    for enc in ("prefix-u64be", "prefix-u64le", "suffix-u64be", "suffix-u64le"):
        layout = tmp_path / f"{enc}.toml"
        layout.write_text(
            'engine = "rocksdb"\nversioned = ["settings"]\n[kv]\nmode = "prefix"\n'
            f'namespace = "state"\nprefix = "app:{{name}}::"\nversion = "{enc}"\n'
        )
        out = tmp_path / f"{enc}.rocksdb"
        r = run("convert", "-q", "--source-layout", SQLITE_LAYOUT, "--dest-layout", layout,
                sqlite_app, f"rocksdb:{out}")  # fmt: skip
        assert r.exit_code == 0, r.output
        db = _open(out, access_type=rocksdict.AccessType.read_only())
        try:
            state = db.get_column_family("state")
            theme = state[b"app:settings::theme"]
            assert db.get(b"app:settings::theme") is None  # not in the default family
            del state
        finally:
            db.close()
        ver = (2**64 - 1).to_bytes(8, "big")  # all ones: any order
        assert theme == (ver + b"dark" if enc.startswith("prefix") else b"dark" + ver)
        assert api.checksum(out, options={"layout": str(layout)}).digest == digest


# The documented encodings (README "Layouts": kv.version), computed here with struct and
# int.to_bytes, never by the code under test: the version as 8 bytes, big- or
# little-endian, before or after the value.
DOCUMENTED_VERSION = {
    "prefix-u64be": lambda value, ver: struct.pack(">Q", ver) + value,
    "prefix-u64le": lambda value, ver: struct.pack("<Q", ver) + value,
    "suffix-u64be": lambda value, ver: value + ver.to_bytes(8, "big"),
    "suffix-u64le": lambda value, ver: value + ver.to_bytes(8, "little"),
}
# Versions whose bytes differ in each order (7 read in the other order is 7 * 2^56),
# and the ends of the range.
ORDERED_VERSIONS = [7, 2**8, 2**56, 2**63, 2**64 - 1, 0, 1, 0x0102030405060708]


def test_every_version_encoding_is_documented_here() -> None:
    from statemigrate.layout import VERSION_ENCODINGS

    assert set(DOCUMENTED_VERSION) == set(VERSION_ENCODINGS) - {"none"}


@pytest.mark.parametrize("enc", sorted(DOCUMENTED_VERSION))
def test_version_encodings_byte_order_and_layout(enc: str) -> None:
    """Each encoding's stored bytes are the documented ones, and read back in order."""
    from statemigrate.engines._kv_layout import decode_records, encode_batch
    from statemigrate.layout import KvPrefix
    from statemigrate.model import TableInfo, TableKind

    spec = KvPrefix("prefix", "state", "app:", "/", enc)
    table = TableInfo("settings", TableKind.VERSIONED)
    records = [(b"k%d" % i, b"value %d" % i, v) for i, v in enumerate(ORDERED_VERSIONS)]
    stored = [(b"app:settings/" + k, DOCUMENTED_VERSION[enc](v, ver)) for k, v, ver in records]
    assert encode_batch(spec, table, records) == stored
    assert list(decode_records(spec, table, iter(stored), "here")) == records
    # An empty value: the 8 bytes are the whole value.
    assert encode_batch(spec, table, [(b"e", b"", 7)]) == [
        (b"app:settings/e", DOCUMENTED_VERSION[enc](b"", 7))
    ]


@pytest.mark.parametrize("enc", sorted(DOCUMENTED_VERSION))
def test_an_apps_versions_in_each_encoding_read_and_write_exactly(enc: str, tmp_path: Path) -> None:
    """A RocksDB app (plain rocksdict) stores versions in the encoding: statemigrate reads
    each version as the app wrote it, and a convert back gives the app's bytes."""
    layout = tmp_path / f"{enc}.toml"
    layout.write_text(
        'engine = "rocksdb"\nversioned = ["settings"]\n[kv]\nmode = "prefix"\n'
        f'namespace = "default"\nprefix = "{{name}}/"\nversion = "{enc}"\n'
    )
    records = [(b"k%d" % i, b"v%d" % i, ver) for i, ver in enumerate(ORDERED_VERSIONS)]
    app = tmp_path / "app.rocksdb"
    db = _open(app)
    for k, v, ver in records:
        db[b"settings/" + k] = DOCUMENTED_VERSION[enc](v, ver)
    db.close()
    got = api.checksum(app, options={"layout": str(layout)})
    assert [(t["table"], t["count"]) for t in got.tables] == [("settings", len(records))]
    from statemigrate.testing.stores import read_store

    data = read_store(get_engine("rocksdb"), app, {"layout": str(layout)})
    assert data["tables"]["settings"] == ("versioned", records)
    out = tmp_path / "out.rocksdb"
    r = run("convert", "-q", "--source-layout", layout, "--dest-layout", layout,
            f"rocksdb:{app}", f"rocksdb:{out}")  # fmt: skip
    assert r.exit_code == 0, r.output
    db = _open(out, access_type=rocksdict.AccessType.read_only())
    try:
        pairs = [(k, v) for k, v in db.items() if k.startswith(b"settings/")]
    finally:
        db.close()
    assert pairs == [(b"settings/" + k, DOCUMENTED_VERSION[enc](v, ver)) for k, v, ver in records]


@pytest.mark.parametrize("at_head", [False, True], ids=["example", "versioned-at-head"])
def test_upgrades_in_place_run_on_a_store_in_a_prefix_layout(at_head: bool, tmp_path: Path) -> None:
    """The example schema's revisions, up and back, on a RocksDB store in the prefix
    layout: at every revision the same digest as the same revision in the default layout.

    ``versioned-at-head``: the layout lists ``prefs`` too, versioned from revision 0004
    on; before that the kind recorded in the metadata (plain) wins.
    """
    from statemigrate.testing.upgrade_conformance import EXAMPLE, seeded

    lay = LAYOUT
    if at_head:
        lay = tmp_path / "at-head.toml"
        lay.write_text(LAYOUT.read_text().replace('["settings"]', '["settings", "prefs"]'))
    default = seeded(get_engine("sqlite"), tmp_path, events=400)
    app = tmp_path / "app.rocksdb"
    r = run("convert", "-q", "--dest-layout", lay, default, f"rocksdb:{app}")
    assert r.exit_code == 0, r.output
    layout = {"layout": str(lay)}
    start = api.checksum(app, options=layout).digest
    for rev in ("0002", "0003", "0004", "0005"):
        r = run("upgrade", "-q", "--layout", lay, app, "--schema", EXAMPLE, "--to", rev)
        assert r.exit_code == 0, r.output
        api.upgrade(default, EXAMPLE, to=rev, digests=False)
        assert api.checksum(app, options=layout).digest == api.checksum(default).digest, rev
    r = run("check", "--layout", lay, app, "--schema", EXAMPLE)
    assert r.exit_code == 0 and "at head" in r.stdout, r.output
    r = run("downgrade", "-q", "--layout", lay, app, "--schema", EXAMPLE, "--to", "0001")
    assert r.exit_code == 0, r.output
    assert api.checksum(app, options=layout).digest == start
    # Nothing of the upgrades' private tables is left in the namespace.
    assert not [k for k, _ in app_pairs(app) if k.startswith(b"__sm_tmp__")]


def test_a_killed_convert_into_a_prefix_layout_resumes_exactly(tmp_path: Path) -> None:
    src = app_store(tmp_path / "app.sqlite")
    out = tmp_path / "out.rocksdb"
    args = ["convert", "-q", "--source-layout", str(SQLITE_LAYOUT), "--dest-layout", str(LAYOUT),
            "--batch-records", "50", str(src), f"rocksdb:{out}"]  # fmt: skip
    killed = run_cli(args, env={"STATEMIGRATE_CRASH_AT": "batch"}, timeout=120)  # a hang guard
    assert killed.returncode == -signal.SIGKILL and Path(str(out) + ".partial").exists()
    r = run(*args, "--resume")
    assert r.exit_code == 0, r.output
    assert app_pairs(out) == expected_pairs()


def test_records_no_table_claims_are_refused_or_skipped(tmp_path: Path) -> None:
    src = app_store_rocksdb(tmp_path / "app.rocksdb", extra={b"no-separator": b"x"})
    out = tmp_path / "out.sqlite"
    r = run("convert", "-q", "--source-layout", LAYOUT, src, out)
    assert r.exit_code == 4 and "b'no-separator'" in r.stderr.splitlines()[0], r.output
    assert not out.exists() and not Path(str(out) + ".partial").exists()
    r = run("convert", "-q", "--source-layout", LAYOUT, "--skip-foreign-tables", src, out)
    assert r.exit_code == 0, r.output
    assert (
        api.checksum(out).digest
        == api.checksum(
            app_store_rocksdb(tmp_path / "clean.rocksdb"), options={"layout": str(LAYOUT)}
        ).digest
    )


@pytest.mark.parametrize(
    "key",
    [b"/empty-name", b"\xff\xfe/not-utf8", b"nul\x00name/k", b"n" * 256 + b"/too-long", b"!"],
    ids=["empty", "not-utf8", "nul", "256-bytes", "before-every-prefix"],
)
def test_keys_no_name_can_claim_are_foreign(key: bytes, tmp_path: Path) -> None:
    src = app_store_rocksdb(tmp_path / "app.rocksdb", extra={key: b"v"})
    r = run("checksum", "--layout", LAYOUT, src)
    assert r.exit_code == 4, r.output
    assert repr(key[:64]) in r.stderr.splitlines()[0], r.stderr
    r = run("checksum", "--layout", LAYOUT, "--option", "skip_foreign_tables=true", src)
    clean = run("checksum", "--layout", LAYOUT, app_store_rocksdb(tmp_path / "clean.rocksdb"))
    assert r.exit_code == clean.exit_code == 0 and r.stdout == clean.stdout


def test_a_layouts_tables_list_makes_other_prefixes_foreign(tmp_path: Path) -> None:
    src = app_store_rocksdb(tmp_path / "app.rocksdb", extra={b"cache/a": b"1", b"cache/b": b"2"})
    layout = tmp_path / "listed.toml"
    layout.write_text(
        LAYOUT.read_text().replace(
            'version = "suffix', 'tables = ["events", "settings"]\nversion = "suffix'
        )
    )
    r = run("checksum", "--layout", layout, src)
    assert r.exit_code == 4 and "b'cache/a'" in r.stderr, r.output
    r = run("checksum", "--layout", LAYOUT, src)  # without the list: a table 'cache'
    assert r.exit_code == 0, r.output
    with get_engine("rocksdb").open_reader(
        src, {"layout": str(layout), "skip_foreign_tables": True}
    ) as reader:
        assert [t.name for t in reader.tables()] == ["events", "settings"]
        assert reader.skipped_records == 2  # type: ignore[attr-defined]


def test_a_value_shorter_than_its_version_is_exit_4_naming_table_and_key(tmp_path: Path) -> None:
    src = app_store_rocksdb(tmp_path / "app.rocksdb", extra={b"settings/short": b"1234567"})
    r = run("checksum", "--layout", LAYOUT, src)
    assert r.exit_code == 4, r.output
    line = r.stderr.splitlines()[0]
    assert "table 'settings'" in line and "b'short'" in line and "7 bytes" in line, line


def test_other_column_families_are_foreign(tmp_path: Path) -> None:
    src = app_store_rocksdb(tmp_path / "app.rocksdb")
    db = _open(src)
    db.create_column_family("audit", rocksdict.Options(raw_mode=True))
    db.close()
    r = run("checksum", "--layout", LAYOUT, src)
    assert r.exit_code == 4 and "'audit'" in r.stderr, r.output
    r = run("checksum", "--layout", LAYOUT, "--option", "skip_foreign_tables=true", src)
    assert r.exit_code == 0, r.output


def test_a_table_name_holding_the_separator_is_refused_before_writing(tmp_path: Path) -> None:
    src = tmp_path / "src.sqlite"
    w = get_engine("sqlite").create_writer(src)
    from statemigrate.model import TableInfo, TableKind

    w.create_table(TableInfo("a/b", TableKind.PLAIN))
    w.write_batch(TableInfo("a/b", TableKind.PLAIN), [(b"k", b"v")])
    w.finish()
    w.close()
    out = tmp_path / "out.rocksdb"
    r = run("convert", "-q", "--dest-layout", LAYOUT, src, f"rocksdb:{out}")
    assert r.exit_code == 5 and "'a/b' (holds the layout's separator '/')" in r.stderr, r.output
    assert not out.exists() and not Path(str(out) + ".partial").exists()


KV = """engine = "rocksdb"
versioned = ["settings"]
[kv]
mode = "prefix"
namespace = "default"
prefix = "{name}/"
version = "suffix-u64le"
"""


@pytest.mark.parametrize(
    ("text", "says"),
    [
        (KV + "colour = 1\n", "unknown field kv.colour"),
        (KV.replace('"{name}/"', '"{name}"'), "needs a separator after {name}"),
        (KV.replace('"{name}/"', '"tbl/"'), "must hold {name} once"),
        (KV.replace('"suffix-u64le"', '"suffix-u32le"'), "kv.version must be one of"),
        (KV.replace('"suffix-u64le"', '"none"'), "versioned tables need a version encoding"),
        (KV.replace('["settings"]', '["a/b"]'), "table name 'a/b' holds the layout's separator"),
        (KV.replace('"prefix"', '"hash"'), "kv.mode must be"),
        (KV.replace('"default"', '"__statemigrate__"'), "statemigrate's metadata"),
        (KV.replace('mode = "prefix"', 'mode = "namespace-per-table"'), "prefix-mode field"),
        (KV + '[sqlite]\ntable = "kv"\n', "describes a SQL engine"),
        (KV.replace("[kv]", '[kv]\ntables = ["events"]'), "'settings' is not in kv.tables"),
        (KV.replace("[kv]", '[kv]\nmetadata = "meta"'), "kv.metadata must be"),
    ],
    ids=[
        "unknown",
        "no-sep",
        "no-name",
        "encoding",
        "none",
        "sep-in-name",
        "mode",
        "meta",
        "per-table",
        "sqlite",
        "tables",
        "metadata",
    ],
)
def test_a_bad_kv_layout_is_one_line_exit_2_before_anything_is_written(
    text: str, says: str, tmp_path: Path
) -> None:
    src = app_store_rocksdb(tmp_path / "app.rocksdb")
    layout = tmp_path / "bad.toml"
    layout.write_text(text)
    out = tmp_path / "out.rocksdb"
    for args in (
        ["convert", "-q", "--source-layout", layout, src, f"rocksdb:{out}"],
        [
            "convert",
            "-q",
            "--source-layout",
            LAYOUT,
            "--dest-layout",
            layout,
            src,
            f"rocksdb:{out}",
        ],
    ):
        r = run(*args)
        assert r.exit_code == 2, r.output
        line = r.stderr.splitlines()[0]
        assert line.startswith(f"statemigrate: error: layout {layout}: ") and says in line, line
        assert not out.exists() and not Path(str(out) + ".partial").exists()


def test_namespace_per_table_is_the_default_layout(tmp_path: Path) -> None:
    sqlite_app = app_store(tmp_path / "app.sqlite")
    default = tmp_path / "default.rocksdb"
    assert (
        run("convert", "-q", "--source-layout", SQLITE_LAYOUT, sqlite_app, default).exit_code == 0
    )
    layout = tmp_path / "per-table.toml"
    layout.write_text('engine = "rocksdb"\n[kv]\nmode = "namespace-per-table"\n')
    a = run("checksum", "--layout", layout, default)
    b = run("checksum", default)
    assert a.exit_code == b.exit_code == 0 and a.stdout == b.stdout


def test_layout_init_guesses_the_prefixes_and_says_what_it_cannot_see(tmp_path: Path) -> None:
    src = app_store_rocksdb(tmp_path / "app.rocksdb")
    r = run("layout", "init", "rocksdb", src)
    assert r.exit_code == 0, r.output
    assert 'prefix = "{name}/"' in r.stdout and 'namespace = "default"' in r.stdout
    assert "# Tables found: events, settings" in r.stdout
    assert "cannot be seen" in r.stdout and "versioned = []" in r.stdout
    assert "(they could carry one): settings" in r.stdout  # every events value is 7-9 bytes
    # With the versions filled in, the guess reads the store as the example does.
    guessed = tmp_path / "guessed.toml"
    guessed.write_text(
        r.stdout.replace("versioned = []", 'versioned = ["settings"]').replace(
            'version = "none"', 'version = "suffix-u64le"'
        )
    )
    a = run("checksum", "--layout", guessed, src)
    b = run("checksum", "--layout", LAYOUT, src)
    assert a.exit_code == b.exit_code == 0 and a.stdout == b.stdout


def test_layout_init_guesses_a_head_and_another_separator(tmp_path: Path) -> None:
    src = tmp_path / "app.rocksdb"
    db = _open(src)
    for name in ("sessions", "settings", "users"):
        for i in range(3):
            db[f"app:{name}:{i}".encode()] = b"v"
    db.close()
    r = run("layout", "init", "rocksdb", src)
    assert r.exit_code == 0, r.output
    assert 'prefix = "app:{name}:"' in r.stdout, r.stdout
    assert "# Tables found: sessions, settings, users" in r.stdout


def test_layout_init_of_keys_without_prefixes_is_one_table(tmp_path: Path) -> None:
    """The default family alone, keys without prefixes (an ldb or DB::Open app's store):
    one table in the default family, nothing of statemigrate's in the store."""
    src = tmp_path / "app.rocksdb"
    db = _open(src)
    db[b"alpha"] = b"1"
    db[b"beta"] = b"2"
    db.close()
    r = run("layout", "init", "rocksdb", src)
    assert r.exit_code == 0, r.output
    assert 'tables = { "data" = "" }' in r.stdout and 'metadata = "none"' in r.stdout


def test_layout_init_refuses_keys_without_prefixes_beside_statemigrates_family(
    tmp_path: Path,
) -> None:
    """With statemigrate's metadata family recording a table that is no column family
    the store was written in a layout: the prefix guess, and its refusal when no
    family's keys split. Without such a record it is in the default layout (table
    ``default``): no layout file is needed."""
    src = tmp_path / "app.rocksdb"
    db = _open(src)
    db[b"alpha"] = b"1"
    db[b"beta"] = b"2"
    meta = db.create_column_family("__statemigrate__", rocksdict.Options(raw_mode=True))
    del meta
    db.close()
    r = run("layout", "init", "rocksdb", src)
    assert r.exit_code == 0 and "no layout file is needed" in r.stderr, r.output
    db = _open(src)
    meta = db.get_column_family("__statemigrate__")
    meta[b"kind:events"] = b"plain"  # what a layout's writer records of each state table
    del meta
    db.close()
    r = run("layout", "init", "rocksdb", src)
    assert r.exit_code == 4 and "no column family holds keys that split" in r.stderr, r.output


# --- the conformance suite over a prefix layout ------------------------------------------

CONFORMANCE_LAYOUTS = {
    # names hold no NUL in the model: every name of the suite fits this one
    "nul": 'namespace = "state"\nprefix = "t:{name}\\u0000"\nversion = "prefix-u64le"\n',
    "slash": 'namespace = "default"\nprefix = "{name}/"\nversion = "suffix-u64le"\n',
    # the metadata inline, under the reserved name's prefix: no second column family
    "inline": 'prefix = "{name}\\u0000"\nversion = "prefix-u64be"\nmetadata = "default"\n',
}


def _layout_engine(tmp: Path, which: str) -> type:
    """RocksDB with the layout given to every reader and writer, as the CLI's flags do."""
    from statemigrate.engines.rocksdb import RocksdbEngine

    layout = tmp / f"{which}.toml"
    layout.write_text('engine = "rocksdb"\n[kv]\nmode = "prefix"\n' + CONFORMANCE_LAYOUTS[which])

    return in_layout(RocksdbEngine, layout)


def _conformance_params():
    from statemigrate.testing.conformance import CASES

    for which in CONFORMANCE_LAYOUTS:
        for name in CASES:
            marks = []
            if which == "slash" and name == "odd_table_names":
                reason = "names holding the layout's separator '/' are refused"
                marks.append(pytest.mark.xfail(strict=True, raises=DestinationError, reason=reason))
            yield pytest.param(which, name, id=f"{which}-{name}", marks=marks)


@pytest.mark.parametrize(("which", "case_name"), list(_conformance_params()))
def test_conformance_over_a_prefix_layout(which: str, case_name: str, tmp_path: Path) -> None:
    from statemigrate.testing.conformance import CASES

    CASES[case_name](_layout_engine(tmp_path, which), tmp_path)


# --- LMDB: every table in one named database ---------------------------------------------

LMDB_LAYOUT = ROOT / "schemas" / "layouts" / "prefix.lmdb.toml"


def app_store_lmdb(path: Path, extra: dict[bytes, bytes] | None = None) -> Path:
    """The app's LMDB store, written with plain py-lmdb: named database ``state``,
    ``table/`` prefixes, little-endian version suffixes."""
    import lmdb

    env = lmdb.open(str(path), subdir=True, max_dbs=4)
    db = env.open_db(b"state")
    with env.begin(write=True, db=db) as txn:
        for k, v in EVENTS:
            txn.put(b"events/" + k, v)
        for k, v, ver in SETTINGS:
            txn.put(b"settings/" + k, v + ver.to_bytes(8, "little"))
        for k, v in (extra or {}).items():
            txn.put(k, v)
    env.close()
    return path


def lmdb_pairs(path: Path) -> list[tuple[bytes, bytes]]:
    """Every pair of the named database ``state``, read with plain py-lmdb (as the app)."""
    import lmdb

    env = lmdb.open(str(path), subdir=True, max_dbs=4, readonly=True, lock=False)
    try:
        with env.begin(db=env.open_db(b"state", create=False)) as txn:
            return [(bytes(k), bytes(v)) for k, v in txn.cursor()]
    finally:
        env.close()


@pytest.mark.parametrize("via", engine_names())
def test_lmdb_app_layout_to_every_engine_and_back_is_exact(via: str, tmp_path: Path) -> None:
    eng = get_engine(via)
    eng.require_driver()
    src = app_store_lmdb(tmp_path / "app.lmdb")
    mid = tmp_path / f"mid{eng.suffixes[0] if eng.suffixes else ''}"
    back = tmp_path / "back.lmdb"
    r = run("convert", "-q", "--source-layout", LMDB_LAYOUT, f"lmdb:{src}", f"{via}:{mid}")
    assert r.exit_code == 0, r.output
    r = run("convert", "-q", "--dest-layout", LMDB_LAYOUT, f"{via}:{mid}", f"lmdb:{back}")
    assert r.exit_code == 0, r.output
    assert lmdb_pairs(back) == expected_pairs() == lmdb_pairs(src)
    r = run("verify", "-q", "--layout-a", LMDB_LAYOUT, f"lmdb:{src}", f"{via}:{mid}")
    assert r.exit_code == 0 and r.stdout.splitlines()[-1] == "equal", r.output


def test_the_three_apps_convert_into_each_other(tmp_path: Path) -> None:
    """SQLite's kv table, RocksDB's and LMDB's prefixes: the same state, both ways."""
    lmdb_app = app_store_lmdb(tmp_path / "app.lmdb")
    rocks_app = app_store_rocksdb(tmp_path / "app.rocksdb")
    to_lmdb = tmp_path / "to.lmdb"
    to_sqlite = tmp_path / "to.sqlite"
    r = run("convert", "-q", "--source-layout", LAYOUT, "--dest-layout", LMDB_LAYOUT,
            rocks_app, f"lmdb:{to_lmdb}")  # fmt: skip
    assert r.exit_code == 0, r.output
    r = run("convert", "-q", "--source-layout", LMDB_LAYOUT, "--dest-layout", SQLITE_LAYOUT,
            lmdb_app, to_sqlite)  # fmt: skip
    assert r.exit_code == 0, r.output
    assert lmdb_pairs(to_lmdb) == expected_pairs()
    assert app_rows(to_sqlite) == expected_rows()
    r = run("verify", "-q", "--layout-a", LMDB_LAYOUT, "--layout-b", LAYOUT, lmdb_app, rocks_app)
    assert r.exit_code == 0 and r.stdout.splitlines()[-1] == "equal", r.output


def test_upgrades_in_place_run_on_an_lmdb_store_in_a_prefix_layout(tmp_path: Path) -> None:
    from statemigrate.testing.upgrade_conformance import EXAMPLE, seeded

    default = seeded(get_engine("sqlite"), tmp_path, events=400)
    app = tmp_path / "app.lmdb"
    r = run("convert", "-q", "--dest-layout", LMDB_LAYOUT, default, f"lmdb:{app}")
    assert r.exit_code == 0, r.output
    layout = {"layout": str(LMDB_LAYOUT)}
    start = api.checksum(f"lmdb:{app}", options=layout).digest
    for rev in ("0002", "0003", "0004", "0005"):
        r = run("upgrade", "-q", "--layout", LMDB_LAYOUT, app, "--schema", EXAMPLE, "--to", rev)
        assert r.exit_code == 0, r.output
        api.upgrade(default, EXAMPLE, to=rev, digests=False)
        got = api.checksum(f"lmdb:{app}", options=layout).digest
        assert got == api.checksum(default).digest, rev
    r = run("downgrade", "-q", "--layout", LMDB_LAYOUT, app, "--schema", EXAMPLE, "--to", "0001")
    assert r.exit_code == 0, r.output
    assert api.checksum(f"lmdb:{app}", options=layout).digest == start
    assert not [k for k, _ in lmdb_pairs(app) if k.startswith(b"__sm_tmp__")]


def test_lmdb_foreign_records_and_databases_short_values(tmp_path: Path) -> None:
    src = app_store_lmdb(tmp_path / "app.lmdb", extra={b"loose": b"x"})
    r = run("checksum", "--layout", LMDB_LAYOUT, f"lmdb:{src}")
    assert r.exit_code == 4 and "b'loose'" in r.stderr.splitlines()[0], r.output
    r = run("checksum", "--layout", LMDB_LAYOUT, "--option", "skip_foreign_tables=true",
            f"lmdb:{src}")  # fmt: skip
    assert r.exit_code == 0, r.output
    short = app_store_lmdb(tmp_path / "short.lmdb", extra={b"settings/s": b"1234567"})
    r = run("checksum", "--layout", LMDB_LAYOUT, f"lmdb:{short}")
    line = r.stderr.splitlines()[0]
    assert r.exit_code == 4 and "table 'settings'" in line and "b's'" in line, r.output


def test_lmdb_layout_init_guesses_the_named_database_and_prefix(tmp_path: Path) -> None:
    src = app_store_lmdb(tmp_path / "app.lmdb")
    r = run("layout", "init", "lmdb", src)
    assert r.exit_code == 0, r.output
    assert 'namespace = "state"' in r.stdout and 'prefix = "{name}/"' in r.stdout, r.stdout
    assert "cannot be seen" in r.stdout and "(they could carry one): settings" in r.stdout
    guessed = tmp_path / "guessed.toml"
    guessed.write_text(
        r.stdout.replace("versioned = []", 'versioned = ["settings"]').replace(
            'version = "none"', 'version = "suffix-u64le"'
        )
    )
    a = run("checksum", "--layout", guessed, f"lmdb:{src}")
    b = run("checksum", "--layout", LMDB_LAYOUT, f"lmdb:{src}")
    assert a.exit_code == b.exit_code == 0 and a.stdout == b.stdout


@pytest.mark.parametrize("case_name", sorted(CONFORMANCE_CASES))
def test_conformance_over_an_lmdb_prefix_layout(case_name: str, tmp_path: Path) -> None:
    from statemigrate.engines.lmdb import LmdbEngine
    from statemigrate.testing.conformance import CASES

    layout = tmp_path / "nul.toml"
    layout.write_text(
        'engine = "lmdb"\n[kv]\nmode = "prefix"\nnamespace = "state"\n'
        'prefix = "{name}\\u0000"\nversion = "suffix-u64be"\n'
    )

    CASES[case_name](in_layout(LmdbEngine, layout), tmp_path)


def test_lmdb_a_key_too_long_with_its_prefix_is_exit_5_naming_it(tmp_path: Path) -> None:
    from statemigrate.model import TableInfo

    src = tmp_path / "long.sqlite"
    w = get_engine("sqlite").create_writer(src)
    w.create_table(TableInfo("events"))
    w.write_batch(TableInfo("events"), [(b"a" * 504, b"fits"), (b"b" * 505, b"does not")])
    w.finish()
    w.close()
    out = tmp_path / "out.lmdb"
    r = run("convert", "-q", "--dest-layout", LMDB_LAYOUT, src, f"lmdb:{out}")
    assert r.exit_code == 5, r.output
    assert "table 'events': with its prefix it is 512 bytes, over 511" in r.stderr, r.stderr
    assert not out.exists() and not Path(str(out) + ".partial").exists()


def test_metadata_kept_in_the_namespace_leaves_the_app_one_column_family(tmp_path: Path) -> None:
    """``kv.metadata = "default"``: an app that opens its store naming only the default
    column family (RocksDB refuses to open a store read-write without every family)
    opens what statemigrate wrote; upgrades in place keep their metadata there too."""
    from statemigrate.testing.upgrade_conformance import EXAMPLE, seeded

    lay = tmp_path / "inline.toml"
    lay.write_text(LAYOUT.read_text().replace("[kv]\n", '[kv]\nmetadata = "default"\n'))
    default = seeded(get_engine("sqlite"), tmp_path, events=200)
    app = tmp_path / "app.rocksdb"
    r = run("convert", "-q", "--dest-layout", lay, default, f"rocksdb:{app}")
    assert r.exit_code == 0, r.output
    opts = rocksdict.Options(raw_mode=True)
    assert rocksdict.Rdict.list_cf(str(app), opts) == ["default"]
    stored = [k for k, _ in app_pairs(app) if k.startswith(b"__statemigrate__/")]
    assert b"__statemigrate__/kind:settings" in stored
    layout = {"layout": str(lay)}
    for rev in ("0003", "0005"):
        r = run("upgrade", "-q", "--layout", lay, app, "--schema", EXAMPLE, "--to", rev)
        assert r.exit_code == 0, r.output
        api.upgrade(default, EXAMPLE, to=rev, digests=False)
        assert api.checksum(app, options=layout).digest == api.checksum(default).digest, rev
    r = run("current", "--json", "--layout", lay, app)
    assert json.loads(r.stdout)["current"] == ["0005"]
    assert rocksdict.Rdict.list_cf(str(app), opts) == ["default"]
    # The app's own store, metadata inline or not, converts the same.
    src = app_store_rocksdb(tmp_path / "plain-app.rocksdb")
    a = run("checksum", "--layout", lay, src)
    b = run("checksum", "--layout", LAYOUT, src)
    assert a.exit_code == b.exit_code == 0 and a.stdout == b.stdout
