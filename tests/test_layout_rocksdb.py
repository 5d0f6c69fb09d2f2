"""RocksDB stores in the app's shape (issue 28): what RocksDB 7.8 and rocksdict read back.

The oracles are the real software: Debian's ``ldb`` (RocksDB 7.8.3, run without
``--ignore_unknown_options``, as an app's tooling runs it), a C++ program built against
Debian's librocksdb-dev that opens a store with ``DB::Open`` (tests/apps/rocksdb_open.cc),
and rocksdict. The records expected are the ones the test wrote, never statemigrate's
reading of them.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from statemigrate.engines.rocksdb import RocksdbEngine
from statemigrate.engines.rocksdb.options_file import ROCKSDB_7_8_KEYS
from statemigrate.model import TableInfo, TableKind
from statemigrate.testing.conformance import ODD_TABLE_NAMES, in_layout
from statemigrate.testing.stores import read_store, tree_sha256, write_store

sys.path.insert(0, str(Path(__file__).resolve().parent))
import apps  # tests/ is not a package: its folder is on sys.path

BYTEWISE = "leveldb.BytewiseComparator"
CONFIG = "rocksdict-config.json"

# Records with the shapes apps have: NUL and 0xff keys, an empty value, 1 MB.
RECORDS = [
    (b"\x00", b"nul key"),
    (b"\x00\x00", b""),
    (b"a", b"x" * 100),
    ("ünï".encode(), "wert ✓".encode()),
    (b"big", b"\x07" * (1 << 20)),
    (b"\xff\xfe", b"\x00\x01"),
]
OTHER = [(b"k%03d" % i, b"v%d" % i) for i in range(300)]


def ldb(db: Path, *args: str, check: bool = True) -> subprocess.CompletedProcess[str]:
    exe = shutil.which("ldb")
    assert exe, "Debian's ldb is needed (apt-get install rocksdb-tools; `make test` installs it)"
    res = subprocess.run(
        [exe, f"--db={db}", *args], capture_output=True, text=True, check=False, timeout=300
    )
    if check:
        assert res.returncode == 0, f"ldb {' '.join(args)}: {res.stderr[-2000:]}"
    return res


def ldb_families(db: Path) -> set[str]:
    out = ldb(db, "list_column_families").stdout
    return {n.strip() for n in out[out.index("{") + 1 : out.rindex("}")].split(",")}


def ldb_scan(db: Path, family: str | None = None) -> list[tuple[bytes, bytes]]:
    args = ["scan", "--hex"] + ([f"--column_family={family}"] if family else [])
    pairs = []
    for line in ldb(db, *args).stdout.splitlines():
        key, value = line.split(" : ")
        pairs.append((bytes.fromhex(key[2:]), bytes.fromhex(value[2:])))
    return pairs


def ldb_dump_count(db: Path, family: str | None = None) -> int:
    args = ["dump", "--hex"] + ([f"--column_family={family}"] if family else [])
    out = ldb(db, *args).stdout
    return int(re.search(r"Keys in range: (\d+)", out).group(1))  # type: ignore[union-attr]


def db_open(db: Path) -> list[tuple[bytes, bytes]]:
    """``DB::Open(options, path)``, the default column family only, every record."""
    res = subprocess.run(
        [str(apps.rocksdb_open_exe()), str(db)], capture_output=True, check=False, timeout=300
    )
    assert res.returncode == 0, res.stderr.decode(errors="replace")
    out = []
    for line in res.stdout.splitlines():
        key, value = line.split(b" ")
        out.append((bytes.fromhex(key.decode()), bytes.fromhex(value.decode())))
    return out


def statemigrate(*args: str | Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "statemigrate", *map(str, args)],
        capture_output=True,
        text=True,
        timeout=300,  # a hang guard, not a timing assertion
        check=False,
    )


def newest_options(db: Path) -> Path:
    return max(db.glob("OPTIONS-*"), key=lambda p: int(p.name.split("-")[1]))


def options_lines(path: Path) -> dict[str, set[str]]:
    """An OPTIONS file read plainly: each section's ``key=value`` lines."""
    out: dict[str, set[str]] = {}
    section = ""
    for line in path.read_text().splitlines():
        s = line.strip()
        if s.startswith("["):
            section = s
            out.setdefault(section, set())
        elif s and not s.startswith("#"):
            out[section].add(s)
    return out


