"""The portable dump: its checksums are checked, and the format is what DESIGN.md says."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

from statemigrate.engines.jsonl import JsonlEngine
from statemigrate.errors import SourceError
from statemigrate.model import TableInfo, TableKind
from statemigrate.testing.stores import read_store, write_store


def _dump(tmp_path: Path) -> Path:
    content = {
        TableInfo("t"): [(b"k%d" % i, b"v%d" % i) for i in range(10)],
        TableInfo("s", TableKind.VERSIONED): [(b"a", b"x", 2**64 - 1)],
    }
    return write_store(
        JsonlEngine,
        tmp_path / "d.jsonl",
        content,
        metadata={"schema": b"demo", "revision": b'["r1"]'},
        batch=4,
    )


def test_the_format(tmp_path):
    lines = [json.loads(line) for line in _dump(tmp_path).read_text().splitlines()]
    assert (
        lines[0]["statemigrate"] == 1
        and lines[0]["schema"] == "demo"
        and lines[0]["revision"] == ["r1"]
    )
    assert lines[1] == {"table": "s", "kind": "versioned"}
    assert lines[2] == {
        "k": base64.b64encode(b"a").decode(),
        "v": base64.b64encode(b"x").decode(),
        "ver": 2**64 - 1,
    }
    assert set(lines[3]) == {"batch", "records", "sum"} and lines[3]["records"] == 1
    assert "footer" in lines[-1] and len(lines[-1]["digest"]) == 32


@pytest.mark.parametrize(
    "damage", ["flip_value", "drop_record", "drop_footer", "bad_batch_sum", "add_record"]
)
def test_damaged_dumps_are_refused(tmp_path, damage):
    path = _dump(tmp_path)
    lines = path.read_text().splitlines()
    idx = next(i for i, line in enumerate(lines) if line.startswith('{"k":"azU'))  # record k5
    if damage == "flip_value":
        lines[idx] = lines[idx].replace('"v":"', '"v":"A')
    elif damage == "drop_record":
        del lines[idx]
    elif damage == "drop_footer":
        lines = lines[:-1]
    elif damage == "bad_batch_sum":
        b = next(i for i in range(idx, len(lines)) if lines[i].startswith('{"batch"'))
        obj = json.loads(lines[b])
        obj["sum"] = "0" * 32
        lines[b] = json.dumps(obj)
    elif damage == "add_record":
        lines.insert(idx, lines[idx].replace("azU", "azVh"))
    path.write_text("\n".join(lines) + "\n")
    with pytest.raises(SourceError):
        read_store(JsonlEngine, path)
