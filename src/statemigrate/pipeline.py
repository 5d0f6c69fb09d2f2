"""Conversion: the plumbing every engine plugs into, written once.

Records stream from one consistent snapshot of the source, in key order, in batches
bounded by count and bytes; each batch is digested (natively) and committed to
``DST.partial`` together with a checkpoint. The destination is then read back and its
digests compared with the source's, synced, and only then renamed into place.
"""

from __future__ import annotations

import contextlib
import fcntl
import json
import os
import shutil
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .checkpoint import Checkpoint, fingerprint
from .digest import Digest, store_digest
from .engines.base import (
    DEFAULT_BATCH_BYTES,
    DEFAULT_BATCH_RECORDS,
    META_CHECKPOINT,
    META_TABLE_PREFIX,
    Engine,
    Reader,
)
from .errors import DestinationError, InterruptedByUser, SourceError, StoreBusyError, UsageError
from .fsutil import crash_point, fsync_tree, place, recover_placement, remove_path, store_size
from .locks import busy_message, store_holder
from .model import TableInfo, TableKind
from .perms import keep_owner, no_wider_than
from .prefetch import prefetch
from .progress import Progress
from .registry import get_engine, parse_store, resolve_source

SUFFIX_ENGINES = {
    ".sqlite": "sqlite",
    ".sqlite3": "sqlite",
    ".db": "sqlite",
    ".jsonl": "jsonl",
    ".redb": "redb",
    ".rocksdb": "rocksdb",
    ".lmdb": "lmdb",
    ".libsql": "libsql",
    ".turso": "turso",
    ".helixdb": "helixdb",
}


@dataclass
class TableReport:
    """One table's outcome."""

    name: str
    kind: str
    records: int
    bytes: int
    digest: str

    def to_json(self) -> dict[str, Any]:
        return dict(self.__dict__)


