"""Regression tests of corrupt and malformed input (hostile cases B1, B6, B12, B13, Q8).

Damage an engine can detect is exit 4 on every verb, with one line naming the store;
a malformed manifest or option value is exit 2; nothing is exit 70, and a refusal that
can be known before writing leaves nothing at the destination. Every store here is a
real file of the real engine; commands run in a subprocess with a generous time bound
(a hang guard, not a timing assertion).
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import apsw
import pytest

from statemigrate import api
from statemigrate.engines.jsonl import CHUNK, JsonlEngine, _last_line
from statemigrate.engines.redb import RedbEngine
from statemigrate.engines.rocksdb import RocksdbEngine
from statemigrate.errors import SourceError, StateMigrateError, UsageError
from statemigrate.model import TableInfo, TableKind
from statemigrate.testing.cli import describe, one_line_error, run_cli
from statemigrate.testing.corruption import flip_bytes
from statemigrate.testing.stores import build_store, leftovers, spec, store_file

BOUND = 60  # seconds: a hang guard only
REPO = Path(__file__).resolve().parents[1]
SQLITE_FAMILY = ["sqlite", "libsql", "turso"]


def refused(run, code: int, *names: str) -> str:
    """Assert exit ``code`` with one error line that names each of ``names``."""
    assert run.returncode == code, describe(run)
    line = one_line_error(run)
    for name in names:
        assert name in line, line
    return line


def nothing_at(final: Path) -> None:
    """Nothing was created for a destination refused before writing."""
    assert not final.exists()
    assert leftovers(final) == []


# --- B1: RocksDB table files with a flipped byte -------------------------------------------


def b1_store(path: Path, plain_records: int = 5_000) -> None:
    """The store of hostile case B1: ``plain`` (200-byte values) and ``ver`` (100-byte)."""
    writer = RocksdbEngine.create_writer(path)
    try:
        plain, ver = TableInfo("plain"), TableInfo("ver", TableKind.VERSIONED)
        writer.create_table(plain)
        rows = [(i.to_bytes(4, "big"), os.urandom(200)) for i in range(plain_records)]
        writer.write_batch(plain, rows)
        writer.create_table(ver)
        writer.write_batch(ver, [(b"k%06d" % i, os.urandom(100), i) for i in range(2_500)])
        writer.finish()
    finally:
        writer.close()


def biggest_sst(path: Path) -> Path:
    return max(path.glob("*.sst"), key=lambda p: p.stat().st_size)


@pytest.fixture(scope="module")
def b1_pristine(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("b1") / "src.rocksdb"
    b1_store(path)
    return path


@pytest.mark.parametrize("where", ["0", "100", "5000", "half"])
def test_rocksdb_flipped_sst_byte_is_exit_4_on_every_verb(
    where: str, b1_pristine: Path, tmp_path: Path
) -> None:
    src = tmp_path / "src.rocksdb"
    shutil.copytree(b1_pristine, src)
    sst = biggest_sst(src)
    flip_bytes(sst, [sst.stat().st_size // 2 if where == "half" else int(where)])
    final = tmp_path / "out.sqlite"
    run = run_cli(
        ["convert", "--quiet", spec("rocksdb", src), spec("sqlite", final)], timeout=BOUND
    )
    line = refused(run, 4, str(src), "plain")
    assert "statemigrate-rocksdb-ro-" not in line  # the file is named, not a private link
    nothing_at(final)  # found mid-copy: the .partial this run made is removed
    for args in (
        ["checksum", spec("rocksdb", src)],
        ["verify", "--quiet", spec("rocksdb", src), spec("rocksdb", b1_pristine)],
        ["inspect", spec("rocksdb", src)],
    ):
        refused(run_cli(args, timeout=BOUND), 4, str(src))
    with pytest.raises(SourceError, match="damaged"):
        api.checksum(spec("rocksdb", src))


def test_rocksdb_scan_from_a_key_confirms_its_end(b1_pristine: Path, tmp_path: Path) -> None:
    src = tmp_path / "src.rocksdb"
    shutil.copytree(b1_pristine, src)
    sst = biggest_sst(src)
    flip_bytes(sst, [sst.stat().st_size // 2])
    table = TableInfo("plain")
    with RocksdbEngine.open_reader(src) as reader:
        first = next(iter(reader.read_batches(table, max_records=10)))
        with pytest.raises(SourceError, match="damaged"):
            for _batch in reader.read_batches(table, after=first[-1][0]):
                pass
    # The same reads of the undamaged store end normally, at every start key.
    with RocksdbEngine.open_reader(b1_pristine) as reader:
        keys = [r[0] for b in reader.read_batches(table) for r in b]
        assert len(keys) == 5_000
        for after in (keys[0], keys[-2], keys[-1], b"\xff" * 8):
            got = [r[0] for b in reader.read_batches(table, after=after) for r in b]
            assert got == [k for k in keys if k > after]


def test_rocksdb_in_place_reads_refuse_damage(b1_pristine: Path, tmp_path: Path) -> None:
    src = tmp_path / "src.rocksdb"
    shutil.copytree(b1_pristine, src)
    sst = biggest_sst(src)
    flip_bytes(sst, [100])
    writer = RocksdbEngine.open_writer(src)
    try:
        with pytest.raises(SourceError, match="damaged"):
            for _batch in writer.read_batches(TableInfo("plain")):
                pass
        # The undamaged table reads whole through the same path.
        ver = [r for b in writer.read_batches(TableInfo("ver", TableKind.VERSIONED)) for r in b]
        assert [r[0] for r in ver] == [b"k%06d" % i for i in range(2_500)]
    finally:
        # RocksDB's background work on the damaged file may fail the close as well.
        with contextlib.suppress(StateMigrateError):
            writer.close()


def test_rocksdb_upgrade_of_a_damaged_store_is_exit_4(tmp_path: Path) -> None:
    store = tmp_path / "state.rocksdb"
    seed = subprocess.run(
        [sys.executable, str(REPO / "schemas/example/seed.py"), spec("rocksdb", store)]
        + ["--events", "4000"],
        capture_output=True,
        text=True,
        timeout=BOUND,
        check=False,
    )
    assert seed.returncode == 0, seed.stderr
    sst = biggest_sst(store)
    flip_bytes(sst, [sst.stat().st_size // 2])
    args = ["upgrade", spec("rocksdb", store), "--schema", REPO / "schemas/example", "--json"]
    run = run_cli(args, timeout=BOUND)
    assert run.returncode == 4, describe(run)
    report = json.loads(run.stdout)
    assert report["exit_code"] == 4
    assert "damaged" in report["error"]
    current = run_cli(["current", spec("rocksdb", store)], timeout=BOUND)
    assert "0001" in current.stdout, describe(current)


def test_rocksdb_damaged_metadata_is_exit_4(tmp_path: Path) -> None:
    src = tmp_path / "src.rocksdb"
    writer = RocksdbEngine.create_writer(src)
    try:
        writer.put_metadata({"big": os.urandom(300_000)})  # its own, biggest table file
        writer.create_table(TableInfo("t"))
        writer.write_batch(TableInfo("t"), [(b"k", b"v")])
        writer.finish()
    finally:
        writer.close()
    sst = biggest_sst(src)
    flip_bytes(sst, [sst.stat().st_size // 2])
    refused(run_cli(["checksum", spec("rocksdb", src)], timeout=BOUND), 4, str(src), "metadata")
    writer = RocksdbEngine.open_writer(src)
    try:
        with pytest.raises(SourceError, match="metadata"):
            writer.metadata()
    finally:
        with contextlib.suppress(StateMigrateError):
            writer.close()


def test_rocksdb_damaged_default_family_is_not_an_empty_table(tmp_path: Path) -> None:
    src = tmp_path / "src.rocksdb"
    writer = RocksdbEngine.create_writer(src)
    try:
        writer.create_table(TableInfo("default"))
        writer.write_batch(
            TableInfo("default"), [(b"%06d" % i, os.urandom(200)) for i in range(3000)]
        )
        writer.finish()
    finally:
        writer.close()
    assert api.checksum(spec("rocksdb", src)).tables[0]["count"] == 3000
    flip_bytes(biggest_sst(src), [0])
    refused(run_cli(["checksum", spec("rocksdb", src)], timeout=BOUND), 4, str(src), "default")


def test_rocksdb_format_version_option_is_checked(tmp_path: Path) -> None:
    src = store_file("sqlite", tmp_path, "src")
    build_store("sqlite", src, 20)
    for bad in ("abc", "7", "-1", "1.5"):
        final = tmp_path / f"x-{bad}.rocksdb"
        args = ["convert", "--quiet", spec("sqlite", src), spec("rocksdb", final)]
        run = run_cli([*args, "--dest-option", f"rocksdb_format_version={bad}"], timeout=BOUND)
        refused(run, 2, "rocksdb_format_version", "2 to 6")
        nothing_at(final)
    for bad_value in ("abc", 7, True, 0):
        with pytest.raises(UsageError, match="rocksdb_format_version"):
            RocksdbEngine.create_writer(
                tmp_path / "y.rocksdb", {"rocksdb_format_version": bad_value}
            )
    assert not (tmp_path / "y.rocksdb").exists()
    final = tmp_path / "six.rocksdb"
    args = ["convert", "--quiet", spec("sqlite", src), spec("rocksdb", final)]
    # Format 6 is newer than RocksDB 7.8 reads (the default rocksdb_compat): refused …
    run = run_cli([*args, "--dest-option", "rocksdb_format_version=6"], timeout=BOUND)
    refused(run, 2, "rocksdb_format_version=6", "RocksDB 7.8")
    nothing_at(final)
    # … and written when no RocksDB 7.8 has to read the store.
    newest = ["--dest-option", "rocksdb_compat=newest"]
    run = run_cli([*args, "--dest-option", "rocksdb_format_version=6", *newest], timeout=BOUND)
    assert run.returncode == 0, describe(run)


def test_redb_format_option_is_checked(tmp_path: Path) -> None:
    src = store_file("sqlite", tmp_path, "src")
    build_store("sqlite", src, 20)
    for bad in ("abc", "1", "4", "-2"):
        final = tmp_path / f"x-{bad}.redb"
        args = ["convert", "--quiet", spec("sqlite", src), spec("redb", final)]
        run = run_cli([*args, "--dest-option", f"redb_format={bad}"], timeout=BOUND)
        refused(run, 2, "redb_format", "2 and 3")
        nothing_at(final)
    for bad_value in ("abc", True, 4.0):
        with pytest.raises(UsageError, match="redb_format"):
            RedbEngine.create_writer(tmp_path / "y.redb", {"redb_format": bad_value})
    assert not (tmp_path / "y.redb").exists()


# --- B13: SQLite-family files cut short --------------------------------------------------


def sqlite_source(path: Path, n: int = 5_000) -> None:
    """The source of the hostile cases: ``plain`` (200-byte values) and ``ver``."""
    conn = apsw.Connection(str(path))
    with conn:
        conn.execute(
            'CREATE TABLE "plain" (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL) WITHOUT ROWID'
        )
        conn.execute(
            'CREATE TABLE "ver" (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL,'
            " version INTEGER NOT NULL) WITHOUT ROWID"
        )
        conn.executemany(
            'INSERT INTO "plain" VALUES (?,?)',
            [(i.to_bytes(4, "big"), os.urandom(200)) for i in range(n)],
        )
        conn.executemany(
            'INSERT INTO "ver" VALUES (?,?,?)',
            [(b"k%06d" % i, os.urandom(100), i) for i in range(n // 2)],
        )
    conn.close()


@pytest.fixture(scope="module")
def b13_pristine(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("b13") / "src.sqlite"
    sqlite_source(path)
    return path


@pytest.mark.parametrize("engine", SQLITE_FAMILY)
@pytest.mark.parametrize("cut", [1, 100, 4095])
def test_sqlite_file_short_of_a_whole_page_is_exit_4(
    engine: str, cut: int, b13_pristine: Path, tmp_path: Path
) -> None:
    src = tmp_path / "cut.sqlite"
    shutil.copy(b13_pristine, src)
    os.truncate(src, src.stat().st_size - cut)
    final = tmp_path / "out.rocksdb"
    run = run_cli(["convert", "--quiet", spec(engine, src), spec("rocksdb", final)], timeout=BOUND)
    refused(run, 4, str(src), "truncated")
    nothing_at(final)
    refused(run_cli(["checksum", spec(engine, src)], timeout=BOUND), 4, str(src))


def wal_store(path: Path) -> apsw.Connection:
    """A WAL-mode store whose last transaction (which grew it) is only in the ``-wal``.

    The connection is returned open, so that the ``-wal`` is kept; copy the files then.
    """
    conn = apsw.Connection(str(path))
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA wal_autocheckpoint=0")
    conn.execute(
        'CREATE TABLE "plain" (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL) WITHOUT ROWID'
    )
    rows = [(i.to_bytes(4, "big"), os.urandom(200)) for i in range(6_000)]
    with conn:
        conn.executemany('INSERT INTO "plain" VALUES (?,?)', rows[:3_000])
    conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    with conn:
        conn.executemany('INSERT INTO "plain" VALUES (?,?)', rows[3_000:])
    return conn


def raise_page_count(path: Path, extra: int) -> None:
    """Make the main file's header count ``extra`` more pages than the file holds."""
    data = bytearray(path.read_bytes())
    count = int.from_bytes(data[28:32], "big")
    assert count * 4096 == len(data)
    data[28:32] = (count + extra).to_bytes(4, "big")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize("engine", SQLITE_FAMILY)
