"""The contract's digest: native batch digest vs the pure-Python reference, and the vectors."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from statemigrate.digest import (
    Digest,
    batch_digest,
    batch_digest_py,
    record_bytes,
    record_hash_py,
    store_digest,
)
from statemigrate.model import MAX_VERSION, TableKind

VECTORS = json.loads((Path(__file__).parent / "data" / "digest_vectors.json").read_text())
b64 = base64.b64decode

keys = st.binary(max_size=40)
values = st.binary(max_size=200)
versions = st.one_of(
    st.sampled_from([0, 1, 2**63 - 1, 2**63, MAX_VERSION]), st.integers(0, MAX_VERSION)
)


@pytest.mark.parametrize("vec", VECTORS["records"], ids=lambda v: v["record_bytes_hex"][:16])
def test_record_vectors(vec):
    key, value, version = b64(vec["key_b64"]), b64(vec["value_b64"]), vec["version"]
    assert record_bytes(key, value, version).hex() == vec["record_bytes_hex"]
    assert record_hash_py(key, value, version) == int(vec["record_hash"], 16)
    rec = (key, value) if version is None else (key, value, version)
    assert batch_digest([rec], version is not None) == Digest(1, int(vec["record_hash"], 16))


def test_table_and_store_vectors():
    parts = []
    for name, t in VECTORS["tables"].items():
        versioned = t["kind"] == "versioned"
        recs = [
            (b64(r["key_b64"]), b64(r["value_b64"]), r["version"])
            if versioned
            else (b64(r["key_b64"]), b64(r["value_b64"]))
            for r in t["records"]
        ]
        d = batch_digest(recs, versioned)
        assert d == Digest(t["count"], int(t["sum"], 16)), name
        parts.append((name, TableKind(t["kind"]), d))
    assert store_digest(parts) == VECTORS["store_digest"]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(keys, values), max_size=50))
def test_native_plain_matches_reference(records):
    assert batch_digest(records, False) == batch_digest_py(records, False)


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(keys, values, versions), max_size=50))
def test_native_versioned_matches_reference(records):
    assert batch_digest(records, True) == batch_digest_py(records, True)


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(keys, values), max_size=60), st.integers(0, 60))
def test_digests_of_adjacent_ranges_add_up(records, cut):
    whole = batch_digest(records, False)
    assert batch_digest(records[:cut], False) + batch_digest(records[cut:], False) == whole


def test_native_reports_order_and_rejects_bad_records():
    from statemigrate import _native

    assert _native.batch_digest([(b"a", b""), (b"b", b"")], False)[2] == -1
    assert _native.batch_digest([(b"b", b""), (b"a", b"")], False)[2] == 1
    assert _native.batch_digest([(b"a", b""), (b"a", b"")], False)[2] == 1
    with pytest.raises(ValueError):
        _native.batch_digest([(b"a", "text")], False)
    with pytest.raises(ValueError):
        _native.batch_digest([(b"a", b"v")], True)
    with pytest.raises(OverflowError):
        _native.batch_digest([(b"a", b"v", 2**64)], True)