@dataclass
class ConvertReport:
    """What :func:`convert` did."""

    source: str
    source_engine: str
    destination: str
    destination_engine: str
    tables: list[TableReport] = field(default_factory=list)
    store_digest: str = ""
    verified: bool = False
    resumed: bool = False
    seconds: float = 0.0

    @property
    def records(self) -> int:
        return sum(t.records for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        out = {k: v for k, v in self.__dict__.items() if k != "tables"}
        out["tables"] = [t.to_json() for t in self.tables]
        out["records"] = self.records
        return out


def resolve_destination(spec: str, engine: str | None) -> tuple[type[Engine], Path]:
    """The destination's engine (given, ``ENGINE:PATH``, or from the file suffix) and path."""
    eng, path = parse_store(spec, engine)
    if eng is None:
        name = SUFFIX_ENGINES.get(path.suffix.lower())
        if name is None:
            raise UsageError(
                f"cannot tell the destination engine of {path}", hint="name it with --to ENGINE"
            )
        eng = get_engine(name)
    return eng, path


def partial_path(final: Path) -> Path:
    """Where a destination is built before it is renamed into place."""
    return final.with_name(final.name + ".partial")


@contextmanager
def destination_lock(final: Path) -> Iterator[None]:
    """One convert per destination: an exclusive flock on ``DST.lock``."""
    lock = final.with_name(final.name + ".lock")
    while True:
        try:
            fd = os.open(lock, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise DestinationError(f"{final.parent}: cannot write here ({exc.strerror})") from exc
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError as exc:
            pid = os.pread(fd, 32, 0).decode(errors="replace").strip() or "unknown"
            os.close(fd)
            raise StoreBusyError(
                f"{final}: another statemigrate (pid {pid}) is writing this destination"
            ) from exc
        # The holder unlinks the file before it releases it: a lock taken on a file
        # that is no longer at the path protects nothing, so take the new one.
        try:
            same = os.path.samestat(os.fstat(fd), os.stat(lock))
        except FileNotFoundError:
            same = False
        if same:
            break
        os.close(fd)
    try:
        os.ftruncate(fd, 0)
        os.pwrite(fd, str(os.getpid()).encode(), 0)
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)
    finally:
        os.close(fd)


def check_space(engine: type[Engine], source: Path, dest_dir: Path, force: bool) -> None:
    """Refuse (exit 5) when the destination will not fit, unless forced."""
    need = int(store_size(source) * engine.space_factor)
    free = shutil.disk_usage(dest_dir).free
    if need > free and not force:
        raise DestinationError(
            f"{dest_dir}: not enough free space: the {engine.name} destination needs about "
            f"{need:,} bytes, {free:,} are free",
            hint="free some space, or pass --force to try anyway",
        )


def open_source(engine: type[Engine], path: Path, options: dict[str, Any] | None) -> Reader:
    """The engine's reader, with a file-system refusal turned into a source error (exit 4)."""
    try:
        return engine.open_reader(path, options)
    except PermissionError as exc:
        raise SourceError(f"{path}: permission denied ({exc.filename or path})") from exc
    except OSError as exc:
        raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc


def select_tables(tables: list[TableInfo], wanted: list[str] | None) -> list[TableInfo]:
    """The source's tables, or only those named (each must exist)."""
    if not wanted:
        return tables
    by_name = {t.name: t for t in tables}
    missing = [n for n in wanted if n not in by_name]
    if missing:
        raise UsageError(
            f"no table {missing[0]!r} in the source; it has: {', '.join(by_name) or '(none)'}"
        )
    return [by_name[n] for n in sorted(set(wanted), key=lambda n: n.encode())]


def digest_checked(
    batch: list, table: TableInfo, after: bytes | None, where: str
) -> tuple[Digest, int]:
    """The batch's digest and payload bytes, refusing records out of strictly ascending key order."""
    from . import _native

    try:
        count, total, unsorted, nbytes = _native.batch_digest(batch, table.versioned)
    except (ValueError, TypeError, OverflowError) as exc:
        raise SourceError(
            f"{where}: table {table.name!r} holds a record outside the model ({exc})"
        ) from exc
    if unsorted >= 0 or (after is not None and batch and batch[0][0] <= after):
        raise SourceError(f"{where}: table {table.name!r} is not read in key order")
    return Digest(count, total), nbytes


def digest_store(
    reader: Reader,
    tables: list[TableInfo],
    where: str,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] | None = None,
    hint: str | None = None,
) -> dict[str, Digest]:
    """Per-table digests of a store, streaming; ``should_stop`` is polled between batches."""
    out = {}
    for table in tables:
        total = Digest()
        last = None
        if progress:
            progress.start_table(table.name, None)
        for batch in reader.read_batches(table):
            if should_stop is not None and should_stop():
                raise InterruptedByUser("interrupted; the work done so far is kept", hint=hint)
            d, nbytes = digest_checked(batch, table, last, where)
            total = total + d
            last = batch[-1][0]
            if progress:
                progress.advance(d.count, nbytes)
        if progress:
            progress.end_table()
        out[table.name] = total
    return out


def check_keys(engine: type[Engine], reader: Reader, tables: list[TableInfo]) -> None:
    """Check every key against the destination's limits before anything is written."""
    caps = engine.capabilities
    if caps.min_key_len == 0 and caps.max_key_len is None:
        return
    lo, hi = caps.min_key_len, caps.max_key_len or 2**63
    for table in tables:
        for batch in reader.read_batches(table):
            for rec in batch:
                if not lo <= len(rec[0]) <= hi:
                    engine.check_key(table, rec[0])