def test_sqlite_header_counting_pages_the_file_lacks(engine: str, tmp_path: Path) -> None:
    live = tmp_path / "live.sqlite"
    conn = wal_store(live)
    try:
        expected = api.checksum(spec("sqlite", live)).digest
        for name in ("with-wal.sqlite", "no-wal.sqlite"):
            shutil.copy(live, tmp_path / name)
        shutil.copy(str(live) + "-wal", tmp_path / "with-wal.sqlite-wal")
    finally:
        conn.close()
    for name in ("with-wal.sqlite", "no-wal.sqlite"):
        raise_page_count(tmp_path / name, 50)
    # Frames in the -wal can supply the pages: SQLite reads them from there.
    assert api.checksum(spec(engine, tmp_path / "with-wal.sqlite")).digest == expected
    # Without them the file is short of what its header counts.
    run = run_cli(["checksum", spec(engine, tmp_path / "no-wal.sqlite")], timeout=BOUND)
    refused(run, 4, "no-wal.sqlite", "truncated")


# --- B6: jsonl footers of any size -----------------------------------------------------------


class CountingFile(io.BytesIO):
    """A file in memory that records the size of every read."""

    def __init__(self, data: bytes) -> None:
        super().__init__(data)
        self.reads: list[int] = []

    def read(self, size: int | None = -1, /) -> bytes:
        out = super().read(size)
        self.reads.append(len(out))
        return out