def write_layout(tmp: Path, text: str) -> Path:
    path = tmp / "layout.toml"
    path.write_text('engine = "rocksdb"\n' + text)
    return path


# --- the OPTIONS file RocksDB 7.8 reads ---------------------------------------------------


def test_the_keys_kept_are_those_rocksdb_7_8_writes(tmp_path):
    """The key list is RocksDB 7.8.3's own: an OPTIONS file ldb writes has exactly these
    sections' keys, and these keys inside each struct value."""
    db = tmp_path / "ldb.rocksdb"
    ldb(db, "--create_if_missing", "put", "a", "b")
    ldb(db, "create_column_family", "other")
    found: dict[str, dict[str, tuple[str, ...] | None]] = {}
    kind = ""
    for line in newest_options(db).read_text().splitlines():
        s = line.strip()
        if not s or s.startswith("#"):
            continue
        if s.startswith("["):
            kind = s[1:-1].split(" ")[0]
            found.setdefault(kind, {})
            continue
        key, _, value = s.partition("=")
        nested = None
        if value.startswith("{"):
            nested = tuple(sorted(f.split("=")[0] for f in value[1:-1].split(";") if f))
        found[kind][key] = nested
    assert "rocksdb_version=7.8.3" in newest_options(db).read_text()
    assert found == ROCKSDB_7_8_KEYS


def test_ldb_7_8_reads_a_store_in_the_default_layout(tmp_path):
    """scan, list_column_families and dump of every family, without ignoring unknown
    options; the store has no rocksdict-config.json."""
    db = write_store(
        RocksdbEngine,
        tmp_path / "d.rocksdb",
        {TableInfo("default"): RECORDS, TableInfo("other"): OTHER},
    )
    assert not (db / CONFIG).exists()
    assert "metadata_write_temperature" not in newest_options(db).read_text()
    assert ldb_families(db) == {"default", "other", "__statemigrate__"}
    assert ldb_scan(db) == sorted(RECORDS)
    assert ldb_scan(db, "other") == OTHER
    assert ldb_dump_count(db) == len(RECORDS)
    assert ldb_dump_count(db, "other") == len(OTHER)


def test_ldb_7_8_and_db_open_read_a_store_in_a_namespaces_layout(tmp_path):
    """A namespaces layout without metadata: exactly the layout's families, read by ldb,
    and the default family alone read by ``DB::Open`` as an app does."""
    src = write_store(
        get_sqlite(), tmp_path / "s.sqlite", {TableInfo("main"): RECORDS, TableInfo("o"): OTHER}
    )
    two = write_layout(
        tmp_path,
        'metadata = "none"\n[kv]\nmode = "namespaces"\ntables = { main = "", o = "fam o" }\n',
    )
    db = tmp_path / "n.rocksdb"
    res = statemigrate("convert", "--to", "rocksdb", "--dest-layout", two, src, db)
    assert res.returncode == 0, res.stderr
    assert sorted(p.name for p in db.iterdir() if p.name.endswith(".json")) == []
    assert ldb_families(db) == {"default", "fam o"}
    assert ldb_scan(db) == sorted(RECORDS)
    assert ldb_scan(db, "fam o") == OTHER
    assert ldb_dump_count(db, "fam o") == len(OTHER)

    one_src = write_store(get_sqlite(), tmp_path / "one.sqlite", {TableInfo("data"): RECORDS})
    one = tmp_path / "one.toml"
    one.write_text(
        'engine = "rocksdb"\nmetadata = "none"\n[kv]\nmode = "namespaces"\ntables = { data = "" }\n'
    )
    db1 = tmp_path / "one.rocksdb"
    res = statemigrate("convert", "--to", "rocksdb", "--dest-layout", one, one_src, db1)
    assert res.returncode == 0, res.stderr
    assert db_open(db1) == sorted(RECORDS)
    assert ldb_families(db1) == {"default"}
    assert sorted(p.name for p in db1.iterdir() if not apps.ROCKSDB_FILE.fullmatch(p.name)) == []