def convert(
    source: str,
    destination: str,
    *,
    from_engine: str | None = None,
    to_engine: str | None = None,
    tables: list[str] | None = None,
    batch_records: int = DEFAULT_BATCH_RECORDS,
    batch_bytes: int = DEFAULT_BATCH_BYTES,
    overwrite: bool = False,
    verify: bool = True,
    resume: bool = False,
    force: bool = False,
    source_options: dict[str, Any] | None = None,
    destination_options: dict[str, Any] | None = None,
    progress: Progress | None = None,
    should_stop: Callable[[], bool] = lambda: False,
) -> ConvertReport:
    """Convert a store to another engine (or the same one), verified, never in place.

    Args:
        source: the source path, or ``ENGINE:PATH``.
        destination: the destination path, or ``ENGINE:PATH``.
        from_engine: the source engine, when not detected.
        to_engine: the destination engine, when not given in ``destination`` or its suffix.
        tables: only these tables (all by default).
        batch_records: records per batch at most.
        batch_bytes: payload bytes per batch at most (one record may exceed it).
        overwrite: replace an existing destination (kept until the new one verified).
        verify: read the destination back and compare digests before renaming it.
        resume: continue a ``DST.partial`` left by an interrupted run.
        force: skip the free-space check.
        source_options: engine options for the reader.
        destination_options: engine options for the writer.
        progress: receives progress events.
        should_stop: polled between batches; True stops with a resumable checkpoint.

    Returns:
        A :class:`ConvertReport`.

    Raises:
        StateMigrateError: a subclass carrying the exit code of the contract.
    """
    started = time.monotonic()
    progress = progress or Progress()
    if batch_records < 1 or batch_bytes < 1:
        raise UsageError("batch sizes must be positive")
    src_engine, src_path = resolve_source(source, from_engine)
    dst_engine, final = resolve_destination(destination, to_engine)
    if final.absolute() == src_path.absolute():
        raise UsageError("the destination is the source; convert never works in place")
    partial = partial_path(final)
    if not final.parent.is_dir():
        raise DestinationError(f"{final.parent}: no such directory")
    # Everything made from here (lock, .partial, side files) is no wider than the
    # source, nor than the store an --overwrite replaces.
    with no_wider_than(src_path, final), destination_lock(final):
        crash_point("locked")
        recover_placement(final)
        if (final.exists() or final.is_symlink()) and not overwrite:
            raise DestinationError(
                f"{final}: already exists", hint="pass --overwrite to replace it"
            )
        _refuse_if_held(dst_engine, final)
        resumed = False
        checkpoint: Checkpoint | None = None
        finished_before = False  # the .partial was finished (synced) before the process died
        done_mark = _done_mark(partial)
        if dst_engine.store_paths(partial):
            if not resume:
                raise DestinationError(
                    f"{partial}: an interrupted conversion left this behind",
                    hint="pass --resume to continue it, or remove it to start over",
                )
            checkpoint = _load_checkpoint(dst_engine, partial, destination_options)
            # No checkpoint: killed while creating it (start over), or after its last batch,
            # when the finished mark tells so (keep it if it verifies).
            finished_before = checkpoint is None and done_mark.exists()
            if checkpoint is None and not finished_before:
                _remove_store(dst_engine, partial)
        if not finished_before:
            remove_path(done_mark)
        report = ConvertReport(str(src_path), src_engine.name, str(final), dst_engine.name)
        src_fp = fingerprint(src_engine.name, src_path, src_engine.store_paths(src_path)[1:])
        resume_hint = f"run the same command with --resume to finish ({partial} holds it)"
        if checkpoint is not None and checkpoint.source != src_fp:
            raise SourceError(
                f"{src_path}: the source changed since the interrupted conversion",
                hint=f"start over: remove {partial}",
            )
        with open_source(src_engine, src_path, source_options) as reader:
            chosen = select_tables(reader.tables(), tables)
            src_meta = reader.metadata()
            complete = False
            if finished_before:
                # Killed after the last batch (while syncing, verifying, placing): keep the
                # work if it reads back equal to the source, else start over.
                progress.phase("checking the interrupted destination")
                source_digests = digest_store(
                    reader, chosen, str(src_path), None, should_stop, resume_hint
                )
                complete = _partial_is_complete(
                    dst_engine, partial, chosen, source_digests, progress, should_stop, resume_hint
                )
                if not complete:
                    _remove_store(dst_engine, partial)
            if checkpoint is None and not complete:
                check_space(dst_engine, src_path, final.parent, force)
                progress.phase("checking keys")
                check_keys(dst_engine, reader, chosen)
            progress.phase("converting")
            if complete:
                pass
            elif checkpoint is None:
                checkpoint = Checkpoint(src_fp)
                writer = dst_engine.create_writer(partial, destination_options)
                carried = {
                    k: v
                    for k, v in src_meta.items()
                    if k != META_CHECKPOINT and not k.startswith(META_TABLE_PREFIX)
                }
                carried.update(
                    {
                        META_TABLE_PREFIX + t.name: json.dumps(t.meta).encode()
                        for t in chosen
                        if t.meta
                    }
                )
                carried[META_CHECKPOINT] = checkpoint.to_bytes()
                writer.put_metadata(carried)
                crash_point("created")
            else:
                resumed = True
                writer = dst_engine.open_writer(partial, destination_options)
            if not complete:
                assert checkpoint is not None
                try:
                    source_digests = _copy_tables(
                        reader,
                        writer,
                        chosen,
                        checkpoint,
                        batch_records,
                        batch_bytes,
                        progress,
                        should_stop,
                        str(src_path),
                        partial,
                    )
                    writer.put_metadata({META_CHECKPOINT: None})
                    crash_point("copied")
                    progress.phase("syncing")
                    writer.finish()
                except BaseException:
                    # The first error is the one to report (a full disk, a signal): a store
                    # that then also fails to close must not hide it.
                    with contextlib.suppress(Exception):
                        writer.close()
                    raise
                writer.close()
        if not complete:
            _mark_done(done_mark)
        crash_point("finished")
        report.resumed = resumed or complete
        if complete:
            report.verified = True
        elif verify:
            progress.phase("verifying")
            _verify_built(
                src_engine,
                src_path,
                source_options,
                dst_engine,
                partial,
                chosen,
                source_digests,
                resumed,
                progress,
                should_stop,
                resume_hint,
            )
            report.verified = True
        crash_point("verified")
        keep_owner(partial, final)
        fsync_tree(partial)
        crash_point("synced")
        progress.phase("renaming into place")
        _refuse_if_held(dst_engine, final)
        place(partial, final)
        crash_point("placed")
        for sidecar in dst_engine.store_paths(partial):
            remove_path(sidecar)
        remove_path(done_mark)
    sizes = source_digests
    report.tables = [
        TableReport(t.name, t.kind.value, sizes[t.name].count, 0, sizes[t.name].hex())
        for t in chosen
    ]
    report.store_digest = store_digest((t.name, t.kind, sizes[t.name]) for t in chosen)
    report.seconds = time.monotonic() - started
    progress.close()
    return report