@pytest.mark.parametrize(
    "footer_size", [0, 1, CHUNK - 1, CHUNK, CHUNK + 1, 3 * CHUNK + 17, (1 << 20) + 5]
)
@pytest.mark.parametrize("ending", [b"", b"\n", b"\n\n\n"])
def test_last_line_of_any_size_in_bounded_steps(footer_size: int, ending: bytes) -> None:
    footer = b"f" * footer_size
    for before in (b"", b"head\nrecords\n", b"x" * (2 * CHUNK) + b"\n"):
        f = CountingFile(before + footer + ending)
        line, start = _last_line(f)
        if footer_size or not before:
            assert (line, start) == (footer, len(before))
        else:  # an empty last line: the line before it is the last one
            assert line == before.rstrip(b"\n").rsplit(b"\n", 1)[-1]
        *steps, whole = f.reads
        assert all(n <= CHUNK for n in steps), f.reads
        assert whole == len(line)


def dump_with_big_footer(path: Path, tables: int, meta_bytes: int) -> str:
    """A dump of ``tables`` one-record tables whose footer also carries ``meta_bytes``
    of metadata (base64 in the footer); returns its store digest."""
    writer = JsonlEngine.create_writer(path)
    try:
        writer.put_metadata({"schema": b"big-footer", "blob": os.urandom(meta_bytes)})
        for i in range(tables):
            table = TableInfo(f"t{i:05d}")
            writer.create_table(table)
            writer.write_batch(table, [(b"k", b"v%d" % i)])
        writer.finish()
    finally:
        writer.close()
    with JsonlEngine.open_reader(path) as reader:
        assert len(reader.tables()) == tables
    return api.checksum(spec("jsonl", path)).digest


