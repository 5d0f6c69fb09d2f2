"""The portable dump: its checksums are checked, and the format is what DESIGN.md says."""

from __future__ import annotations

import base64
import inspect
import json
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from statemigrate.engines.jsonl import JsonlEngine
from statemigrate.errors import DestinationError, SourceError
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


# The stamp is the header's documented "schema" and "revision" (DESIGN.md, "The portable
# dump"); the "meta" maps of the header and footer are read too (dumps of 0.1).

STAMP = {"schema": b"demo", "revision": b'["r1"]'}


def _lines(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def _rewrite(path: Path, lines: list[dict]) -> None:
    """Write ``lines`` back as a dump, the footer's offsets moved to the table lines."""
    out, offsets = b"", {}
    for obj in lines[:-1]:
        if "table" in obj:
            offsets[obj["table"]] = len(out)
        out += (json.dumps(obj) + "\n").encode()
    footer = lines[-1]
    for entry in footer["tables"]:
        entry["offset"] = offsets[entry["table"]]
    path.write_bytes(out + (json.dumps(footer) + "\n").encode())


def _b64(raw: bytes) -> str:
    return base64.b64encode(raw).decode()


def test_a_dump_written_to_the_contract_reads_with_its_stamp(tmp_path):
    path = _dump(tmp_path)
    lines = _lines(path)
    assert lines[0]["schema"] == "demo" and lines[0]["revision"] == ["r1"]
    del lines[0]["meta"], lines[-1]["meta"]  # what DESIGN.md's header has, nothing more
    _rewrite(path, lines)
    got = read_store(JsonlEngine, path)
    assert got["metadata"] == STAMP
    assert got["tables"]["s"] == ("versioned", [(b"a", b"x", 2**64 - 1)])


@pytest.mark.parametrize("where", ["header", "footer meta", "header meta"])
def test_the_header_fields_are_the_stamp_whatever_the_meta_maps_say(tmp_path, where):
    path = _dump(tmp_path)
    lines = _lines(path)
    if where == "header":
        lines[0]["revision"], lines[0]["schema"] = ["r2", "r3"], "other"
        want = {"schema": b"other", "revision": b'["r2", "r3"]'}
    else:
        meta = lines[0 if where == "header meta" else -1]["meta"]
        meta["revision"], meta["schema"] = _b64(b'["r9"]'), _b64(b"edited")
        want = STAMP
    _rewrite(path, lines)
    assert read_store(JsonlEngine, path)["metadata"] == want


def test_a_header_without_the_fields_reads_the_meta_maps(tmp_path):
    """A 0.1 dump whose stamp the header fields could not show (null), and one whose
    header has no such fields at all: the meta maps' entries, byte for byte."""
    path = _dump(tmp_path)
    lines = _lines(path)
    lines[0]["schema"] = lines[0]["revision"] = None
    lines[-1]["meta"]["revision"] = _b64(b'["a","b"]')  # spaced otherwise: kept as it is
    _rewrite(path, lines)
    want = {"schema": b"demo", "revision": b'["a","b"]'}
    assert read_store(JsonlEngine, path)["metadata"] == want
    del lines[0]["schema"]  # no such field at all
    lines[0]["revision"] = ["a", "b"]  # the meta map's ids: its bytes are kept
    _rewrite(path, lines)
    assert read_store(JsonlEngine, path)["metadata"] == want


@pytest.mark.parametrize(
    "field, value",
    [("schema", 5), ("schema", ["demo"]), ("revision", "r1"), ("revision", [1]), ("revision", {})],
)
def test_a_header_field_of_the_wrong_type_is_refused(tmp_path, field, value):
    path = _dump(tmp_path)
    lines = _lines(path)
    lines[0][field] = value
    _rewrite(path, lines)
    with pytest.raises(SourceError, match=f"header is damaged .*its {field} must be"):
        read_store(JsonlEngine, path)


def test_a_stamp_the_header_fields_cannot_show_stays_in_meta(tmp_path):
    meta = {"schema": b"\xff\xfe not UTF-8", "revision": b"not a JSON list", "other": b"\x00"}
    path = write_store(JsonlEngine, tmp_path / "d.jsonl", {TableInfo("t"): []}, metadata=meta)
    head = _lines(path)[0]
    assert head["schema"] is None and head["revision"] is None
    assert read_store(JsonlEngine, path)["metadata"] == meta


def test_the_stamp_cannot_change_once_the_header_is_written(tmp_path):
    path = tmp_path / "d.jsonl"
    table = TableInfo("t")
    with JsonlEngine.create_writer(path) as writer:
        writer.put_metadata(STAMP)
        writer.create_table(table)
        writer.write_batch(table, [(b"a", b"1")])
        size = path.stat().st_size
        with pytest.raises(DestinationError, match="set the schema stamp before the first table"):
            writer.write_batch(table, [(b"b", b"2")], {"schema": b"other"})
        with pytest.raises(DestinationError, match="holds its revision"):
            writer.put_metadata({"revision": None})
        assert path.stat().st_size == size  # the refused batch wrote nothing
        writer.put_metadata({"revision": b'["r1"]', "note": b"x"})  # the same stamp: fine
        writer.finish()
    got = read_store(JsonlEngine, path)
    assert got["metadata"] == {**STAMP, "note": b"x"}
    assert got["tables"] == {"t": ("plain", [(b"a", b"1")])}


# The checkpoint beside a dump being written holds the offset of the last complete batch
# and the metadata changed since the header, whatever the number of tables (hostile
# report Q1: it listed every table and was rewritten after every batch).


def test_the_checkpoint_does_not_grow_with_the_tables_written(tmp_path):
    path = tmp_path / "d.jsonl"
    sidecar = Path(str(path) + ".checkpoint")
    carried = {**STAMP, **{f"table:t{i:04d}": b'{"x": 1}' for i in range(200)}}
    sizes = []
    with JsonlEngine.create_writer(path) as writer:
        writer.put_metadata(carried)
        for i in range(200):
            table = TableInfo(f"t{i:04d}", TableKind.VERSIONED if i % 2 else TableKind.PLAIN)
            writer.create_table(table)
            record = (b"k", b"v", i) if i % 2 else (b"k", b"v")
            writer.write_batch(table, [record], {"checkpoint": b'{"table": "same size"}'})
            state = json.loads(sidecar.read_text())
            assert state == {
                "format": 1,
                "offset": path.stat().st_size,
                "changes": {"checkpoint": _b64(b'{"table": "same size"}')},
            }
            sizes.append(sidecar.stat().st_size)
        writer.put_metadata({"checkpoint": None})
        assert json.loads(sidecar.read_text())["changes"] == {}
        writer.finish()
    assert not sidecar.exists()
    # Only the offset's digits may lengthen it (4 of them, then 5).
    assert max(sizes) - min(sizes) <= 1, (min(sizes), max(sizes))
    assert read_store(JsonlEngine, path)["metadata"] == carried


# A writer killed (SIGKILL) at any step resumes exactly: open_writer truncates the dump at
# the checkpoint, rebuilds its tables from the table and batch lines and takes up the
# metadata, and the finished dump holds every record once.

KILLED_WRITER = r"""
import os, signal, sys
from pathlib import Path
from statemigrate.engines.jsonl import JsonlEngine
from statemigrate.model import TableInfo, TableKind
{lib}
path, tables, stop = Path(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
writer = JsonlEngine.create_writer(path)
writer.put_metadata({{"schema": b"demo", "revision": b'["r1"]', "checkpoint": b"start"}})
if stop != "start":
    for i in range(tables):
        write_table(writer, i)
    writer.create_table(table(tables))
    if stop != "table":
        writer.write_batch(table(tables), records(tables, 0), {{"checkpoint": b"%d.0" % tables}})
os.kill(os.getpid(), signal.SIGKILL)
"""


def table(i: int) -> TableInfo:
    """Table ``i`` of the killed writer's dump (every third one versioned)."""
    return TableInfo(f"t{i:04d}", TableKind.VERSIONED if i % 3 == 0 else TableKind.PLAIN)


def records(i: int, batch: int) -> list[tuple]:
    """Batch ``batch`` (0 or 1) of table ``i``: two records."""
    keys = [b"k%d" % (2 * batch), b"k%d" % (2 * batch + 1)]
    if i % 3 == 0:
        return [(k, b"v%d" % i, 2**64 - 1 - i) for k in keys]
    return [(k, b"v%d" % i) for k in keys]


def write_table(writer, i: int, first_batch: int = 0, create: bool = True) -> None:
    """Write table ``i`` from ``first_batch`` on, a checkpoint entry with each batch."""
    if create:
        writer.create_table(table(i))
    for batch in range(first_batch, 2):
        writer.write_batch(table(i), records(i, batch), {"checkpoint": b"%d.%d" % (i, batch)})
    writer.put_metadata({"checkpoint": b"%d" % (i + 1)})


def _kill_writer(path: Path, tables: int, stop: str) -> None:
    """Write ``tables`` tables in a child process, then SIGKILL it at ``stop``."""
    lib = "\n\n".join(inspect.getsource(f) for f in (table, records, write_table))
    run = subprocess.run(  # a hang guard only: the child takes well under a second
        [sys.executable, "-c", KILLED_WRITER.format(lib=lib), str(path), str(tables), stop],
        check=False,
        timeout=120,
    )
    assert run.returncode == -signal.SIGKILL, run


def _old_checkpoint(path: Path, state: dict) -> dict:
    """The checkpoint statemigrate 0.1 kept for the same dump: every table and metadata."""
    tables, batch_no, pos = [], 0, 0
    with open(path, "rb") as f:
        for line in f:
            obj = json.loads(line)
            if "table" in obj:
                entry = {"name": obj["table"], "kind": obj["kind"], "meta": {}, "offset": pos}
                tables.append({**entry, "count": 0, "sum": 0})
            elif "batch" in obj:
                tables[-1]["count"] += obj["records"]
                tables[-1]["sum"] = (tables[-1]["sum"] + int(obj["sum"], 16)) % 2**128
                batch_no = obj["batch"]
            pos += len(line)
    head = json.loads(path.read_text().split("\n")[0]) if pos else {"meta": {}}
    meta = {k: base64.b64decode(v) for k, v in head["meta"].items()}
    meta.update({k: base64.b64decode(v) for k, v in state["changes"].items()})
    return {
        "offset": state["offset"],
        "meta": {k: _b64(v) for k, v in meta.items()},
        "tables": tables,
        "batch_no": batch_no,
        "header_written": pos > 0,
    }


@pytest.mark.parametrize("checkpoint", ["current", "0.1"])
@pytest.mark.parametrize("stop", ["start", "table", "batch", "torn batch"])
def test_a_killed_writer_resumes_exactly(tmp_path, stop, checkpoint):
    path, tables = tmp_path / "d.jsonl", 40
    sidecar = Path(str(path) + ".checkpoint")
    _kill_writer(path, tables, "batch" if stop == "torn batch" else stop)
    if checkpoint == "0.1":
        sidecar.write_text(json.dumps(_old_checkpoint(path, json.loads(sidecar.read_text()))))
    if stop == "torn batch":  # killed while writing the next batch: bytes past the checkpoint
        with open(path, "ab") as f:
            f.write(b'{"k":"azI=","v":"dg=="}\n{"batch": 99, "rec')
    done = 0 if stop == "start" else tables
    with JsonlEngine.open_writer(path) as writer:
        want_cp = {"start": b"start", "table": b"%d" % tables}.get(stop, b"%d.0" % tables)
        assert writer.metadata() == {**STAMP, "checkpoint": want_cp}
        in_progress = [] if stop == "start" else [table(tables)]
        want_tables = [table(i) for i in range(done)] + in_progress
        assert writer.list_tables() == want_tables
        if stop != "start":  # the table in progress, as the pipeline takes it up
            write_table(writer, tables, 0 if stop == "table" else 1, create=False)
        for i in range(done + (stop != "start"), tables + 5):
            write_table(writer, i)
        writer.put_metadata({"checkpoint": None})
        writer.finish()
    assert not sidecar.exists()
    got = read_store(JsonlEngine, path)
    assert got["metadata"] == STAMP
    want = {}
    for i in range(tables + 5):
        t = table(i)
        want[t.name] = (t.kind.value, records(i, 0) + records(i, 1))
    assert got["tables"] == want
    batches = [obj["batch"] for obj in _lines(path) if "batch" in obj]
    assert batches == list(range(1, len(batches) + 1)) and len(batches) == 2 * (tables + 5)


@pytest.mark.parametrize(
    "damage, message",
    [
        ("shorter", "fewer than the"),
        ("no header", "does not start with a header line"),
        ("bad batch line", "the dump cannot be resumed"),
    ],
)
def test_a_partial_dump_that_does_not_match_its_checkpoint_is_refused(tmp_path, damage, message):
    path = tmp_path / "d.jsonl"
    _kill_writer(path, 3, "batch")
    data = path.read_bytes()
    if damage == "shorter":
        path.write_bytes(data[:-10])
    elif damage == "no header":
        path.write_bytes(data.replace(b'{"statemigrate"', b'{"statemigrat_"', 1))
    else:
        path.write_bytes(data.replace(b'"records": 2', b'"records": -2', 1))
    with pytest.raises(DestinationError, match=message), JsonlEngine.open_writer(path) as writer:
        writer.list_tables()
