"""Units of the upgrade machinery: the external sort, the switch plan, the revision graph."""

from __future__ import annotations

import errno
import random
import stat

import pytest

from statemigrate import _native
from statemigrate.model import TableInfo, TableKind
from statemigrate.schema.errors import SchemaError
from statemigrate.schema.journal import plan_switch
from statemigrate.schema.scripts import Schema
from statemigrate.schema.sort import SORT_DIR_INFIX, sorted_batches
from statemigrate.testing.upgrade_conformance import EXAMPLE, revision_file, schema_with


def test_external_sort_spills_and_merges(tmp_path) -> None:
    store = tmp_path / "s.sqlite"
    rnd = random.Random(7)
    keys = list({rnd.randbytes(rnd.randint(0, 5)) for _ in range(5000)})
    rnd.shuffle(keys)
    seen_dirs = []

    def batches():
        for i in range(0, len(keys), 100):
            if i == 3000:
                seen_dirs.extend(
                    (d, stat.S_IMODE(d.stat().st_mode))
                    for d in tmp_path.glob("s.sqlite" + SORT_DIR_INFIX + "*")
                )
            yield [(k, b"v") for k in keys[i : i + 100]]

    out = [
        r for b in sorted_batches(batches(), store, run_bytes=20_000, batch_records=333) for r in b
    ]
    assert [r[0] for r in out] == sorted(keys)
    assert len(seen_dirs) == 1, "runs spill to a directory beside the store"
    assert seen_dirs[0][1] == 0o700, "its owner's only"
    assert not list(tmp_path.glob("*" + SORT_DIR_INFIX + "*")), "and it was removed"


def test_a_sort_that_never_spills_makes_no_directory(tmp_path) -> None:
    store = tmp_path / "s.sqlite"
    seen = []

    def batches():
        for i in range(10):
            seen.extend(tmp_path.glob("*" + SORT_DIR_INFIX + "*"))
            yield [(b"%03d" % (9 - i), b"v")]

    out = [r[0] for b in sorted_batches(batches(), store, run_bytes=1 << 20) for r in b]
    assert out == [b"%03d" % i for i in range(10)]
    assert seen == [] and list(tmp_path.iterdir()) == []


def test_the_spill_directory_refuses_a_path_that_exists(tmp_path) -> None:
    """The directory the first spill makes is refused when its name exists by then (a
    link or a directory put there meanwhile): the runs never go where another put them."""
    there = tmp_path / "elsewhere"
    there.mkdir()
    taken = tmp_path / "taken"
    taken.symlink_to(there)
    sort = _native.ExternalSort(False, str(taken), 10, make_directory=True)
    with pytest.raises(OSError) as info:
        sort.push([(b"%d" % i, b"v" * 20) for i in range(5)])
        sort.finish()
    assert info.value.errno == errno.EEXIST
    assert list(there.iterdir()) == []


@pytest.mark.parametrize("run_bytes", [1, 300, 1 << 20])
def test_native_sort_gives_pythons_order_across_runs(tmp_path, run_bytes) -> None:
    rnd = random.Random(run_bytes)
    # short keys, long keys, shared prefixes, the empty key, bytes above 0x7f
    keys = list({rnd.randbytes(rnd.choice([0, 1, 2, 9, 40])) for _ in range(4000)})
    keys += [b"\xff" * 3, b"\x00", b"\xff\x00"]
    keys = list(dict.fromkeys(keys))
    records = [(k, rnd.randbytes(rnd.randint(0, 30))) for k in keys]
    rnd.shuffle(records)
    sort = _native.ExternalSort(False, str(tmp_path), run_bytes)
    for i in range(0, len(records), 333):
        sort.push(records[i : i + 333])
    sort.finish()
    out = []
    while batch := sort.take(1000, 1 << 30):
        assert len(batch) <= 1000
        out.extend(batch)
    assert out == sorted(records)
    if run_bytes == 1 << 20:
        assert sort.spilled_runs == 0, "all of it fits one run: sorted in memory"
    else:
        assert sort.spilled_runs > 10
    assert not list(tmp_path.iterdir()), "run files have no name"


def test_native_sort_refuses_what_is_not_a_record(tmp_path) -> None:
    plain = _native.ExternalSort(False, str(tmp_path))
    versioned = _native.ExternalSort(True, str(tmp_path))
    with pytest.raises(ValueError, match="key must be bytes, got str"):
        plain.push([("a", b"v")])
    with pytest.raises(ValueError, match=r"must be \(key, value\)"):
        plain.push([(b"a", b"v", 1)])
    with pytest.raises(OverflowError):
        versioned.push([(b"a", b"v", 2**64)])
    with pytest.raises(OverflowError):
        versioned.push([(b"a", b"v", -1)])