@pytest.mark.parametrize(
    ("tables", "meta_bytes"),
    [(700, 0), (3, 2 << 20)],  # B6's 600+ tables; a footer of several MiB
)
def test_jsonl_footer_over_64_kib_reads_back(tables: int, meta_bytes: int, tmp_path: Path) -> None:
    dump = tmp_path / "many.jsonl"
    digest = dump_with_big_footer(dump, tables, meta_bytes)
    footer = dump.read_bytes().rstrip(b"\n").rsplit(b"\n", 1)[-1]
    assert len(footer) > 64 * 1024
    assert json.loads(footer)["footer"] == 1
    run = run_cli(["checksum", spec("jsonl", dump)], timeout=BOUND)
    assert run.returncode == 0, describe(run)
    assert run.stdout.splitlines()[-1] == f"store digest {digest}"
    with JsonlEngine.open_reader(dump) as reader:
        assert len(reader.metadata().get("blob", b"")) == meta_bytes


def test_jsonl_dump_of_600_tables_converts_verified(tmp_path: Path) -> None:
    src = tmp_path / "many.sqlite"
    conn = apsw.Connection(str(src))
    with conn:
        for i in range(600):
            conn.execute(
                f'CREATE TABLE "t{i:05d}" (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL)'
                " WITHOUT ROWID"
            )
            conn.execute(f'INSERT INTO "t{i:05d}" VALUES (?,?)', (b"k", b"v"))
    conn.close()
    final = tmp_path / "many.jsonl"
    run = run_cli(["convert", "--quiet", spec("sqlite", src), spec("jsonl", final)], timeout=BOUND)
    assert run.returncode == 0, describe(run)
    assert leftovers(final) == []
    assert api.verify(spec("sqlite", src), spec("jsonl", final)).equal


