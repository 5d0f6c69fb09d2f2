"""redb → redb by redb's own means: the file copied and made clean by the redb version
that writes its format, and format 2 → 3 by redb 2.6's own ``Database::upgrade``.

The files are made by the real crates (``fixtures/redb``, written by redb 2.6 itself)
or by the batch path; every native result is compared with what the batch path
(forced by naming every table) writes from the same source: tables with their
recorded redb types, records, metadata, the report.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from statemigrate import convert
from statemigrate.engines.redb import read_header
from statemigrate.engines.redb.tables import respelt
from statemigrate.errors import StoreBusyError
from statemigrate.model import TableInfo, TableKind
from statemigrate.registry import get_engine
from statemigrate.testing.phases import Phases
from statemigrate.testing.stores import leftovers, read_store, write_store

REDB = get_engine("redb")
FIXTURES = Path(__file__).resolve().parent.parent / "fixtures" / "redb"
UPGRADED = "copying natively (redb file copy, upgraded by redb 2.6)"


def tables_of(path: Path) -> list[TableInfo]:
    with REDB.open_reader(path) as reader:
        return reader.list_tables()


def typed_format2(tmp: Path) -> Path:
    """The tables of redb 2.6's own format-2 fixture whose types redb 2.x and 4.x
    spell alike (no tuple, array, option), copied by the batch path into a new format-2
    file with their exact stored types; user-defined key types asserted bytewise."""
    fixture = FIXTURES / "redb2-format2.redb"
    keep = [t.name for t in tables_of(fixture) if not respelt(t.meta)]
    assert {"u64_keys", "str_keys", "multimap", "custom_fixed", "plain"} <= set(keep)
    path = tmp / "typed2.redb"
    bytewise = {"bytewise_key_types": ("fixture::RevId", "fixture::ShortLex")}
    assert convert(str(fixture), str(path), tables=keep, destination_options=bytewise).verified
    assert read_header(path)["format"] == 2
    return path


def stored_types(path: Path) -> list[tuple[str, TableKind, dict[str, object]]]:
    """Each table's name, kind and stored redb types, without the file format."""
    out = []
    for t in tables_of(path):
        redb = (t.meta or {}).get("redb") or {}
        out.append((t.name, t.kind, {k: v for k, v in redb.items() if k != "format"}))
    return out


def native_and_batch(src: Path, tmp: Path, options: dict[str, object]) -> tuple[Phases, Path, Path]:
    """The convert of ``src`` with ``options``, and the batch path's (every table named)."""
    native, progress = tmp / "native.redb", Phases()
    report = convert(str(src), str(native), destination_options=options, progress=progress)
    batch, forced = tmp / "batch.redb", Phases()
    names = [t.name for t in tables_of(src)]
    again = convert(
        str(src), str(batch), tables=names, destination_options=options, progress=forced
    )
    assert not forced.native()
    assert report.verified and again.verified
    assert [t.to_json() for t in report.tables] == [t.to_json() for t in again.tables]
    assert report.store_digest == again.store_digest
    return progress, native, batch


def test_format_2_to_3_is_redb_26s_own_upgrade_and_equals_the_batch_path(tmp_path: Path) -> None:
    src = typed_format2(tmp_path)
    opts = {"redb_format": 3, "bytewise_key_types": ("fixture::RevId", "fixture::ShortLex")}
    progress, native, batch = native_and_batch(src, tmp_path, opts)

    assert progress.native() and UPGRADED in progress.phases
    assert read_header(native)["format"] == read_header(batch)["format"] == 3
    assert not read_header(native)["needs_repair"]
    # Read back through redb 4.x: the same tables, the same stored types, the same records.
    assert [(t.name, t.kind, t.meta) for t in tables_of(native)] == [
        (t.name, t.kind, t.meta) for t in tables_of(batch)
    ]
    assert read_store(REDB, native) == read_store(REDB, batch) == read_store(REDB, src)
    assert leftovers(native) == []


def test_the_upgrade_of_custom_order_tables_needs_no_bytewise_key(
    tmp_path: Path, fixture_maker
) -> None:
    """``Database::upgrade`` keeps the app's own key order, so the upgrade of a file with
    user-defined key types asks for no ``--bytewise-key`` (the batch loop, which writes
    keys in byte order, does): the real redb 4.x opens the upgraded file, which holds
    the source's tables, types and records in the source's order."""
    src = typed_format2(tmp_path)
    assert "custom_fixed" in [t.name for t in tables_of(src)]
    dst, progress = tmp_path / "up.redb", Phases()
    report = convert(str(src), str(dst), destination_options={"redb_format": 3}, progress=progress)
    assert report.verified
    assert progress.native() and UPGRADED in progress.phases
    assert read_header(dst)["format"] == 3
    assert fixture_maker("savepoints", "4", dst) == "0"  # redb 4.x opens it
    assert stored_types(dst) == stored_types(src)
    assert read_store(REDB, dst) == read_store(REDB, src)


