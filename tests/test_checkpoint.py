"""The conversion checkpoint: what a batch commits stays the same size whatever the
number of tables done; every part reads back; 0.1's one-entry form still reads."""

from __future__ import annotations

import json

from statemigrate.checkpoint import Checkpoint, cleared, is_checkpoint_entry
from statemigrate.digest import Digest
from statemigrate.model import META_CHECKPOINT, META_CHECKPOINT_DONE, META_CHECKPOINT_SOURCE

SOURCE = {"engine": "sqlite", "path": "/x/app.sqlite", "files": {"app.sqlite": [4096, 1]}}


def _with_done(n: int) -> Checkpoint:
    cp = Checkpoint(SOURCE)
    for i in range(n):
        cp.finish_table(f"t{i:05d}", Digest(i + 1, (i + 1) * 7919))
    cp.table, cp.last_key, cp.so_far = "t99999", b"k" * 32, Digest(3, 99)
    return cp


def test_a_batch_commits_the_same_bytes_with_1_or_2000_tables_done() -> None:
    # Before, every batch rewrote every finished table's digest and the source's file
    # list: 2,000 tables meant ~200 KB per batch, quadratic over the conversion.
    small, large = _with_done(1).progress_bytes(), _with_done(2000).progress_bytes()
    assert len(small) == len(large) < 200
    assert json.loads(large) == {
        "table": "t99999",
        "last_key": (b"k" * 32).hex(),
        "so_far": Digest(3, 99).to_json(),
    }


def test_finishing_a_table_commits_its_digest_and_the_progress() -> None:
    cp = Checkpoint(SOURCE, table="a", last_key=b"z", so_far=Digest(2, 5))
    entries = cp.finish_table("a", Digest(2, 5))
    assert set(entries) == {META_CHECKPOINT_DONE + "a", META_CHECKPOINT}
    assert json.loads(entries[META_CHECKPOINT_DONE + "a"] or b"") == {
        "count": 2,
        "sum": f"{5:032x}",
    }
    assert json.loads(entries[META_CHECKPOINT] or b"")["table"] is None


def test_every_part_reads_back_from_the_metadata() -> None:
    cp = _with_done(3)
    meta = {k: v for k, v in cp.entries().items() if v is not None}
    meta["schema"] = b"example-app"  # an ordinary entry beside them
    back = Checkpoint.from_metadata(meta)
    assert back == cp
    assert sorted(k for k in meta if is_checkpoint_entry(k)) == sorted(cp.entries())


def test_the_one_entry_form_of_0_1_still_reads() -> None:
    cp = _with_done(2)
    assert Checkpoint.from_metadata({META_CHECKPOINT: cp.to_bytes()}) == cp


def test_progress_without_its_source_is_not_trusted() -> None:
    cp = _with_done(1)
    assert Checkpoint.from_metadata({META_CHECKPOINT: cp.progress_bytes()}) is None
    assert Checkpoint.from_metadata({}) is None


def test_clearing_removes_every_entry_and_nothing_else() -> None:
    keys = ["schema", "kind:t", META_CHECKPOINT, META_CHECKPOINT_SOURCE]
    keys += [META_CHECKPOINT_DONE + n for n in ("a", "b")]
    gone = cleared(keys)
    assert all(v is None for v in gone.values())
    assert set(gone) == {META_CHECKPOINT, META_CHECKPOINT_SOURCE} | {
        META_CHECKPOINT_DONE + n for n in ("a", "b")
    }