def _load_checkpoint(
    engine: type[Engine], partial: Path, options: dict[str, Any] | None
) -> Checkpoint | None:
    try:
        writer = engine.open_writer(partial, options)
    except (DestinationError, SourceError, OSError):
        return None  # nothing committed that we can trust (killed while creating it): start over
    try:
        raw = writer.metadata().get(META_CHECKPOINT)
    finally:
        writer.close()
    return Checkpoint.from_bytes(raw) if raw else None


def _refuse_if_held(engine: type[Engine], final: Path) -> None:
    """Replacing a store that an app holds open would lose what it writes next: exit 3."""
    if final.exists():
        holder = store_holder(engine.store_paths(final))
        if holder is not None:
            raise StoreBusyError(
                busy_message(final, holder), hint="stop the app, then run the same command"
            )


def _partial_is_complete(
    engine: type[Engine],
    partial: Path,
    chosen: list[TableInfo],
    source_digests: dict[str, Digest],
    progress: Progress,
    should_stop: Callable[[], bool],
    hint: str,
) -> bool:
    """Whether a ``.partial`` without checkpoint holds the whole source already."""
    try:
        _check_built(engine, partial, chosen, source_digests, progress, should_stop, hint)
    except (DestinationError, SourceError):
        return False
    return True


def _remove_store(engine: type[Engine], path: Path) -> None:
    for p in engine.store_paths(path):
        remove_path(p)
    remove_path(_done_mark(path))


def _done_mark(partial: Path) -> Path:
    """Beside a ``.partial`` whose every batch is written and synced (writer.finish())."""
    return partial.with_name(partial.name + ".done")


def _mark_done(mark: Path) -> None:
    os.close(os.open(mark, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644))
    fsync_tree(mark)  # the file and its directory