def get_sqlite():  # type: ignore[no-untyped-def]
    from statemigrate.registry import get_engine

    return get_engine("sqlite")


def test_a_native_copy_is_in_rocksdb_7_8_form_too(tmp_path):
    """RocksDB to RocksDB without options is RocksDB's checkpoint: its OPTIONS file is
    rewritten as the batch writer's is."""
    src = write_store(RocksdbEngine, tmp_path / "a.rocksdb", {TableInfo("t"): OTHER})
    (src / CONFIG).unlink(missing_ok=True)
    dst = tmp_path / "b.rocksdb"
    res = statemigrate("convert", src, dst)
    assert res.returncode == 0, res.stderr
    assert ldb_scan(dst, "t") == OTHER
    assert not (dst / CONFIG).exists()


def test_a_native_copy_keeps_the_sources_own_config(tmp_path):
    """A rocksdict app's store copied RocksDB to RocksDB keeps its config, byte for byte
    (rocksdict's checkpoint writes one of its own), and rocksdict reads it as before."""
    src = tmp_path / "app.rocksdb"
    records = apps.RocksdictApp.records()
    apps.RocksdictApp.write(src, records)
    own = (src / CONFIG).read_bytes()
    dst = tmp_path / "copy.rocksdb"
    res = statemigrate("convert", src, dst)
    assert res.returncode == 0, res.stderr
    assert (dst / CONFIG).read_bytes() == own
    assert apps.RocksdictApp.read(dst) == apps.RocksdictApp.read(src)


def test_rocksdb_compat_newest_keeps_the_bundled_rocksdbs_file(tmp_path):
    """``rocksdb_compat=newest``: the OPTIONS file as the bundled RocksDB wrote it (which
    ldb 7.8 refuses); the 7.8 form keeps each line of it that it keeps, value and all."""
    src = write_store(get_sqlite(), tmp_path / "s.sqlite", {TableInfo("t"): OTHER})
    newest, old = tmp_path / "newest.rocksdb", tmp_path / "old.rocksdb"
    opt = "--dest-option"
    res = statemigrate("convert", opt, "rocksdb_compat=newest", src, newest)
    assert res.returncode == 0, res.stderr
    res = statemigrate("convert", src, old)
    assert res.returncode == 0, res.stderr
    text = newest_options(newest).read_text()
    assert "metadata_write_temperature=" in text
    assert "rocksdb_version=7." not in text
    refused = ldb(newest, "--column_family=t", "scan", check=False)
    assert refused.returncode != 0 and "Could not find option" in refused.stderr
    full, kept = options_lines(newest_options(newest)), options_lines(newest_options(old))
    assert set(kept) == set(full)
    for section, lines in kept.items():
        struct = {line for line in lines if "={" in line}
        assert lines - struct <= full[section], section
        if section != "[Version]":
            assert len(lines) < len(full[section]), section  # the newer keys are left out
    assert ldb_scan(old, "t") == OTHER


def test_a_table_format_rocksdb_7_8_cannot_read_is_refused_before_writing(tmp_path):
    src = write_store(get_sqlite(), tmp_path / "s.sqlite", {TableInfo("t"): OTHER})
    dst = tmp_path / "v6.rocksdb"
    res = statemigrate("convert", "--rocksdb-format-version", "6", src, dst)
    assert res.returncode == 2, res.stderr
    assert "rocksdb_format_version=6 is not readable by RocksDB 7.8" in res.stderr
    assert not dst.exists() and not Path(str(dst) + ".partial").exists()


# --- rocksdict-config.json -----------------------------------------------------------------