# --- B12 and Q8: malformed dumps -------------------------------------------------------------


@pytest.fixture(scope="module")
def good_dump(tmp_path_factory) -> Path:
    base = tmp_path_factory.mktemp("dump")
    src = base / "src.sqlite"
    sqlite_source(src, 100)
    dump = base / "good.jsonl"
    api.convert(spec("sqlite", src), spec("jsonl", dump))
    return dump


def edited(good: Path, out: Path, edit) -> Path:
    lines = good.read_text().splitlines(keepends=True)
    edit(lines)
    out.write_text("".join(lines))
    return out


def set_version(value):
    def edit(lines: list[str]) -> None:
        i = next(i for i, line in enumerate(lines) if '"ver"' in line and line.startswith('{"k"'))
        record = json.loads(lines[i])
        record["ver"] = value
        lines[i] = json.dumps(record) + "\n"

    return edit


def set_footer(path: list, value):
    def edit(lines: list[str]) -> None:
        footer = json.loads(lines[-1])
        node = footer
        for step in path[:-1]:
            node = node[step]
        node[path[-1]] = value
        lines[-1] = json.dumps(footer) + "\n"

    return edit


def deep_line(where: str):
    deep = "[" * 100_000 + "]" * 100_000 + "\n"

    def edit(lines: list[str]) -> None:
        if where == "records":
            lines.insert(next(i for i, line in enumerate(lines) if line.startswith('{"k"')), deep)
        elif where == "footer":
            lines[-1] = deep
        else:
            lines[0] = '{"statemigrate": 1, "meta": ' + deep.strip() + "}\n"

    return edit


