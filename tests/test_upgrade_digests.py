"""An upgrade's digests come from what it touched (issue 31, decision 4).

The store is walked once, before the revisions; each table a revision rewrites gets
its digest from the records its operation wrote, the others keep theirs, and the
digest after the run is computed from them, with no second walk. The expectation is
not the code under test's: ``checksum`` walks the upgraded store on its own.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from statemigrate.api import checksum, upgrade
from statemigrate.registry import get_engine
from statemigrate.testing.phases import Phases
from statemigrate.testing.upgrade_conformance import (
    EXAMPLE,
    revision_file,
    schema_with,
    seeded,
)

ENGINES = ["sqlite", "lmdb", "rocksdb", "redb", "fjall3"]

# After the example's head (0005): every operation that writes a table, once.
EVERY_OP = """
    op.create_table("extra")
    op.put("extra", b"a", b"1")
    op.put("extra", b"b", b"2")
    op.delete("extra", b"a")
    op.copy_table("extra", "extra_copy", lambda r: (r[0], r[1] + b"!"))
    op.rename_table("extra_copy", "renamed")
    op.rewrite("renamed", lambda r: (r[0], r[1] * 2))
    op.rekey("renamed", lambda r: b"k" + r[0])
    op.set_versioned("extra", 7)
    op.set_plain("extra")
    op.create_table("gone")
    op.put("gone", b"x", b"y")
    op.drop_table("gone")
"""


@pytest.mark.parametrize("engine", ENGINES)
def test_the_digest_after_needs_no_walk_and_is_the_stores(engine: str, tmp_path: Path) -> None:
    spec = seeded(get_engine(engine), tmp_path, events=300)
    schema = schema_with(tmp_path, {"0006_every_op.py": revision_file("0006", "0005", EVERY_OP)})
    before = checksum(spec).digest
    progress = Phases()
    report = upgrade(spec, schema, progress=progress)
    assert report.status == "upgraded" and report.to_revisions == ["0006"]
    assert report.digest_before == before
    assert report.digest_after == checksum(spec).digest  # walked by checksum, not by upgrade
    assert "digesting the store before" in progress.phases
    assert "digesting the store after" not in progress.phases, progress.phases


def test_op_execute_leaves_the_digest_after_to_a_walk(tmp_path: Path) -> None:
    spec = seeded(get_engine("sqlite"), tmp_path, events=50)
    body = """
        op.execute('UPDATE "settings" SET value = x\\'00\\'')
    """
    schema = schema_with(tmp_path, {"0006_sql.py": revision_file("0006", "0005", body)})
    progress = Phases()
    report = upgrade(spec, schema, progress=progress)
    assert report.digest_after == checksum(spec).digest != report.digest_before
    assert "digesting the store after" in progress.phases


def test_a_downgrade_carries_the_digests_too(tmp_path: Path) -> None:
    from statemigrate.api import downgrade

    spec = seeded(get_engine("sqlite"), tmp_path, events=100)
    upgrade(spec, EXAMPLE)
    at_head = checksum(spec).digest
    progress = Phases()
    report = downgrade(spec, EXAMPLE, to="0002", progress=progress)
    assert report.digest_before == at_head
    assert report.digest_after == checksum(spec).digest
    assert "digesting the store after" not in progress.phases
