"""Table names: checked against the destination before anything is written; reserved names.

Hostile cases B5, B10 and B11 (docs: DESIGN.md "The state model", "Default layouts"):

- a name the destination engine cannot hold (over 255 bytes, empty, NUL, ``a`` beside
  ``A`` in SQL, ``É`` beside ``é`` in Turso's layout, ``sqlite_…``, ``alembic_version``)
  is refused with exit 5 before anything exists: no DST, no DST.partial, no DST.lock,
  one message listing every offending table;
- a source table using a name statemigrate reserves (``__sm_tmp__…``; in a SQL store a
  user's ``__statemigrate__`` or ``alembic_version``) is exit 4, naming it;
- names that are legal (quotes, SQL, paths, unicode, 255 bytes) convert exactly, and an
  empty RocksDB ``default`` table round-trips.

Sources are built with the real drivers (apsw, turso) where statemigrate's own writers
would not make them, and with the engines' writers otherwise.
"""

from __future__ import annotations

import re
import string
from pathlib import Path

import pytest

from statemigrate import checksum, convert, upgrade, verify
from statemigrate.engines.base import Engine
from statemigrate.errors import DestinationError, SourceError
from statemigrate.model import TableInfo, TableKind, table_name_problem
from statemigrate.registry import engine_names, get_engine
from statemigrate.schema.errors import RevisionFailedError
from statemigrate.testing.cli import one_line_error, run_cli
from statemigrate.testing.corruption import copy_store
from statemigrate.testing.stores import files_sha256, leftovers, read_store, write_store
from statemigrate.testing.upgrade_conformance import revision_file, schema_with

ENGINES = engine_names()
SQL_FAMILY = {"sqlite", "libsql", "turso"}
HANG_GUARD = 60  # seconds: generous, only so that a hang fails instead of blocking


# --- building sources --------------------------------------------------------------------