MALFORMED = {
    "version -1": (set_version(-1), "version"),
    "version 2^64": (set_version(2**64), "version"),
    "version 1.5": (set_version(1.5), "version"),
    "version true": (set_version(True), "version"),
    "footer offset 10^30": (set_footer(["tables", 1, "offset"], 10**30), "offset"),
    "footer offset -5": (set_footer(["tables", 1, "offset"], -5), "offset"),
    "footer offset 0": (set_footer(["tables", 1, "offset"], 0), "offset"),
    "footer offset text": (set_footer(["tables", 1, "offset"], "12"), "offset"),
    "footer count -1": (set_footer(["tables", 0, "count"], -1), "count"),
    "footer count 2^64": (set_footer(["tables", 0, "count"], 2**64), "count"),
    "footer sum not hex": (set_footer(["tables", 0, "sum"], "-" + "0" * 31), "sum"),
    "footer sum too long": (set_footer(["tables", 0, "sum"], "1" * 33), "sum"),
    "footer tables not a list": (set_footer(["tables"], {"a": 1}), "list"),
    "footer table entry not an object": (set_footer(["tables", 0], [1, 2]), "object"),
    "footer table name not text": (set_footer(["tables", 0, "table"], 5), "name"),
    "footer meta not an object": (set_footer(["meta"], []), "meta"),
    "deep record line": (deep_line("records"), "nested too deeply"),
    "deep footer": (deep_line("footer"), "nested too deeply"),
    "deep header": (deep_line("header"), "nested too deeply"),
}


@pytest.mark.parametrize("case", list(MALFORMED))
def test_malformed_dump_is_exit_4(case: str, good_dump: Path, tmp_path: Path) -> None:
    edit, what = MALFORMED[case]
    dump = edited(good_dump, tmp_path / "bad.jsonl", edit)
    final = tmp_path / "out.sqlite"
    run = run_cli(["convert", "--quiet", spec("jsonl", dump), spec("sqlite", final)], timeout=BOUND)
    refused(run, 4, str(dump), what)
    nothing_at(final)
    refused(run_cli(["checksum", spec("jsonl", dump)], timeout=BOUND), 4, str(dump), what)


def test_footer_refusals_come_before_anything_is_written(good_dump: Path, tmp_path: Path) -> None:
    for i, (edit, _what) in enumerate(
        [MALFORMED["footer offset -5"], MALFORMED["footer offset 10^30"], MALFORMED["deep footer"]]
    ):
        dump = edited(good_dump, tmp_path / f"bad{i}.jsonl", edit)
        final = tmp_path / f"out{i}.sqlite"
        run = run_cli(
            ["convert", "--quiet", spec("jsonl", dump), spec("sqlite", final)], timeout=BOUND
        )
        refused(run, 4, str(dump))
        nothing_at(final)


def test_negative_footer_offset_names_the_path_and_the_offset(
    good_dump: Path, tmp_path: Path
) -> None:
    dump = edited(good_dump, tmp_path / "neg.jsonl", set_footer(["tables", 1, "offset"], -5))
    line = refused(run_cli(["checksum", spec("jsonl", dump)], timeout=BOUND), 4, str(dump))
    assert "offset -5" in line
    assert "Invalid argument" not in line


