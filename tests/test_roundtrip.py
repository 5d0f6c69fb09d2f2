"""Round trips through every pair of engines: exact content, metadata and digests."""

from __future__ import annotations

import itertools
import shutil
import tempfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from statemigrate import checksum, convert, verify
from statemigrate.model import MAX_VERSION, TableInfo, TableKind
from statemigrate.registry import engine_names, get_engine
from statemigrate.testing.stores import content_as_data, content_digest, read_store, write_store

PAIRS = list(itertools.product(engine_names(), repeat=2))


def _fits(engine, key: bytes) -> bool:
    caps = get_engine(engine).capabilities
    return caps.min_key_len <= len(key) <= (caps.max_key_len or 1 << 62)


@st.composite
def contents(draw):
    names = draw(
        st.lists(
            st.text(min_size=1, max_size=12).filter(
                lambda n: "\x00" not in n and n != "__statemigrate__"
            ),
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


@pytest.mark.parametrize(("src", "dst"), PAIRS, ids=[f"{a}-to-{b}" for a, b in PAIRS])
@settings(
    max_examples=4, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture]
)
@given(content=contents())
def test_convert_every_pair_exactly(src, dst, content):
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