def test_the_upgrade_leaves_the_apps_persistent_savepoint_behind(
    tmp_path: Path, fixture_maker
) -> None:
    """A convert carries no persistent savepoint: a format-2 file holding one (made by
    redb 2.6 itself) upgrades natively to a format-3 file with none (as redb 4.x counts
    them), equal to the batch path; the source keeps its savepoint."""
    src = typed_format2(tmp_path)
    fixture_maker("savepoint", "2", src)
    assert fixture_maker("savepoints", "2", src) == "1"
    opts = {"redb_format": 3, "bytewise_key_types": ("fixture::RevId", "fixture::ShortLex")}
    progress, native, batch = native_and_batch(src, tmp_path, opts)
    assert progress.native() and UPGRADED in progress.phases
    assert read_header(native)["format"] == 3
    assert fixture_maker("savepoints", "4", native) == "0"
    assert fixture_maker("savepoints", "2", src) == "1"
    assert read_store(REDB, native) == read_store(REDB, batch) == read_store(REDB, src)


def test_same_format_copy_of_redb_26s_fixture_keeps_every_table(tmp_path: Path) -> None:
    """No option: the file as it was, types of every kind (tuples, arrays, options and
    user-defined ones too) in redb 2.6's own spelling."""
    src = tmp_path / "src.redb"
    shutil.copyfile(FIXTURES / "redb2-format2.redb", src)
    dst, progress = tmp_path / "dst.redb", Phases()
    assert convert(str(src), str(dst), progress=progress).verified
    assert progress.native() and "copying natively (redb file copy)" in progress.phases
    assert read_header(dst)["format"] == 2
    assert [(t.name, t.meta) for t in tables_of(dst)] == [(t.name, t.meta) for t in tables_of(src)]
    assert read_store(REDB, dst) == read_store(REDB, src)


def test_an_upgrade_that_would_respell_types_takes_the_batch_path(tmp_path: Path) -> None:
    """Tuples, arrays, options and versioned values of redb 2.x's layout are spelt anew
    by the batch path for format 3; ``Database::upgrade`` would keep them: declined."""
    src = tmp_path / "src.redb"
    content = {
        TableInfo("events", TableKind.VERSIONED): [(b"k%d" % i, b"v", i) for i in range(50)],
        TableInfo("settings"): [(b"theme", b"dark")],
    }
    write_store(REDB, src, content, {"schema": b"s"}, options={"redb_format": 2})
    assert any(respelt(t.meta) for t in tables_of(src))
    progress = Phases()
    report = convert(
        str(src),
        str(tmp_path / "dst.redb"),
        destination_options={"redb_format": 3},
        progress=progress,
    )
    assert not progress.native() and report.verified
    assert read_header(tmp_path / "dst.redb")["format"] == 3


def test_format_3_to_2_takes_the_batch_path(tmp_path: Path) -> None:
    src = tmp_path / "src.redb"
    write_store(REDB, src, {TableInfo("settings"): [(b"a", b"1"), (b"b", b"2")]})
    progress = Phases()
    dst = tmp_path / "dst.redb"
    assert convert(
        str(src), str(dst), destination_options={"redb_format": 2}, progress=progress
    ).verified
    assert not progress.native() and read_header(dst)["format"] == 2


def test_a_commit_during_the_copy_is_refused_as_busy(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """redb commits by rewriting the header: a header that changed while the bytes were
    copied (what a redb 4.3+ app in shared mode could do) is exit 3, nothing placed."""
    import statemigrate.engines.redb.reader as reader_module

    src = tmp_path / "src.redb"
    write_store(REDB, src, {TableInfo("settings"): [(b"a", b"1")]})
    real_copy = reader_module.copy_file_written_back

    def copy_then_commit(a: Path, b: Path) -> None:
        real_copy(a, b)
        with open(src, "r+b") as f:  # what a commit does to the header's commit slot
            f.seek(64 + 8)
            f.write(b"\x55")

    monkeypatch.setattr(reader_module, "copy_file_written_back", copy_then_commit)
    dst = tmp_path / "dst.redb"
    with pytest.raises(StoreBusyError, match="committed to the file while it was copied") as err:
        convert(str(src), str(dst), progress=Phases())
    assert err.value.exit_code == 3
    assert not dst.exists()