def test_undamaged_dump_still_reads(good_dump: Path) -> None:
    run = run_cli(["checksum", spec("jsonl", good_dump)], timeout=BOUND)
    assert run.returncode == 0, describe(run)


# --- B12: manifests of the wrong shape -------------------------------------------------------


@pytest.fixture(scope="module")
def manifest_source(tmp_path_factory) -> tuple[Path, dict]:
    base = tmp_path_factory.mktemp("manifest")
    src = base / "src.sqlite"
    sqlite_source(src, 100)
    return src, api.checksum(spec("sqlite", src)).to_json()


def without(data: dict, *path) -> dict:
    out = json.loads(json.dumps(data))
    node = out
    for step in path[:-1]:
        node = node[step]
    del node[path[-1]]
    return out


def replaced(data: dict, value, *path) -> dict:
    out = json.loads(json.dumps(data))
    node = out
    for step in path[:-1]:
        node = node[step]
    node[path[-1]] = value
    return out


MANIFESTS = {
    "a list": lambda m: [],
    "a number": lambda m: 5,
    "wrong format": lambda m: replaced(m, 2, "statemigrate_manifest"),
    "no tables": lambda m: without(m, "tables"),
    "tables not a list": lambda m: replaced(m, {"plain": {}}, "tables"),
    "table entry not an object": lambda m: replaced(m, ["plain"], "tables", 0),
    "no count or sum": lambda m: {
        "statemigrate_manifest": 1,
        "tables": [{"table": "plain", "kind": "plain"}],
        "digest": "x",
    },
    "no table name": lambda m: without(m, "tables", 0, "table"),
    "count text": lambda m: replaced(m, "100", "tables", 0, "count"),
    "count negative": lambda m: replaced(m, -1, "tables", 0, "count"),
    "kind unknown": lambda m: replaced(m, "typed", "tables", 0, "kind"),
    "kind a list": lambda m: replaced(m, ["plain"], "tables", 0, "kind"),
    "sum not hex": lambda m: replaced(m, "zz", "tables", 0, "sum"),
    "no digest": lambda m: without(m, "digest"),
    "table twice": lambda m: replaced(m, m["tables"][0], "tables", 1),
}


@pytest.mark.parametrize("case", list(MANIFESTS))
def test_manifest_of_the_wrong_shape_is_exit_2(case: str, manifest_source, tmp_path: Path) -> None:
    src, good = manifest_source
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(MANIFESTS[case](good)))
    run = run_cli(["verify", spec("sqlite", src), "--manifest", manifest], timeout=BOUND)
    refused(run, 2, str(manifest), "not a statemigrate manifest")
    with pytest.raises(UsageError):
        api.verify_manifest(spec("sqlite", src), str(manifest))


def test_deeply_nested_manifest_is_exit_2(manifest_source, tmp_path: Path) -> None:
    src, _good = manifest_source
    manifest = tmp_path / "deep.json"
    manifest.write_text("[" * 100_000 + "]" * 100_000)
    run = run_cli(["verify", spec("sqlite", src), "--manifest", manifest], timeout=BOUND)
    refused(run, 2, str(manifest))


def test_manifest_from_checksum_still_verifies(manifest_source, tmp_path: Path) -> None:
    src, good = manifest_source
    manifest = tmp_path / "m.json"
    manifest.write_text(json.dumps(good))
    run = run_cli(["verify", spec("sqlite", src), "--manifest", manifest], timeout=BOUND)
    assert run.returncode == 0, describe(run)
    manifest.write_text(
        json.dumps(replaced(good, good["tables"][0]["count"] + 1, "tables", 0, "count"))
    )
    run = run_cli(["verify", spec("sqlite", src), "--manifest", manifest], timeout=BOUND)
    assert run.returncode == 1, describe(run)