def test_rocksdict_opens_a_store_written_without_its_config(tmp_path):
    """rocksdict reads a store statemigrate wrote (no rocksdict-config.json) in raw mode,
    with and without options (it opens a store it did not make in raw mode)."""
    from rocksdict import Options, Rdict

    db = write_store(
        RocksdbEngine,
        tmp_path / "r.rocksdb",
        {TableInfo("default"): RECORDS, TableInfo("t"): OTHER},
    )
    assert not (db / CONFIG).exists()
    for opened in (lambda: Rdict(str(db)), lambda: Rdict(str(db), Options(raw_mode=True))):
        rd = opened()
        try:
            assert list(rd.items()) == sorted(RECORDS)
            cf = rd.get_column_family("t")
            assert list(cf.items()) == OTHER
            del cf
        finally:
            rd.close()


@pytest.mark.parametrize("layout", [None, "namespaces"])
def test_a_writer_leaves_no_config_while_it_writes(layout, tmp_path):
    """The file goes as soon as the driver has written it (opening the store, creating a
    column family): a kill at any later point leaves none in DST.partial, and a reopen
    for a resume makes none either."""
    opts = None
    if layout is not None:
        text = f'metadata = "none"\n[kv]\nmode = "{layout}"\ntables = {{ t = "fam t" }}\n'
        opts = {"layout": str(write_layout(tmp_path, text))}
    db = tmp_path / "w.rocksdb"
    writer = RocksdbEngine.create_writer(db, opts)
    try:
        writer.create_table(TableInfo("t"))
        writer.write_batch(TableInfo("t"), OTHER)
        assert not (db / CONFIG).exists()
    finally:
        writer.close()
    writer = RocksdbEngine.open_writer(db, opts)
    try:
        assert not (db / CONFIG).exists()
    finally:
        writer.close()
    assert not (db / CONFIG).exists()


def test_a_config_left_in_a_partial_is_never_taken_for_the_apps(tmp_path):
    """A kill inside the driver's open can leave its config in DST.partial: the resume's
    writer removes it (a store being built has no file of the app's)."""
    db = write_store(RocksdbEngine, tmp_path / "b.rocksdb.partial", {TableInfo("t"): OTHER})
    (db / CONFIG).write_bytes(b'{"raw_mode":true,"prefix_extractors":{}}')
    RocksdbEngine.open_writer(db).close()
    assert not (db / CONFIG).exists()


def test_an_apps_own_config_is_put_back_as_it_was(tmp_path):
    """A store opened for writing in place keeps the rocksdict-config.json it had, byte
    for byte (rocksdict rewrites it on every open)."""
    db = write_store(RocksdbEngine, tmp_path / "r.rocksdb", {TableInfo("t"): OTHER})
    own = b'{"raw_mode": true, "prefix_extractors": {}, "app": "its own spacing"}'
    (db / CONFIG).write_bytes(own)
    writer = RocksdbEngine.open_writer(db)
    writer.write_batch(TableInfo("t"), [(b"zz", b"new")])
    writer.finish()
    writer.close()
    assert (db / CONFIG).read_bytes() == own
    assert ldb_scan(db, "t") == [*OTHER, (b"zz", b"new")]


def test_a_source_gets_no_config(tmp_path):
    db = tmp_path / "ldb.rocksdb"
    ldb(db, "--create_if_missing", "put", "--key_hex", "--value_hex", "0x00", "0x01")
    before = tree_sha256(db)
    layout = write_layout(
        tmp_path, 'metadata = "none"\n[kv]\nmode = "namespaces"\ntables = { data = "" }\n'
    )
    res = statemigrate("convert", "--source-layout", layout, db, tmp_path / "o.sqlite")
    assert res.returncode == 0, res.stderr
    assert not (db / CONFIG).exists()
    assert tree_sha256(db) == before


# --- comparators ---------------------------------------------------------------------------


def rocksdict_default_mode_store(path: Path) -> Path:
    apps.RocksdictApp.default_mode_store(path)
    return path


