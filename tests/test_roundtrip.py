"""Round trips through every pair of engines: exact content, metadata and digests.

The property test draws table names from all of Unicode and keeps, for each pair, the
names the documentation admits on BOTH engines (tests/test_names.py's documented rules,
never ``Engine.table_name_problems``: 1-255 bytes of UTF-8 without NUL, not reserved; SQL
engines fold ASCII case and reserve ``sqlite_…`` and ``alembic_version``; Turso also
folds non-ASCII capitals; fjall 2's escaped names fit 255 characters). Names one engine refuses
are not part of a round trip: tests/test_names.py checks that they are refused before
anything is written.

Every example that failed once is kept below as an explicit ``@example``. The loaded
hypothesis profile (tests/conftest.py) decides randomness: ``@settings`` here sets only
sizes, so ``make test`` draws the same examples on every run.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path

import pytest
from hypothesis import HealthCheck, assume, example, given, settings
from hypothesis import strategies as st
from test_names import documented_model_name, documented_refusals

from statemigrate import checksum, convert, verify
from statemigrate.model import MAX_VERSION, TableInfo, TableKind
from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.stores import content_as_data, content_digest, read_store, write_store

PAIRS = list(itertools.product(engine_names(), repeat=2))


def admitted(names: Iterable[str], *engines: str) -> bool:
    """Whether every engine of ``engines`` holds all of ``names`` together, as their
    documentation says (tests/test_names.py's documented rules, not the engines' own
    answer): a name admitted here that an engine refuses fails the round trip."""
    names = list(names)
    return not any(documented_refusals(e, names) for e in engines)


# --- content ---------------------------------------------------------------------------


def _fits(engine, key: bytes) -> bool:
    caps = get_engine(engine).capabilities
    return caps.min_key_len <= len(key) <= (caps.max_key_len or 1 << 62)


@st.composite
def contents(draw):
    names = draw(
        st.lists(
            st.text(min_size=1, max_size=12).filter(documented_model_name),
            max_size=3,
            unique=True,
        )
    )
    out = {}
    for name in names:
        kind = draw(st.sampled_from([TableKind.PLAIN, TableKind.VERSIONED]))
        ks = draw(st.lists(st.binary(max_size=12), max_size=15, unique=True))
        if kind is TableKind.VERSIONED:
            recs = [
                (k, draw(st.binary(max_size=30)), draw(st.sampled_from([0, 5, MAX_VERSION])))
                for k in ks
            ]
        else:
            recs = [(k, draw(st.binary(max_size=30))) for k in ks]
        out[TableInfo(name, kind)] = recs
    return out


def _storable(content, *engines):
    return {
        t: [r for r in recs if all(_fits(e, r[0]) for e in engines)] for t, recs in content.items()
    }


def _tables(*names: str, records: int = 0) -> dict[TableInfo, list]:
    """Plain tables with ``records`` records each (examples below)."""
    return {TableInfo(n): [(b"k%d" % i, b"v") for i in range(records)] for n in names}


@pytest.mark.parametrize(("src", "dst"), PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=contents())
# Examples that failed once, each run on the pairs that admit all its names (grouped by
# the engines that refuse them, to keep the run short):
# - SQL engines: SQLITE_ (turso-to-helixdb) and sqlite_x are reserved by SQLite,
#   alembic_version by Alembic, and a and A are one table there;
@example(content=_tables("SQLITE_", "sqlite_x", "alembic_version", "a", "A", records=1))
# - Turso: É and é are one table; any pair: RocksDB's default column family, empty;
@example(content=_tables("É", "é", "default"))
# - never admitted: the metadata's name and the upgrades' private prefix.
@example(content=_tables("__sm_tmp__1", "__statemigrate__", records=1))
def test_convert_every_pair_exactly(src, dst, content):
    assume(admitted((t.name for t in content), src, dst))
    src_e, dst_e = get_engine(src), get_engine(dst)
    content = _storable(content, src, dst)
    tmp = Path(tempfile.mkdtemp(prefix="sm-rt-"))
    try:
        a = write_store(
            src_e,
            tmp / f"a.{src}",
            content,
            metadata={"schema": b"demo", "revision": b'["r1"]'},
            batch=4,
        )
        report = convert(f"{src}:{a}", f"{dst}:{tmp / ('b.' + dst)}", batch_records=3)
        assert report.verified
        got = read_store(dst_e, tmp / f"b.{dst}")
        assert got["tables"] == content_as_data(content)
        assert got["metadata"]["revision"] == b'["r1"]' and got["metadata"]["schema"] == b"demo"
        assert "checkpoint" not in got["metadata"]
        assert report.store_digest == content_digest(content)
        assert checksum(f"{dst}:{tmp / ('b.' + dst)}").digest == content_digest(content)
        assert verify(f"{src}:{a}", f"{dst}:{tmp / ('b.' + dst)}").equal
        assert not list(tmp.glob("*.partial*")) and not list(tmp.glob("*.lock"))
    finally:
        shutil.rmtree(tmp)


def test_property_tests_follow_the_loaded_profile():
    """``@settings`` here sets sizes only: derandomize and the database come from the
    profile (tests/conftest.py), so ``make test`` draws the same examples every run."""
    used = test_convert_every_pair_exactly._hypothesis_internal_use_settings  # type: ignore[attr-defined]
    assert used.derandomize == settings.default.derandomize
    assert used.database == settings.default.database