def sql_quote(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def sqlite_source(path: Path, names: list[str], driver: str = "apsw") -> Path:
    """A SQLite file in the tool's table layout, one record per table, made by the driver."""
    create = "CREATE TABLE {} (key BLOB PRIMARY KEY NOT NULL, value BLOB NOT NULL)"
    if driver == "apsw":
        import apsw

        conn = apsw.Connection(str(path))
        with conn:
            for n in names:
                conn.execute(create.format(sql_quote(n)) + " WITHOUT ROWID")
                conn.execute(f"INSERT INTO {sql_quote(n)} VALUES (?, ?)", (b"k", b"v"))
        conn.close()
    else:  # turso: rowid tables, as its layout has them
        import turso

        conn = turso.connect(str(path), isolation_level=None)
        for n in names:
            conn.execute(create.format(sql_quote(n)))
            conn.execute(f"INSERT INTO {sql_quote(n)} VALUES (?, ?)", (b"k", b"v"))
        conn.close()
    return path


def store(engine: str, tmp: Path, names: list[str], name: str = "src", **kw) -> Path:
    """A store of ``engine`` holding one record in each table, through the engine's writer."""
    path = tmp / f"{name}.{engine}"
    return write_store(
        get_engine(engine), path, {TableInfo(n): [(b"k", b"v")] for n in names}, **kw
    )


def nothing_at(final: Path) -> None:
    """Nothing a convert makes is there: no DST, no DST.partial (or its side files), no lock."""
    assert not final.exists() and not final.is_symlink(), final
    assert leftovers(final) == []
    assert sorted(p.name for p in final.parent.glob(final.name + "*")) == []


def names_of(engine: str, path: Path) -> list[str]:
    return [row["table"] for row in checksum(f"{engine}:{path}").tables]


# --- names a destination cannot hold: exit 5, before anything exists ----------------------

# (id, source engine, table names, {destination engine: offending names, or None for
# every name}); a destination not listed holds every name.


def refused_by(engines, *offenders: str) -> dict:
    return {e: (offenders or None) for e in engines}


CASES = [
    ("ascii-case", "lmdb", ["a", "A"], refused_by(SQL_FAMILY, "a")),
    ("non-ascii-case", "lmdb", ["\u00c9", "\u00e9"], refused_by(["turso"], "\u00e9")),
    ("kelvin-sign", "lmdb", ["\u212a", "k"], refused_by(["turso"], "\u212a")),
    (
        "sqlite-prefix",
        "lmdb",
        ["sqlite_x", "SQLITE_Y", "sqlitex"],
        refused_by(SQL_FAMILY, "SQLITE_Y", "sqlite_x"),
    ),
    ("turso-prefix", "lmdb", ["__turso_internal_x", "__TURSO_INTERNAL_Y"], refused_by(["turso"])),
    (
        "alembic",
        "lmdb",
        ["alembic_version", "ALEMBIC_VERSION", "events"],
        refused_by(SQL_FAMILY, "ALEMBIC_VERSION", "alembic_version"),
    ),
    ("metadata-case", "lmdb", ["__STATEMIGRATE__"], refused_by(SQL_FAMILY)),
    (
        "all-at-once",
        "lmdb",
        ["A", "a", "sqlite_x", "alembic_version", "ok"],
        refused_by(SQL_FAMILY, "a", "alembic_version", "sqlite_x"),
    ),
    ("256-bytes", "lmdb", ["\u00e9" * 128], refused_by(ENGINES)),
    ("600-bytes", "sqlite-apsw", ["L" * 600, "ok"], refused_by(ENGINES, "L" * 600)),
    ("empty", "sqlite-apsw", ["", "ok"], refused_by(ENGINES, "")),
    ("nul", "jsonl", ["a\x00b", "a"], refused_by(ENGINES, "a\x00b")),
]


def _case_params():
    for case_id, src, names, refused in CASES:
        for dst in ENGINES:
            yield pytest.param(
                src, names, dst, refused.get(dst), dst in refused, id=f"{case_id}-to-{dst}"
            )


def build_source(kind: str, tmp: Path, names: list[str]) -> tuple[str, Path]:
    if kind == "sqlite-apsw":
        return "sqlite", sqlite_source(tmp / "src.sqlite", names)
    return kind, store(kind, tmp, names)


@pytest.mark.parametrize(("src", "names", "dst", "offenders", "refused"), list(_case_params()))
def test_destination_names_checked_before_writing(tmp_path, src, names, dst, offenders, refused):
    src_engine, src_path = build_source(src, tmp_path, names)
    before = files_sha256(src_engine, src_path)
    final = tmp_path / f"out.{dst}"
    if not refused:
        report = convert(f"{src_engine}:{src_path}", f"{dst}:{final}")
        assert report.verified
        assert sorted(names_of(dst, final)) == sorted(names)
        return
    with pytest.raises(DestinationError) as info:
        convert(f"{src_engine}:{src_path}", f"{dst}:{final}")
    message = info.value.message
    assert info.value.exit_code == 5
    assert message.startswith(f"the {dst} engine cannot hold")
    expected = names if offenders is None else offenders
    for name in expected:
        assert repr(name)[:40] in message, (name, message)
    for name in set(names) - set(expected):
        assert f"{name!r} (" not in message, (name, message)  # only the offenders are listed
    assert " key" not in message  # a table name is never called a key
    nothing_at(final)
    assert files_sha256(src_engine, src_path) == before  # the source is never modified


def test_refusal_is_one_line_and_a_rerun_says_the_same(tmp_path):
    src = store("lmdb", tmp_path, ["a", "A", "sqlite_x"])
    final = tmp_path / "out.sqlite"
    runs = [
        run_cli(["convert", "-q", f"lmdb:{src}", f"sqlite:{final}"], timeout=HANG_GUARD)
        for _ in range(2)
    ]
    lines = [one_line_error(r) for r in runs]
    assert [r.returncode for r in runs] == [5, 5]
    assert lines[0] == lines[1]  # not "an interrupted conversion left this behind"
    assert "'a' (same name as 'A' in SQL, which ignores case)" in lines[0]
    assert "'sqlite_x' (reserved by SQLite)" in lines[0]
    nothing_at(final)


def test_lmdb_refusal_names_a_table_not_a_key(tmp_path):
    src = sqlite_source(tmp_path / "long.sqlite", ["L" * 1000])
    final = tmp_path / "out.lmdb"
    run = run_cli(["convert", "-q", f"sqlite:{src}", f"lmdb:{final}"], timeout=HANG_GUARD)
    line = one_line_error(run)
    assert run.returncode == 5
    assert "cannot hold this table" in line and "1000 bytes" in line and "key" not in line
    nothing_at(final)


# --- the predicate a generator of names uses --------------------------------------------


@pytest.mark.parametrize(
    ("engine_name", "names", "offenders"),
    [
        ("sqlite", ["a", "A", "b"], ["A"]),
        ("sqlite", ["A", "a"], ["a"]),  # the later one, in the order given
        ("sqlite", ["\u00c9", "\u00e9", "\u212a", "k"], []),  # SQLite folds ASCII only
        (
            "libsql",
            ["SQLITE_", "alembic_version", "__Statemigrate__"],
            ["SQLITE_", "alembic_version", "__Statemigrate__"],
        ),
        ("turso", ["\u00c9", "\u00e9", "\u212a", "k"], ["\u00e9", "k"]),
        ("turso", ["__turso_internal_z"], ["__turso_internal_z"]),
        ("lmdb", ["a", "A", "alembic_version", "sqlite_x", "\u00e9" * 127 + "x"], []),
        (
            "rocksdb",
            ["default", "__statemigrate__", "__sm_tmp__9"],
            ["__statemigrate__", "__sm_tmp__9"],
        ),
        ("redb", ["", "x"], [""]),
        ("jsonl", ["a\x00", "\ud800"], ["a\x00", "\ud800"]),
    ],
)
def test_table_name_problems(engine_name, names, offenders):
    problems = get_engine(engine_name).table_name_problems(names)
    assert list(problems) == offenders
    assert all(isinstance(why, str) and why for why in problems.values())


def test_model_rules():
    assert table_name_problem("x" * 255) is None
    assert table_name_problem("\u00e9" * 127 + "x") is None  # 255 bytes
    assert "256 bytes" in (table_name_problem("x" * 256) or "")
    assert table_name_problem("") == "an empty name"
    assert table_name_problem("a\x00b") == "holds a NUL character"
    assert table_name_problem("__statemigrate__") == "reserved for statemigrate's metadata"
    assert table_name_problem("__sm_tmp__1") == "reserved for upgrades in progress"
    assert table_name_problem("\udc80") == "not valid UTF-8"


# --- reserved names in a source: exit 4 --------------------------------------------------


@pytest.mark.parametrize("src", ENGINES)
def test_private_upgrade_name_in_a_source_is_refused(tmp_path, src):
    path = store(src, tmp_path, ["__sm_tmp__1", "events"])
    final = tmp_path / "out.lmdb"
    with pytest.raises(SourceError) as info:
        convert(f"{src}:{path}", f"lmdb:{final}")
    assert info.value.exit_code == 4
    assert "'__sm_tmp__1' uses a name statemigrate reserves for upgrades in progress" in (
        info.value.message
    )
    nothing_at(final)
    with pytest.raises(SourceError, match="__sm_tmp__1"):
        checksum(f"{src}:{path}")
    with pytest.raises(SourceError, match="__sm_tmp__1"):
        verify(f"{src}:{path}", f"{src}:{copy_store(path, tmp_path / f'copy.{src}')}")
    # Leaving it out converts the rest.
    assert convert(f"{src}:{path}", f"lmdb:{final}", tables=["events"]).verified
    assert names_of("lmdb", final) == ["events"]


def test_private_name_in_a_store_an_upgrade_left_unfinished(tmp_path):
    pending = b'{"revision": "r1", "tables": ["__sm_tmp__1"]}'
    path = store("lmdb", tmp_path, ["__sm_tmp__1", "events"], metadata={"upgrade_pending": pending})
    final = tmp_path / "out.sqlite"
    with pytest.raises(SourceError, match="was interrupted"):
        convert(f"lmdb:{path}", f"sqlite:{final}")
    nothing_at(final)
    with pytest.raises(SourceError, match="was interrupted"):
        checksum(f"lmdb:{path}")


@pytest.mark.parametrize("reserved", ["__statemigrate__", "alembic_version"])
@pytest.mark.parametrize("src", sorted(SQL_FAMILY))
def test_user_table_named_like_sql_metadata_is_refused(tmp_path, src, reserved):
    driver = "turso" if src == "turso" else "apsw"
    path = sqlite_source(tmp_path / f"src.{src}", [reserved, "other"], driver)
    final = tmp_path / "out.lmdb"
    run = run_cli(["convert", "-q", f"{src}:{path}", f"lmdb:{final}"], timeout=HANG_GUARD)
    line = one_line_error(run)
    assert run.returncode == 4, line  # never 70
    assert f"table {reserved!r} uses the name of" in line and "rename it in the app first" in line
    nothing_at(final)
    run = run_cli(["checksum", f"{src}:{path}"], timeout=HANG_GUARD)
    assert run.returncode == 4 and reserved in one_line_error(run)


def test_alembic_own_table_is_still_the_stamp(tmp_path):
    """A real Alembic ``alembic_version`` (``version_num``) is metadata, not a user table."""
    import apsw

    path = sqlite_source(tmp_path / "src.sqlite", ["events"])
    conn = apsw.Connection(str(path))
    with conn:
        conn.execute("CREATE TABLE alembic_version (version_num VARCHAR(32) NOT NULL PRIMARY KEY)")
        conn.execute("INSERT INTO alembic_version VALUES ('abc123')")
    conn.close()
    final = tmp_path / "out.lmdb"
    assert convert(f"sqlite:{path}", f"lmdb:{final}").verified
    assert names_of("lmdb", final) == ["events"]
    assert read_store(get_engine("lmdb"), final)["metadata"]["revision"] == b'["abc123"]'


# --- the documented name rules ---------------------------------------------------------
# What each engine's documentation says it holds (DESIGN.md "The state model" and
# "Default layouts", README "Refusals come before anything is written" and "fjall 2 and
# fjall 3"), computed here: the tests of names take their expectations from these, never
# from the engine's own answer (Engine.table_name_problems).


def documented_model_name(name: str) -> bool:
    """DESIGN.md "The state model": 1-255 bytes of UTF-8 without NUL, not the metadata's
    name, not an upgrade's private prefix."""
    try:
        size = len(name.encode("utf-8"))
    except UnicodeEncodeError:
        return False
    return (
        1 <= size <= 255
        and "\x00" not in name
        and name != "__statemigrate__"
        and not name.startswith("__sm_tmp__")
    )


# fjall 2's partition names as the README documents them ("fjall 2 and fjall 3"),
# computed here: only 1-255 characters of [A-Za-z0-9_.#$-]; a name made of those (but
# "." and "..") is stored unchanged, any other has every UTF-8 byte outside the set,
# and "$", written "$" and two lowercase hex digits ("." too in "." and ".."); a
# partition name reads back unescaped only when escaping that gives it again.
FJALL2_SAFE = frozenset(string.ascii_letters + string.digits + "_.#$-")


def documented_partition_name(name: str) -> str:
    """A table's fjall 2 partition name, as the README says it is stored."""
    if all(c in FJALL2_SAFE for c in name) and name not in (".", ".."):
        return name
    dots = name in (".", "..")
    return "".join(
        chr(b) if chr(b) in FJALL2_SAFE and b != ord("$") and not dots else f"${b:02x}"
        for b in name.encode("utf-8")
    )


def documented_read_back(stored: str) -> str:
    """The table name a fjall 2 partition name reads back as, as the README says."""
    try:
        raw = re.sub(r"\$([0-9a-f]{2})", lambda m: chr(int(m[1], 16)), stored).encode("latin-1")
        name = raw.decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return stored
    return name if documented_partition_name(name) == stored else stored


def documented_refusals(engine: str, names: list[str]) -> set[str]:
    """The names of ``names`` that ``engine``'s documentation says it cannot hold together.

    SQL engines ignore ASCII letter case (of two names equal but for it, the later is
    refused) and reserve ``sqlite_…``, ``alembic_version`` and ``__statemigrate__`` in any
    case; Turso also lower-cases non-ASCII capitals; fjall 2 refuses a name whose escaped
    form is over 255 characters or that would read back as another.
    """
    out: set[str] = set()
    first: dict[str, str] = {}
    for name in names:
        if not documented_model_name(name):
            out.add(name)
            continue
        if engine in SQL_FAMILY:
            folded = "".join(c.lower() if c.isascii() or engine == "turso" else c for c in name)
            if folded.startswith("sqlite_") or folded in ("alembic_version", "__statemigrate__"):
                out.add(name)
                continue
            # Turso's own tables (a fact of Turso, not yet in the README).
            if engine == "turso" and folded.startswith("__turso_internal_"):
                out.add(name)
                continue
            if first.setdefault(folded, name) != name:
                out.add(name)
                continue
        if engine == "fjall2":
            stored = documented_partition_name(name)
            if len(stored) > 255 or documented_read_back(stored) != name:
                out.add(name)
    return out


# --- legal names convert exactly ---------------------------------------------------------

LEGAL = [
    'x"; DROP TABLE y; --',
    "../../etc",
    "it's",
    "`b` [c]",
    "new\nline",
    " spaced ",
    "%s%n%x",
    "\u00fcn\u00ef\u00a9\u00f8d\u00e9 \u2713",
    "L" * 255,
    "\u00e9" * 127 + "x",  # 255 bytes
    "default",
    "sqlitex",
    "alembic_versions",
    "tab\there",
    "cr\r\nlf",
    "..",
    "trailing space ",
    "back\\slash/and/slash",
]

# The names of LEGAL an engine's documentation says it cannot hold, and why (README):
# every other engine holds them all. The list is the test's, never the engine's own
# answer (Engine.table_name_problems), so an engine that starts refusing a name fails.
DOCUMENTED_UNHELD = {
    # "fjall 2 and fjall 3": a name whose escaped form is over 255 characters.
    "fjall2": {"\u00e9" * 127 + "x"},
}


def test_legal_names_round_trip(tmp_path, engine):
    # Names the engine's documentation says it cannot hold are refused before writing
    # (checked at the end); every other legal name round-trips.
    refused = DOCUMENTED_UNHELD.get(engine.name, set())
    assert set(engine.table_name_problems(LEGAL)) == refused
    held = [n for n in LEGAL if n not in refused]
    content = {
        TableInfo(n, TableKind.VERSIONED if i % 2 else TableKind.PLAIN): (
            [(b"k%d" % i, n.encode(), i)] if i % 2 else [(b"k%d" % i, n.encode())]
        )
        for i, n in enumerate(LEGAL)
        if n in held
    }
    src = write_store(get_engine("lmdb"), tmp_path / "src.lmdb", content)
    mid = tmp_path / f"mid.{engine.name}"
    back = tmp_path / "back.lmdb"
    assert convert(f"lmdb:{src}", f"{engine.name}:{mid}").verified
    assert convert(f"{engine.name}:{mid}", f"lmdb:{back}").verified
    lmdb = get_engine("lmdb")
    assert read_store(lmdb, back)["tables"] == read_store(lmdb, src)["tables"]
    assert sorted(names_of(engine.name, mid)) == sorted(held)
    assert verify(f"lmdb:{src}", f"{engine.name}:{mid}").equal
    for i, name in enumerate(sorted(refused)):
        one = write_store(get_engine("lmdb"), tmp_path / f"one{i}.lmdb", {TableInfo(name): []})
        with pytest.raises(DestinationError, match="cannot hold this table"):
            convert(f"lmdb:{one}", f"{engine.name}:{tmp_path / f'refused{i}'}")
        nothing_at(tmp_path / f"refused{i}")


# --- RocksDB's default column family -----------------------------------------------------


DEFAULT_CASES = [(e, TableKind.PLAIN) for e in ENGINES] + [
    ("sqlite", TableKind.VERSIONED),
    ("rocksdb", TableKind.VERSIONED),
]


@pytest.mark.parametrize(
    ("engine_name", "kind"), DEFAULT_CASES, ids=[f"{e}-{k.value}" for e, k in DEFAULT_CASES]
)
def test_empty_default_table_round_trips_through_rocksdb(tmp_path, engine_name, kind):
    engine = get_engine(engine_name)
    content = {TableInfo("default", kind): [], TableInfo("other"): [(b"k", b"v")]}
    src = write_store(engine, tmp_path / f"src.{engine.name}", content)
    mid = tmp_path / "mid.rocksdb"
    back = tmp_path / f"back.{engine.name}"
    assert convert(f"{engine.name}:{src}", f"rocksdb:{mid}").verified
    rows = {r["table"]: r for r in checksum(f"rocksdb:{mid}").tables}
    assert rows["default"]["kind"] == kind.value and rows["default"]["count"] == 0
    assert convert(f"rocksdb:{mid}", f"{engine.name}:{back}").verified
    assert read_store(engine, back)["tables"] == read_store(engine, src)["tables"]


def test_rocksdb_default_family_empty_and_unrecorded_is_no_table(tmp_path):
    """An app's store always has the default family: left empty, it is not a table."""
    import rocksdict

    path = tmp_path / "app.rocksdb"
    opts = rocksdict.Options(raw_mode=True)
    opts.create_if_missing(True)
    db = rocksdict.Rdict(str(path), opts)
    db.create_column_family("events", opts).put(b"k", b"v")
    db.close()
    assert names_of("rocksdb", path) == ["events"]


# --- upgrades: a revision that creates or renames a table --------------------------------


def _upgrade_with(tmp: Path, engine: type[Engine], body: str, dry_run: bool):
    """Run a one-revision schema whose upgrade() is ``body`` on a store holding table ``a``."""
    path = write_store(engine, tmp / f"s.{engine.name}", {TableInfo("a"): [(b"k", b"v")]})
    schema = schema_with(tmp, {"r1.py": revision_file("r1", None, body)}, base=None)
    return upgrade(f"{engine.name}:{path}", schema, dry_run=dry_run)


@pytest.mark.parametrize("dry_run", [True, False], ids=["dry-run", "run"])
@pytest.mark.parametrize(
    ("body", "offender"),
    [
        ('op.create_table("A")', "'A' (same name as 'a' in"),
        ('op.rename_table("a", "A")', "'A' (same name as 'a' in"),
        ('op.copy_table("a", "sqlite_x")', "'sqlite_x' (reserved by SQLite)"),
        ('op.create_table("alembic_version")', "'alembic_version' (reserved for the revision"),
    ],
)
@pytest.mark.parametrize("engine_name", sorted(SQL_FAMILY))
def test_upgrade_refuses_a_name_the_sql_engine_cannot_hold(
    tmp_path, engine_name, body, offender, dry_run
):
    engine = get_engine(engine_name)
    with pytest.raises(RevisionFailedError) as info:
        _upgrade_with(tmp_path, engine, body, dry_run)
    assert info.value.exit_code == 5
    assert (
        f"revision r1: the {engine_name} engine cannot hold table {offender}" in info.value.message
    )
    assert read_store(engine, tmp_path / f"s.{engine_name}")["tables"] == {
        "a": ("plain", [(b"k", b"v")])
    }


def test_upgrade_on_a_kv_engine_holds_both_cases(tmp_path):
    engine = get_engine("lmdb")
    report = _upgrade_with(tmp_path, engine, 'op.create_table("A")', dry_run=False)
    assert report.status == "upgraded"
    assert sorted(read_store(engine, tmp_path / "s.lmdb")["tables"]) == ["A", "a"]