@pytest.mark.parametrize("verb", ["convert", "layout init", "inspect"])
def test_a_comparator_not_bytewise_is_refused_by_name(verb, tmp_path):
    """rocksdict's default mode orders keys with its own comparator, "rocksdict": exit 4
    naming it, before anything is written; the store is left as it was."""
    db = rocksdict_default_mode_store(tmp_path / "objects.rocksdb")
    before = tree_sha256(db)
    out = tmp_path / "o.sqlite"
    args = {
        "convert": ("convert", "--to", "sqlite", db, out),
        "layout init": ("layout", "init", "rocksdb", db),
        "inspect": ("inspect", db),
    }[verb]
    res = statemigrate(*args)
    assert res.returncode == 4, (res.returncode, res.stderr)
    assert "RocksDB comparator 'rocksdict'" in res.stderr, res.stderr
    assert "is not bytewise: not supported" in res.stderr
    assert "damaged" not in res.stderr
    assert not out.exists() and not Path(str(out) + ".partial").exists()
    assert tree_sha256(db) == before


def test_a_comparator_not_bytewise_is_refused_without_options_file(tmp_path):
    """With no OPTIONS file to name it, RocksDB's own refusal is worded the same way."""
    db = rocksdict_default_mode_store(tmp_path / "objects.rocksdb")
    for p in db.glob("OPTIONS-*"):
        p.unlink()
    res = statemigrate("convert", "--to", "sqlite", db, tmp_path / "o.sqlite")
    assert res.returncode == 4, res.stderr
    assert "comparator is not bytewise: not supported" in res.stderr, res.stderr
    assert "rocksdict" in res.stderr


def test_inspect_shows_the_column_families_and_the_comparator(tmp_path):
    db = tmp_path / "ldb.rocksdb"
    ldb(db, "--create_if_missing", "put", "a", "b")
    ldb(db, "create_column_family", "other")
    res = statemigrate("inspect", "--json", db)
    assert res.returncode == 0, res.stderr
    fmt = json.loads(res.stdout)["format"]
    assert sorted(fmt["column_families"]) == ["default", "other"]
    assert fmt["comparator"] == BYTEWISE
    text = statemigrate("inspect", db).stdout
    assert BYTEWISE in text and "other" in text


# --- layout init ---------------------------------------------------------------------------


def layout_init(db: Path) -> dict:
    import tomllib

    res = statemigrate("layout", "init", "rocksdb", db)
    assert res.returncode == 0, res.stderr
    return tomllib.loads(res.stdout)


def test_layout_init_of_the_default_family_alone(tmp_path):
    db = tmp_path / "ldb.rocksdb"
    ldb(db, "--create_if_missing", "put", "--key_hex", "--value_hex", "0x00ff", "0x01")
    got = layout_init(db)
    assert got["metadata"] == "none"
    assert got["kv"]["mode"] == "namespaces" and got["kv"]["tables"] == {"data": ""}
    assert "rocksdict_config" not in got["kv"]


def test_layout_init_of_several_families_lists_them(tmp_path):
    """rocksdict's store: every family a table, rocksdict's config kept."""
    db = tmp_path / "app.rocksdb"
    apps.RocksdictApp.write(db, apps.RocksdictApp.records())
    got = layout_init(db)
    assert got["metadata"] == "none"
    assert got["kv"]["tables"] == {
        "default": "",
        **{n: n for n in apps.RocksdictApp.families},
    }
    assert got["kv"]["rocksdict_config"] is True


def test_layout_init_leaves_an_empty_default_family_out(tmp_path):
    db = tmp_path / "two.rocksdb"
    ldb(db, "--create_if_missing", "put", "gone", "x")
    ldb(db, "delete", "gone")  # the default family: nothing left in it
    ldb(db, "create_column_family", "a")
    ldb(db, "create_column_family", "b")
    ldb(db, "--column_family=a", "put", "k", "v")
    ldb(db, "--column_family=b", "put", "k", "w")
    got = layout_init(db)
    assert got["kv"]["tables"] == {"a": "a", "b": "b"}