def test_external_sort_keeps_versioned_records_exactly_across_runs(tmp_path) -> None:
    rnd = random.Random(11)
    keys = list({rnd.randbytes(rnd.randint(1, 9)) for _ in range(3000)})
    versions = [0, 1, 2**63 - 1, 2**63, 2**64 - 1]
    records = [(k, rnd.randbytes(rnd.randint(0, 40)), versions[i % 5]) for i, k in enumerate(keys)]
    rnd.shuffle(records)
    batches = (records[i : i + 250] for i in range(0, len(records), 250))
    out = [
        r
        for b in sorted_batches(batches, tmp_path / "s", versioned=True, run_bytes=10_000)
        for r in b
    ]
    assert out == sorted(records, key=lambda r: r[0])
    assert all(type(r) is tuple and type(r[2]) is int for r in out)


def test_external_sort_cleans_up_on_error(tmp_path) -> None:
    def batches():
        yield [(b"b", b"1"), (b"a", b"2")]
        yield [(b"c", b"3")]
        raise KeyError("stop")

    with pytest.raises(KeyError):
        list(sorted_batches(batches(), tmp_path / "s", run_bytes=1))
    assert not list(tmp_path.iterdir())


def _apply(plan, original):
    """Simulate the plan's steps on a dict of physical tables."""
    tables = dict(original)
    for step in plan:
        if step["op"] == "drop":
            tables.pop(step["table"], None)
        elif step["src"] in tables:
            tables[step["dst"]] = tables.pop(step["src"])
    return tables


@pytest.mark.parametrize("case", ["swap", "rename_over_dropped", "chain", "rewrite_and_rename"])
def test_switch_plans(case) -> None:
    P = TableKind.PLAIN
    original = {n: TableInfo(n, P) for n in ("a", "b", "c")}
    content = {"a": "A", "b": "B", "c": "C"}
    if case == "swap":
        view = {"a": original["b"], "b": original["a"], "c": original["c"]}
        want = {"a": "B", "b": "A", "c": "C"}
    elif case == "rename_over_dropped":
        view = {"b": original["a"], "c": original["c"]}
        want = {"b": "A", "c": "C"}
    elif case == "chain":
        view = {"b": original["a"], "c": original["b"], "d": original["c"]}
        want = {"b": "A", "c": "B", "d": "C"}
    else:
        view = {"z": original["a"], "a": TableInfo("__sm_tmp__1", P), "b": original["b"]}
        want = {"z": "A", "a": "NEW", "b": "B"}
        content["__sm_tmp__1"] = "NEW"
    counter = iter(range(100, 200))
    plan = plan_switch(view, original, lambda: f"__sm_tmp__{next(counter)}")
    assert _apply(plan, content) == want
    # Idempotent after a crash at any step, given the recorded progress.
    for crash in range(len(plan)):
        tables = _apply(plan[:crash], content)
        assert _apply(plan[crash:], tables) == want


def test_graph_is_alembics(tmp_path) -> None:
    schema = Schema(EXAMPLE)
    assert schema.heads == ["0005"]
    assert [s.revision for s in schema.steps([], "head", True)] == [
        "0001",
        "0002",
        "0003",
        "0004",
        "0005",
    ]
    assert [s.revision for s in schema.steps(["0002"], "+2", True)] == ["0003", "0004"]
    assert [s.revision for s in schema.steps(["0004"], "-1", False)] == ["0004"]
    assert schema.steps(["0004"], "-1", False)[0].heads_after == ["0003"]
    assert [s.revision for s in schema.steps(["0003"], "base", False)] == ["0003", "0002", "0001"]
    assert schema.ancestry(["0003"]) == ["0001", "0002", "0003"]


def test_branches_and_merges(tmp_path) -> None:
    files = {
        "b1.py": revision_file("b1", "0005", "op.create_table('one')", "op.drop_table('one')"),
        "b2.py": revision_file("b2", "0005", "op.create_table('two')", "op.drop_table('two')"),
    }
    schema_dir = schema_with(tmp_path, files)
    schema = Schema(schema_dir)
    assert schema.heads == ["b1", "b2"]
    steps = schema.steps(["0005"], "heads", True)
    assert sorted(s.revision for s in steps) == ["b1", "b2"] and steps[-1].heads_after == [
        "b1",
        "b2",
    ]
    (schema_dir / "versions" / "m.py").write_text(revision_file("m", ("b1", "b2"), "pass"))
    schema = Schema(schema_dir)
    steps = schema.steps(["b1", "b2"], "head", True)
    assert [s.revision for s in steps] == ["m"] and steps[0].heads_after == ["m"]


def test_broken_schema_is_a_usage_error(tmp_path) -> None:
    with pytest.raises(SchemaError):
        Schema(tmp_path)
    broken = schema_with(tmp_path, {"x.py": "this is not python ("})
    with pytest.raises(SchemaError):
        Schema(broken)
