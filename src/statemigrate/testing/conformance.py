"""The conformance suite: what every engine's reader and writer must do.

Each case is a function ``case(engine, tmp_path)`` that raises AssertionError when
the engine does not conform. :func:`statemigrate.testing.conformance_suite` runs every
case against one engine as a pytest test class (``tests/test_conformance.py`` for the
built-in engines, a plugin's own tests for its engine); a case an engine declares in
``Engine.known_limits`` (a real limit of the engine, with the reason) runs as a strict
xfail.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from ..engines.base import Engine
from ..model import MAX_VERSION, Record, TableInfo, TableKind
from .stores import content_as_data, read_store, store_path, tree_sha256, write_store

Case = Callable[[type[Engine], Path], None]
CASES: dict[str, Case] = {}

# Limits an engine may declare (``Engine.known_limits``) beside the cases below: the
# checks of other suites they fail, each run there as a strict xfail.
SUITE_LIMITS = {
    "full_disk_one_line": "tests/test_upgrade_safety.py: a full disk during an upgrade is "
    "exit 5 with one line on stderr",
}

P = TableKind.PLAIN
V = TableKind.VERSIONED

# The table names of the case odd_table_names (a layout over them names every one).
ODD_TABLE_NAMES = (
    'x"; DROP TABLE y; --',
    "it's",
    "../../etc/passwd",
    "a/b\\c",
    "with space",
    "ünïcødé 状态",
    "é" * 127 + "x",
    "[brackets]",
    "`tick`",
    "%s%n",
    "default",
)


def in_layout(engine: type[Engine], layout: Path) -> type[Engine]:
    """``engine`` with the layout file ``layout`` given to every reader and writer, as the
    command line's ``--source-layout``/``--dest-layout`` do: the suite run over a layout."""

    def given(options: object) -> dict:
        return {**(options or {}), "layout": str(layout)}  # type: ignore[dict-item]

    class InLayout(engine):  # type: ignore[valid-type,misc]
        @classmethod
        def open_reader(cls, path, options=None):  # type: ignore[no-untyped-def]
            return super().open_reader(path, given(options))

        @classmethod
        def create_writer(cls, path, options=None):  # type: ignore[no-untyped-def]
            return super().create_writer(path, given(options))

        @classmethod
        def open_writer(cls, path, options=None):  # type: ignore[no-untyped-def]
            return super().open_writer(path, given(options))

    return InLayout


def case(fn: Case) -> Case:
    CASES[fn.__name__] = fn
    return fn


def _keys_ok(engine: type[Engine], keys: list[bytes]) -> list[bytes]:
    caps = engine.capabilities
    hi = caps.max_key_len if caps.max_key_len is not None else 1 << 62
    return [k for k in keys if caps.min_key_len <= len(k) <= hi]


@case
def empty_store(engine: type[Engine], tmp: Path) -> None:
    """A store with no table reads back with no table and no records."""
    path = write_store(engine, store_path(engine, tmp), {})
    got = read_store(engine, path)
    assert got["tables"] == {}
    assert engine.detect(path)


@case
def empty_and_missing_tables(engine: type[Engine], tmp: Path) -> None:
    """An empty table is listed with no records; a table never created is not listed."""
    path = write_store(
        engine, store_path(engine, tmp), {TableInfo("empty"): [], TableInfo("one"): [(b"k", b"v")]}
    )
    got = read_store(engine, path)
    assert got["tables"] == {"empty": ("plain", []), "one": ("plain", [(b"k", b"v")])}
    assert "missing" not in got["tables"]


@case
def ordered_reads_from_a_start_key(engine: type[Engine], tmp: Path) -> None:
    """Reads are in byte order and start strictly after the given key."""
    keys = [bytes([a, b]) for a in (1, 2, 200) for b in (0, 7, 255)]
    recs = [(k, b"v" + k) for k in keys]
    table = TableInfo("t")
    path = write_store(engine, store_path(engine, tmp), {table: recs}, batch=4)
    with engine.open_reader(path) as reader:
        (t,) = reader.tables()
        for after in (None, keys[0], b"\x02", keys[4], b"\x02\x07\x00", keys[-1], b"\xff"):
            got = [r for b in reader.read_batches(t, after, max_records=2) for r in b]
            want = [r for r in sorted(recs) if after is None or r[0] > after]
            assert got == want, f"after {after!r}"


@case
def batches_are_bounded(engine: type[Engine], tmp: Path) -> None:
    """Batches respect the record bound, and the byte bound (a single record may exceed it)."""
    recs = [(i.to_bytes(4, "big"), bytes(100)) for i in range(1, 50)]
    path = write_store(engine, store_path(engine, tmp), {TableInfo("t"): recs})
    with engine.open_reader(path) as reader:
        (t,) = reader.tables()
        by_count = list(reader.read_batches(t, max_records=7, max_bytes=1 << 30))
        by_bytes = list(reader.read_batches(t, max_records=10_000, max_bytes=350))
    assert [r for b in by_count for r in b] == recs
    assert [r for b in by_bytes for r in b] == recs
    if engine.name != "jsonl":  # a dump yields the batches it was written with, checked one by one
        assert max(len(b) for b in by_count) <= 7
        assert max(len(b) for b in by_bytes) <= 4