def test_layout_init_keeps_the_prefix_guess_for_one_family_of_prefixed_keys(tmp_path):
    db = tmp_path / "p.rocksdb"
    lines = "".join(f"users/{i} ==> u{i}\norders/{i} ==> o{i}\n" for i in range(20))
    subprocess.run(
        ["ldb", f"--db={db}", "--create_if_missing", "load"],
        input=lines.encode(),
        check=True,
        capture_output=True,
    )
    got = layout_init(db)
    assert got["kv"]["mode"] == "prefix" and got["kv"]["prefix"] == "{name}/"
    assert got["metadata"] == "none"
    layout = tmp_path / "l.toml"
    layout.write_text(statemigrate("layout", "init", "rocksdb", db).stdout)
    mid, back = tmp_path / "m.sqlite", tmp_path / "back.rocksdb"
    res = statemigrate("convert", "--to", "sqlite", "--source-layout", layout, db, mid)
    assert res.returncode == 0, res.stderr
    res = statemigrate("convert", "--to", "rocksdb", "--dest-layout", layout, mid, back)
    assert res.returncode == 0, res.stderr
    assert ldb_families(back) == {"default"}
    assert ldb_scan(back) == ldb_scan(db)


def test_the_printed_layout_works_as_is_for_several_families(tmp_path):
    """layout init's layout of an ldb store with two families: there and back through
    SQLite, ldb reads the same families and records."""
    db = tmp_path / "two.rocksdb"
    ldb(db, "--create_if_missing", "put", "--key_hex", "--value_hex", "0x0a", "0x0b")
    ldb(db, "create_column_family", "fam")
    for k, v in RECORDS[:4]:
        ldb(db, "put", "--key_hex", "--value_hex", f"0x{k.hex()}", f"0x{v.hex()}")
        ldb(db, "--column_family=fam", "put", "--key_hex", "--value_hex", f"0x{k.hex()}", "0x00")
    res = statemigrate("layout", "init", "rocksdb", db)
    assert res.returncode == 0, res.stderr
    layout = tmp_path / "l.toml"
    layout.write_text(res.stdout)
    mid, back = tmp_path / "m.sqlite", tmp_path / "back.rocksdb"
    res = statemigrate("convert", "--to", "sqlite", "--source-layout", layout, db, mid)
    assert res.returncode == 0, res.stderr
    res = statemigrate("convert", "--to", "rocksdb", "--dest-layout", layout, mid, back)
    assert res.returncode == 0, res.stderr
    assert ldb_families(back) == {"default", "fam"}
    assert ldb_scan(back) == sorted([(b"\x0a", b"\x0b"), *RECORDS[:4]])
    assert ldb_scan(back, "fam") == sorted((k, b"\x00") for k, _ in RECORDS[:4])


# --- the conformance suite over a namespaces layout ----------------------------------------

CONFORMANCE_TABLES = ["empty", "one", "t", "a", "b", "s", "p"]


def _namespaces_engine(tmp: Path, metadata: str) -> type:
    """RocksDB with a namespaces layout given to every reader and writer (the CLI's
    flags): the suite's tables, each its own column family named ``cf NAME``."""
    names = [*CONFORMANCE_TABLES, *ODD_TABLE_NAMES]
    # No table in the default family: a table there always exists (RocksDB always has
    # the family), which the suite's empty store would list.
    tables = ", ".join(f"{json.dumps(n)} = {json.dumps('cf ' + n)}" for n in names)
    layout = tmp / f"namespaces-{metadata}.toml"
    layout.write_text(
        f'engine = "rocksdb"\nversioned = ["s"]\nmetadata = "{metadata}"\n'
        f'[kv]\nmode = "namespaces"\nversion = "prefix-u64be"\ntables = {{ {tables} }}\n'
    )

    return in_layout(RocksdbEngine, layout)