def _copy_tables(
    reader: Reader,
    writer: Any,
    chosen: list[TableInfo],
    cp: Checkpoint,
    batch_records: int,
    batch_bytes: int,
    progress: Progress,
    should_stop: Callable[[], bool],
    where: str,
    partial: Path,
) -> dict[str, Digest]:
    """Stream every table into the writer, committing a checkpoint with each batch."""
    digests: dict[str, Digest] = {}
    existing = {t.name for t in writer.list_tables()}
    for table in chosen:
        if table.name in cp.done:
            digests[table.name] = cp.done[table.name]
            continue
        if cp.table == table.name:
            after, total = cp.last_key, cp.so_far
        else:
            after, total = None, Digest()
            if table.name not in existing:
                writer.create_table(table)
            cp.table, cp.last_key, cp.so_far = table.name, None, Digest()
        progress.start_table(table.name, None)
        batches = reader.read_batches(
            table, after, max_records=batch_records, max_bytes=batch_bytes
        )
        for batch in prefetch(batches) if reader.threadsafe_reads else batches:
            d, nbytes = digest_checked(batch, table, after, where)
            total = total + d
            after = batch[-1][0]
            cp.last_key, cp.so_far = after, total
            writer.write_batch(table, batch, {META_CHECKPOINT: cp.to_bytes()})
            crash_point("batch")
            progress.advance(d.count, nbytes)
            if should_stop():
                raise InterruptedByUser(
                    "interrupted; the work done so far is kept",
                    hint=f"run the same command with --resume to finish ({partial} holds it)",
                )
        progress.end_table()
        cp.done[table.name] = total
        cp.table, cp.last_key, cp.so_far = None, None, Digest()
        writer.put_metadata({META_CHECKPOINT: cp.to_bytes()})
        digests[table.name] = total
        if should_stop():
            raise InterruptedByUser(
                "interrupted; the work done so far is kept",
                hint=f"run the same command with --resume to finish ({partial} holds it)",
            )
    return digests


def _verify_built(
    src_engine: type[Engine],
    src_path: Path,
    src_options: Any,
    dst_engine: type[Engine],
    partial: Path,
    chosen: list[TableInfo],
    source_digests: dict[str, Digest],
    resumed: bool,
    progress: Progress,
    should_stop: Callable[[], bool] | None = None,
    hint: str | None = None,
) -> None:
    """Read the destination back and compare with the source's digests."""
    expected = source_digests
    if resumed:
        # Tables done before the interruption were digested by another run: read the
        # source again so that a source changed meanwhile is caught, never mixed.
        with open_source(src_engine, src_path, src_options) as again:
            expected = digest_store(again, chosen, str(src_path), None, should_stop, hint)
        if expected != source_digests:
            raise SourceError(
                f"{src_path}: the source changed while the conversion was interrupted",
                hint=f"start over: remove {partial}",
            )
    _check_built(dst_engine, partial, chosen, expected, progress, should_stop, hint)


def _check_built(
    dst_engine: type[Engine],
    partial: Path,
    chosen: list[TableInfo],
    expected: dict[str, Digest],
    progress: Progress,
    should_stop: Callable[[], bool] | None,
    hint: str | None,
) -> None:
    """The built store holds exactly the chosen tables, with their kinds and digests."""
    try:
        got = _read_built(dst_engine, partial, chosen, progress, should_stop, hint)
    except SourceError as exc:  # the built store does not read back: the destination failed
        raise DestinationError(
            f"verification failed: {exc.message}", hint="the destination was not put in place"
        ) from exc
    for t in chosen:
        if got[t.name] != expected[t.name]:
            raise DestinationError(
                f"{partial}: verification failed for table {t.name!r}: "
                f"{got[t.name].count} records read back, {expected[t.name].count} written",
                hint="the destination was not put in place",
            )


def _read_built(
    dst_engine: type[Engine],
    partial: Path,
    chosen: list[TableInfo],
    progress: Progress,
    should_stop: Callable[[], bool] | None,
    hint: str | None,
) -> dict[str, Digest]:
    with dst_engine.open_reader(partial) as reader:
        built = {t.name: t for t in reader.tables()}
        want = {t.name: t for t in chosen}
        if set(built) != set(want):
            raise DestinationError(
                f"{partial}: verification failed: tables differ ({sorted(set(built) ^ set(want))})",
                hint="the destination was not put in place",
            )
        for name, t in want.items():
            if built[name].kind is not t.kind:
                raise DestinationError(
                    f"{partial}: verification failed: table {name!r} lost its kind"
                )
        crash_point("verifying")
        return digest_store(reader, chosen, str(partial), progress, should_stop, hint)


__all__ = [
    "ConvertReport",
    "TableKind",
    "TableReport",
    "convert",
    "partial_path",
    "resolve_destination",
]