@case
def separate_tables(engine: type[Engine], tmp: Path) -> None:
    """The same key in two tables holds two values."""
    content = {
        TableInfo("a"): [(b"k", b"from a")],
        TableInfo("b"): [(b"k", b"from b"), (b"l", b"")],
    }
    path = write_store(engine, store_path(engine, tmp), content)
    assert read_store(engine, path)["tables"] == content_as_data(content)


@case
def odd_keys(engine: type[Engine], tmp: Path) -> None:
    """Empty, NUL, 0xff, prefixes and 1,000-byte keys sort as memcmp does."""
    keys = _keys_ok(
        engine,
        [
            b"",
            b"\x00",
            b"\x00\x00",
            b"\x00\x01",
            b"\xff",
            b"\xff\xff",
            b"a",
            b"ab",
            b"abc",
            b"a\x00",
            b"b",
            b"k" * 1000,
            b"\x7f",
            b"\x80",
        ],
    )
    recs = [(k, k[::-1] + b"!") for k in keys]
    path = write_store(engine, store_path(engine, tmp), {TableInfo("t"): recs}, batch=3)
    got = read_store(engine, path)["tables"]["t"][1]
    assert [r[0] for r in got] == sorted(keys)
    assert got == sorted(recs)


@case
def empty_and_large_values(engine: type[Engine], tmp: Path) -> None:
    """Empty values and a 16 MiB value round-trip exactly."""
    big = bytes(range(256)) * (16 * 4096)
    recs = [(b"a", b""), (b"b", big), (b"c", b"\x00")]
    path = write_store(engine, store_path(engine, tmp), {TableInfo("t"): recs})
    got = read_store(engine, path)["tables"]["t"][1]
    assert len(got) == 3 and got[0] == (b"a", b"") and got[2] == (b"c", b"\x00")
    assert got[1][1] == big


@case
def versioned_records(engine: type[Engine], tmp: Path) -> None:
    """Versions 0, 2^63 and 2^64-1 round-trip; the table stays versioned."""
    recs = [(b"a", b"x", 0), (b"b", b"", MAX_VERSION), (b"c", b"y", 2**63), (b"d", b"z", 2**63 - 1)]
    content: dict[TableInfo, list[Record]] = {
        TableInfo("s", V): list(recs),
        TableInfo("p"): [(b"a", b"x")],
    }
    path = write_store(engine, store_path(engine, tmp), content)
    assert read_store(engine, path)["tables"] == content_as_data(content)


@case
def persistence_and_metadata(engine: type[Engine], tmp: Path) -> None:
    """Records and metadata survive closing and reopening; metadata is not a table."""
    meta = {"schema": b"demo", "revision": b'["abc123"]', "custom": bytes(range(256))}
    path = write_store(
        engine, store_path(engine, tmp), {TableInfo("t"): [(b"k", b"v")]}, metadata=meta
    )
    got = read_store(engine, path)
    assert got["tables"] == {"t": ("plain", [(b"k", b"v")])}
    for k, v in meta.items():
        assert got["metadata"].get(k) == v, k


@case
def odd_table_names(engine: type[Engine], tmp: Path) -> None:
    """Quotes, semicolons, slashes, dots, spaces, non-ASCII and 255-byte names work."""
    assert len(ODD_TABLE_NAMES[6].encode()) == 255
    content = {TableInfo(n): [(b"k", n.encode())] for n in ODD_TABLE_NAMES}
    path = write_store(engine, store_path(engine, tmp), content)
    assert read_store(engine, path)["tables"] == content_as_data(content)


@case
def reading_never_modifies(engine: type[Engine], tmp: Path) -> None:
    """A full read leaves every file of the store byte-identical."""
    path = write_store(
        engine, store_path(engine, tmp), {TableInfo("t"): [(b"k%d" % i, b"v") for i in range(100)]}
    )
    before = tree_sha256(path)
    read_store(engine, path)
    read_store(engine, path)
    assert tree_sha256(path) == before


@case
def resume_after_reopen(engine: type[Engine], tmp: Path) -> None:
    """A store reopened for writing continues a table after its last key."""
    path = store_path(engine, tmp)
    table = TableInfo("t")
    w = engine.create_writer(path)
    w.create_table(table)
    w.write_batch(table, [(b"a", b"1"), (b"b", b"2")], {"checkpoint": b"x"})
    w.close()
    w = engine.open_writer(path)
    assert w.metadata().get("checkpoint") == b"x"
    assert [t.name for t in w.list_tables()] == ["t"]
    w.write_batch(table, [(b"c", b"3")], {"checkpoint": None})
    w.finish()
    w.close()
    got = read_store(engine, path)
    assert got["tables"]["t"][1] == [(b"a", b"1"), (b"b", b"2"), (b"c", b"3")]
    assert "checkpoint" not in got["metadata"]