def _namespaces_params():
    from statemigrate.errors import DestinationError
    from statemigrate.testing.conformance import CASES

    for metadata in ("none", "store"):
        for name in CASES:
            marks = []
            if metadata == "none" and name in ("persistence_and_metadata", "resume_after_reopen"):
                # The side file lives only beside a DST.partial (a resume's is tested below).
                reason = "a store without metadata records none outside a DST.partial"
                marks.append(pytest.mark.xfail(strict=True, raises=DestinationError, reason=reason))
            yield pytest.param(metadata, name, id=f"{metadata}-{name}", marks=marks)


@pytest.mark.parametrize(("metadata", "case_name"), list(_namespaces_params()))
def test_conformance_over_a_namespaces_layout(metadata: str, case_name: str, tmp_path: Path):
    from statemigrate.testing.conformance import CASES

    CASES[case_name](_namespaces_engine(tmp_path, metadata), tmp_path)


def test_a_versioned_table_in_a_namespaces_layout_reads_in_ldb(tmp_path):
    """The version is the 8-byte big-endian prefix of the value, as ldb shows it."""
    layout = write_layout(
        tmp_path,
        'versioned = ["s"]\nmetadata = "none"\n[kv]\nmode = "namespaces"\n'
        'version = "prefix-u64be"\ntables = { s = "" }\n',
    )
    db = write_store(
        RocksdbEngine,
        tmp_path / "v.rocksdb",
        {TableInfo("s", TableKind.VERSIONED): [(b"k", b"val", 258)]},
        options={"layout": str(layout)},
    )
    assert ldb_scan(db) == [(b"k", (258).to_bytes(8, "big") + b"val")]
    assert ldb_families(db) == {"default"}
    got = read_store(RocksdbEngine, db, options={"layout": str(layout)})
    assert got["tables"] == {"s": ("versioned", [(b"k", b"val", 258)])}


def test_a_checkpoint_without_metadata_in_the_store_survives_a_reopen(tmp_path):
    """``metadata = "none"``: a DST.partial's checkpoint lives in the side file beside it
    and a reopen (a resume) reads it back; the store has the layout's family only."""
    layout = write_layout(
        tmp_path, 'metadata = "none"\n[kv]\nmode = "namespaces"\ntables = { t = "" }\n'
    )
    opts = {"layout": str(layout)}
    db = tmp_path / "app.rocksdb.partial"
    table = TableInfo("t")
    w = RocksdbEngine.create_writer(db, opts)
    w.create_table(table)
    w.write_batch(table, [(b"a", b"1"), (b"b", b"2")], {"checkpoint": b"x"})
    w.close()
    w = RocksdbEngine.open_writer(db, opts)
    assert w.metadata().get("checkpoint") == b"x"
    w.write_batch(table, [(b"c", b"3")], {"checkpoint": None})
    w.finish()
    w.close()
    assert ldb_families(db) == {"default"}
    assert ldb_scan(db) == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]


def test_an_options_file_naming_a_family_with_any_character_is_rewritten(tmp_path):
    """Column families are named as tables are (any UTF-8 but NUL): a name holding a
    character Python's str.splitlines splits at (\\x1e, \\x85, \\u2028) stays one header.
    Found by the round-trip property test: a table named '\\x1e' into RocksDB was exit 5."""
    from statemigrate.engines.rocksdb.options_file import compat_text, parse_options

    names = ["\x1e", "a\x85b", "line\u2028sep", "plain"]
    src = tmp_path / "src.sqlite"
    content = {TableInfo(n, TableKind.PLAIN): [(b"k", n.encode())] for n in names}
    from statemigrate.registry import get_engine

    write_store(get_engine("sqlite"), src, content)
    out = tmp_path / "out.rocksdb"
    r = statemigrate("convert", "-q", src, f"rocksdb:{out}")
    assert r.returncode == 0, r.stderr
    options = max(out.glob("OPTIONS-*")).read_text(encoding="utf-8")
    families = [s.name for s in parse_options(options) if s.kind == "CFOptions"]
    assert set(names) <= set(families)
    assert [s.name for s in parse_options(compat_text(options, "7.8"))] == [
        s.name for s in parse_options(options)
    ]
    assert read_store(get_engine("rocksdb"), out) == read_store(get_engine("sqlite"), src)
