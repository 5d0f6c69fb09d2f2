"""``op.one_pass()``: copies and rewrites of one table run in one pass over it.

Inside the block each operation must still see what the ones before it left: a copy of a table whose
rewrite is queued, a rewrite of a table a rekey built in the same revision (its old
private table goes only after the pass), a queued copy dropped or given single-record
puts, a batch function that changes its own argument, a function that reads the table
its rewrite is writing. Outside it, operations run in order. Run on every engine that
upgrades in place, over several batches; the expectations are computed here.
"""

from __future__ import annotations

import pytest

from statemigrate import api
from statemigrate.registry import engine_names, get_engine, resolve_source
from statemigrate.testing.stores import read_store
from statemigrate.testing.upgrade_conformance import (
    empty_store,
    revision_file,
    schema_with,
    xfail_raises,
    xfail_reason,
)

N = 95  # records; batches of 10 records: the pass spans ten batches

FILL = f"""
    op.create_table("a")
    for i in range({N}):
        op.put("a", b"k%03d" % i, b"v%d" % i)
"""

PASSES = """
    op.rekey("a", lambda r: b"x" + r[0])  # a is now a private table of this revision

    def shout(records):
        records[:] = [(k, v.upper()) for k, v in records]  # changes its own argument
        return records

    with op.one_pass():
        op.copy_table("a", "b", shout, batch=True)  # queued: reads a's private table
        op.rewrite("a", lambda r: (r[0], r[1] + b"!"))  # the same read; a's old table goes after
        op.copy_table("a", "c")  # reads the rewrite's result: the queued pass runs first
        op.rewrite("b", lambda r: (r[0], r[1] + b"?"))
        assert [r[1] for r in op.records("c")][:2] == [b"v0!", b"v1!"]
        op.copy_table("a", "d")
        op.drop_table("d")  # queued, then dropped
        op.copy_table("b", "e")
        op.put("e", b"xk000", b"put")  # a put on a queued copy
        op.delete("e", b"xk001")
"""

# A read of the table a queued rewrite is writing, from inside its function (as 0003's
# downgrade reads another table side by side): it reads the table as it was.
SELF_READ = """
    before = op.records("c")

    def pair(record):
        key, value = next(before)
        assert key == record[0]
        return key, value + b"|" + record[1]

    with op.one_pass():
        op.rewrite("c", pair)
"""

# Outside one_pass each operation runs to its end before the next line: Python code
# between them sees their effects (a count taken by one function, used by the next).
IN_ORDER = """
    seen = []
    op.copy_table("a", "f", lambda r: (seen.append(r[0]), r)[1])
    n = len(seen)
    op.rewrite("f", lambda r: (r[0], b"%d" % n))
"""


def _params():
    for name in engine_names():
        reason = xfail_reason(get_engine(name))
        raises = xfail_raises(get_engine(name))
        marks = [pytest.mark.xfail(strict=True, raises=raises, reason=reason)] if reason else []
        yield pytest.param(name, id=name, marks=marks)


@pytest.mark.parametrize("engine_name", list(_params()))
def test_queued_passes_keep_each_operations_view(engine_name: str, tmp_path) -> None:
    engine = get_engine(engine_name)
    engine.require_driver()
    schema = schema_with(
        tmp_path,
        {
            "r1.py": revision_file("r1", None, FILL),
            "r2.py": revision_file("r2", "r1", PASSES),
            "r3.py": revision_file("r3", "r2", SELF_READ),
            "r4.py": revision_file("r4", "r3", IN_ORDER),
        },
        base=None,
    )
    spec = empty_store(engine, tmp_path)
    report = api.upgrade(spec, schema, batch_records=10)
    assert report.to_revisions == ["r4"]
    got = read_store(*resolve_source(spec))["tables"]
    keys = [b"xk%03d" % i for i in range(N)]
    a = [(k, b"v%d!" % i) for i, k in enumerate(keys)]
    b = [(k, b"V%d?" % i) for i, k in enumerate(keys)]
    e = [(b"xk000", b"put")] + b[2:]
    assert got == {
        "a": ("plain", a),
        "b": ("plain", b),
        "c": ("plain", [(k, v + b"|" + v) for k, v in a]),
        "e": ("plain", e),
        "f": ("plain", [(k, b"%d" % N) for k in keys]),
    }
