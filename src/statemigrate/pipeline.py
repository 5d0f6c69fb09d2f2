"""Conversion: the plumbing every engine plugs into, written once.

Records stream from one consistent snapshot of the source, in key order, in batches
bounded by count and bytes; each batch is digested (natively) and committed to
``DST.partial`` together with a checkpoint. The destination is then read back and its
digests compared with the source's, synced, and only then renamed into place.
"""

from __future__ import annotations

import contextlib
import errno
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
from .fsutil import (
    crash_point,
    fsync_tree,
    is_within,
    kind_of,
    lexists,
    place,
    recover_placement,
    remove_path,
    store_size,
)
from .locks import busy_message, require_fcntl, store_holder
from .model import TableInfo, TableKind, check_source_tables
from .perms import keep_owner, no_wider_than
from .prefetch import prefetch
from .progress import Progress
from .registry import engine_for_suffix, parse_store, resolve_source


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
    # --resume found the destination already in place and equal to the source (the
    # run that placed it was killed after the rename): nothing was written.
    already_complete: bool = False
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
    if path.name in ("", ".", ".."):
        raise UsageError(f"{spec}: name the destination's file or directory, not {path}")
    if eng is None:
        eng = engine_for_suffix(path)
        if eng is None:
            raise UsageError(
                f"cannot tell the destination engine of {path}", hint="name it with --to ENGINE"
            )
    return eng, path


def partial_path(final: Path) -> Path:
    """Where a destination is built before it is renamed into place."""
    return final.with_name(final.name + ".partial")


def owned_paths(engine: type[Engine], final: Path) -> list[Path]:
    """Every path a convert to ``final`` may create, replace or remove.

    The store and its side files, the ``.partial`` and its side files, the lock, the
    finished mark and the names a replacement uses for a moment.
    """
    partial = partial_path(final)
    names = [final, partial, _done_mark(partial)]
    names += [final.with_name(final.name + s) for s in (".lock", ".swap", ".replaced")]
    for store in (final, partial):
        names += [Path(str(store) + s) for s in engine.sidecar_suffixes]
    return names


def refuse_in_place(
    src_engine: type[Engine], src_path: Path, dst_engine: type[Engine], final: Path
) -> None:
    """Refuse (exit 2) a destination that is the source, lies inside it, or holds it.

    Paths are compared as the kernel resolves them (symbolic links and ``..`` in every
    component, hard links and bind mounts by inode), and every path the convert
    writes (``DST.partial``, ``DST.lock`` …) is compared with the source and its side
    files. Runs before anything is created.

    Raises:
        UsageError: naming how the two meet.
    """
    sources = [src_path] + [Path(str(src_path) + s) for s in src_engine.sidecar_suffixes]
    for mine in owned_paths(dst_engine, final):
        for theirs in sources:
            if is_within(mine, theirs) and is_within(theirs, mine):
                if theirs != src_path:
                    raise UsageError(
                        f"{mine}: is the side file {theirs.name} of the source; convert "
                        "never writes over the source"
                    )
                raise UsageError("the destination is the source; convert never works in place")
            if is_within(mine, theirs):
                raise UsageError(
                    f"{final}: lies inside the source {src_path}; convert never writes into "
                    "the source"
                )
            if is_within(theirs, mine):
                raise UsageError(
                    f"{final}: holds the source {src_path}; convert never replaces the source"
                )


@contextmanager
def destination_lock(final: Path) -> Iterator[None]:
    """One convert per destination: an exclusive flock on ``DST.lock``."""
    fcntl = require_fcntl()
    lock = final.with_name(final.name + ".lock")
    # Never through a symbolic link (the lock is truncated: a link planted there would
    # truncate its target), and never blocking on a FIFO planted there.
    flags = os.O_RDWR | os.O_CREAT | getattr(os, "O_NOFOLLOW", 0) | os.O_NONBLOCK
    while True:
        try:
            fd = os.open(lock, flags, 0o644)
        except OSError as exc:
            if exc.errno == errno.ELOOP:
                raise DestinationError(
                    f"{lock}: a symbolic link where statemigrate keeps its lock",
                    hint="remove it, then run the same command",
                ) from exc
            raise DestinationError(f"{final.parent}: cannot write here ({exc.strerror})") from exc
        if kind_of(lock, follow=False) != "a regular file":
            os.close(fd)
            raise DestinationError(
                f"{lock}: {kind_of(lock, follow=False)} where statemigrate keeps its lock",
                hint="remove it, then run the same command",
            )
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
    refuse_in_place(src_engine, src_path, dst_engine, final)
    partial = partial_path(final)
    if not final.parent.is_dir():
        raise DestinationError(f"{final.parent}: no such directory")
    # What can be refused now is refused before the lock file exists; it is checked
    # again under the lock, where the answer holds.
    check_destination(dst_engine, final, overwrite=overwrite, resume=resume)
    # Everything made from here (lock, .partial, side files) is no wider than the
    # source, nor than the store an --overwrite replaces.
    with no_wider_than(src_path, final), destination_lock(final):
        crash_point("locked")
        recover_placement(final)
        if not lexists(partial):
            # Side files and finished mark of a .partial already renamed into place (a
            # run killed right after the rename): nothing can use them any more.
            _remove_store(dst_engine, partial)
        existing = check_destination(dst_engine, final, overwrite=overwrite, resume=resume)
        if existing and resume and not lexists(partial):
            done = _already_in_place(
                src_engine, src_path, source_options, dst_engine, final, tables, should_stop
            )
            if done is not None:
                progress.phase(f"nothing to do: {final} is already complete")
                done.seconds = time.monotonic() - started
                progress.close()
                return done
            if not overwrite:
                raise DestinationError(
                    f"{final}: already exists", hint="pass --overwrite to replace it"
                )
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
        src_fp = fingerprint(
            src_engine.name,
            src_path,
            src_engine.store_paths(src_path)[1:],
            src_engine.volatile_files,
        )
        resume_hint = f"run the same command with --resume to finish ({partial} holds it)"
        if checkpoint is not None and checkpoint.source != src_fp:
            raise SourceError(
                f"{src_path}: the source changed since the interrupted conversion",
                hint=f"start over: remove {partial}",
            )
        attempt = _Attempt()
        with (
            _discard_on_failure(dst_engine, partial, attempt),
            open_source(src_engine, src_path, source_options) as reader,
        ):
            chosen = select_tables(reader.tables(), tables)
            src_meta = reader.metadata()
            from .upgrade.journal import refuse_interrupted  # lazy: --help stays light

            refuse_interrupted(src_path, src_meta)  # a half-switched upgrade is no source
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
                check_source_tables(chosen, src_meta, str(src_path))
                dst_engine.check_tables(chosen, destination_options)
                check_space(dst_engine, src_path, final.parent, force)
                progress.phase("checking keys")
                check_keys(dst_engine, reader, chosen)
            progress.phase("converting")
            if complete:
                pass
            elif checkpoint is None:
                if should_stop():  # from here a signal lets the batch in flight finish
                    raise InterruptedByUser("interrupted before anything was written")
                checkpoint = Checkpoint(src_fp)
                attempt.created = True
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
            if resumed:
                # Tables done before the interruption were digested by another run: the
                # source is read again, --no-verify or not, so that a source changed
                # meanwhile is caught, never mixed.
                progress.phase("reading the source again")
                _check_source_unchanged(
                    src_engine,
                    src_path,
                    source_options,
                    chosen,
                    source_digests,
                    partial,
                    should_stop,
                    resume_hint,
                )
            if complete:
                report.verified = True
            elif verify:
                progress.phase("verifying")
                _check_built(
                    dst_engine, partial, chosen, source_digests, progress, should_stop, resume_hint
                )
                report.verified = True
            crash_point("verified")
            _check_built_side_files(dst_engine, partial)
        keep_owner(partial, final)
        fsync_tree(partial)
        crash_point("synced")
        progress.phase("renaming into place")
        _refuse_if_held(dst_engine, final)
        _refuse_stale_side_files(dst_engine, final)
        _clear_side_files(dst_engine, final)
        place(partial, final)
        crash_point("placed")
        for sidecar in dst_engine.store_paths(partial):
            remove_path(sidecar)
        remove_path(done_mark)
    _fill_report(report, chosen, source_digests)
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


def check_destination(engine: type[Engine], final: Path, *, overwrite: bool, resume: bool) -> bool:
    """Refuse what must never be replaced or written beside; say whether ``final`` exists.

    An existing ``final`` is replaced only with ``--overwrite`` and only when it is a
    store of the destination's engine (a symbolic link counts by what it leads to; the
    link is what gets replaced). A store that a process holds (any lock, shared ones
    included) is refused, and so are side files left by an app that did not close the
    old store cleanly (a SQLite ``-wal`` with frames, a hot ``-journal``): opened beside
    the new file, they would be applied to it. Changes nothing.

    Args:
        engine: the destination's engine.
        final: the destination path.
        overwrite: ``--overwrite`` was given.
        resume: ``--resume`` was given (``final`` may be the finished store).

    Returns:
        Whether something is at ``final`` (then a store of ``engine``).

    Raises:
        DestinationError: exists without --overwrite, not a store of the engine, an odd
            ``.partial`` or side file (exit 5).
        StoreBusyError: another process holds the store or a side file (exit 3).
    """
    partial = partial_path(final)
    _check_partial(engine, partial)
    existing = lexists(final)
    if existing:
        may_be_done = resume and not lexists(partial)
        if not overwrite and not may_be_done:
            raise DestinationError(
                f"{final}: already exists", hint="pass --overwrite to replace it"
            )
        if not _is_store_of(engine, final):
            if not overwrite:
                raise DestinationError(
                    f"{final}: already exists", hint="pass --overwrite to replace it"
                )
            raise DestinationError(
                f"{final}: not a {engine.name} store ({_what_is(final)}); --overwrite "
                "replaces only a store of the destination's engine"
            )
    _refuse_if_held(engine, final)
    _refuse_stale_side_files(engine, final)
    return existing


def _is_store_of(engine: type[Engine], path: Path) -> bool:
    try:
        return path.exists() and engine.detect(path)
    except (OSError, ValueError):
        return False


def _what_is(path: Path) -> str:
    """What is at ``path``, a symbolic link named by what it leads to."""
    try:
        what = kind_of(path)
    except OSError:
        return "a symbolic link to nothing"
    if os.path.islink(path):
        return f"a symbolic link to {what}"
    return what


def _check_partial(engine: type[Engine], partial: Path) -> None:
    """A ``.partial`` must be what a convert creates: a file or directory, never a link.

    Anything else there (a link, which ``--resume`` would write through; a FIFO, which
    would block; a directory where the engine makes a file) is not statemigrate's.
    """
    want = "a directory" if engine.capabilities.directory else "a regular file"
    sides = [Path(str(partial) + s) for s in engine.sidecar_suffixes] + [_done_mark(partial)]
    for p in [partial, *sides]:
        if not lexists(p):
            continue
        what = kind_of(p, follow=False)
        if what != (want if p == partial else "a regular file"):
            raise DestinationError(
                f"{p}: {what}, not something an interrupted conversion to {engine.name} "
                "leaves; statemigrate does not touch it",
                hint="move it away, then run the same command",
            )


def _refuse_if_held(engine: type[Engine], final: Path) -> None:
    """Replacing a store that an app holds open would lose what it writes next: exit 3.

    Every file of the store and its side files is probed, whether ``final`` exists or
    not (an app may still hold the ``-wal``/``-shm`` of a store deleted under it), and
    shared locks count: an idle SQLite connection in WAL mode holds only those.
    """
    holder = store_holder(engine.store_paths(final), readers=True)
    if holder is not None:
        raise StoreBusyError(
            busy_message(final, holder), hint="stop the app, then run the same command"
        )


# The SQLite family's side files: a -wal holds committed pages until a checkpoint
# copies them into the database; a -journal whose header starts with this magic is
# "hot" (a write was cut short) and is rolled back into the database when it opens.
WAL_HEADER_BYTES = 32
HOT_JOURNAL_MAGIC = bytes.fromhex("d9d505f920a163d7")


def _side_file_state(path: Path) -> str | None:
    """What a side file of the SQLite family holds: "committed", "hot" or None (nothing)."""
    size = path.stat().st_size
    if path.name.endswith("-wal") and size > WAL_HEADER_BYTES:
        return "committed"
    if path.name.endswith("-journal") and size >= len(HOT_JOURNAL_MAGIC):
        with open(path, "rb") as f:
            if f.read(len(HOT_JOURNAL_MAGIC)) == HOT_JOURNAL_MAGIC:
                return "hot"
    return None


def _refuse_stale_side_files(engine: type[Engine], final: Path) -> None:
    """Refuse (exit 5) side files beside ``final`` that SQLite would apply to a new file.

    Checked after the holders: these belong to no running process, they are what an
    app that crashed left. They hold the old store's committed data (a ``-wal``) or
    the way back from a write cut short (a hot ``-journal``); SQLite applies either
    to whatever file it finds at ``final``. Neither is removed nor applied here: the
    app (or ``sqlite3``) finishes them on its next open, then the convert can run.
    """
    for side in (Path(str(final) + s) for s in engine.sidecar_suffixes):
        if not lexists(side):
            continue
        what = kind_of(side, follow=False)
        if what != "a regular file":
            raise DestinationError(
                f"{side}: {what} where the destination's side file would be; "
                "statemigrate does not touch it",
                hint="move it away, then run the same command",
            )
        state = _side_file_state(side)
        if state is None:
            continue
        if not lexists(final):
            raise DestinationError(
                f"{side}: left beside a missing {final} by an app that did not close it "
                "cleanly; it would be applied to the new store",
                hint="move it away (it holds data of the store that was there), then retry",
            )
        if state == "committed":
            raise DestinationError(
                f"{side}: the app that wrote {final} did not close it cleanly (its "
                "write-ahead log holds committed data)",
                hint=f"open {final} with the app (or sqlite3) once so it checkpoints, then retry",
            )
        raise DestinationError(
            f"{side}: the app that wrote {final} stopped in the middle of a write (a hot "
            "rollback journal)",
            hint=f"open {final} with the app (or sqlite3) once so it rolls back, then retry",
        )


def _clear_side_files(engine: type[Engine], final: Path) -> None:
    """Remove the side files of the store being replaced once they hold nothing.

    Run right before placing, after :func:`_refuse_stale_side_files`: what is left (a
    ``-shm`` index, an empty ``-wal``, a finished journal) belongs to the old store and
    must not meet the new one.
    """
    for side in (Path(str(final) + s) for s in engine.sidecar_suffixes):
        if lexists(side):
            side.unlink()


def _check_built_side_files(engine: type[Engine], partial: Path) -> None:
    """The built store is one file at placement: its own side files must hold nothing.

    Only the main file is renamed into place; a writer that left committed pages in
    its ``-wal`` would lose them there.
    """
    for side in (Path(str(partial) + s) for s in engine.sidecar_suffixes):
        if lexists(side) and _side_file_state(side) is not None:
            raise DestinationError(
                f"{side}: the built store was not checkpointed into {partial}",
                hint="the destination was not put in place",
            )


def _already_in_place(
    src_engine: type[Engine],
    src_path: Path,
    src_options: dict[str, Any] | None,
    dst_engine: type[Engine],
    final: Path,
    tables: list[str] | None,
    should_stop: Callable[[], bool],
) -> ConvertReport | None:
    """With ``--resume``: the report of a destination already placed and equal to the source.

    A run killed after its rename leaves the finished store and nothing else; running
    the same command again finds nothing to do. Both sides are read and their digests
    compared (tables, kinds, records); None when they differ.
    """
    with open_source(src_engine, src_path, src_options) as reader:
        chosen = select_tables(reader.tables(), tables)
        expected = digest_store(reader, chosen, str(src_path), None, should_stop)
    try:
        _check_built(dst_engine, final, chosen, expected, Progress(), should_stop, None)
    except (DestinationError, SourceError):
        return None
    report = ConvertReport(str(src_path), src_engine.name, str(final), dst_engine.name)
    report.resumed = report.verified = report.already_complete = True
    _fill_report(report, chosen, expected)
    return report


def _fill_report(
    report: ConvertReport, chosen: list[TableInfo], digests: dict[str, Digest]
) -> None:
    report.tables = [
        TableReport(t.name, t.kind.value, digests[t.name].count, 0, digests[t.name].hex())
        for t in chosen
    ]
    report.store_digest = store_digest((t.name, t.kind, digests[t.name]) for t in chosen)


@dataclass
class _Attempt:
    """What this run did to ``DST.partial``."""

    created: bool = False  # this run created it (it did not exist before)


@contextmanager
def _discard_on_failure(engine: type[Engine], partial: Path, attempt: _Attempt) -> Iterator[None]:
    """Remove the ``.partial`` this run created when it fails in a way no ``--resume`` finishes.

    Kept: an interruption (a signal), a busy store, a full disk; a ``--resume`` goes on
    from the last checkpoint. Removed: a refusal of the destination's engine, a source
    found damaged mid-copy, a verification that failed; a resume would meet the same.
    A ``.partial`` an earlier run made is never removed here.
    """
    try:
        yield
    except BaseException as exc:
        if attempt.created and not _resumable(exc):
            with contextlib.suppress(OSError):
                _remove_store(engine, partial)
        raise


def _resumable(exc: BaseException) -> bool:
    """Whether a ``--resume`` can finish after ``exc``."""
    if isinstance(exc, (InterruptedByUser, KeyboardInterrupt, StoreBusyError)):
        return True
    seen: BaseException | None = exc
    for _ in range(8):  # the error and what caused it (drivers wrap the OSError)
        if seen is None:
            break
        if isinstance(seen, OSError) and seen.errno in (errno.ENOSPC, errno.EDQUOT):
            return True
        text = str(seen).lower()
        if "disk full" in text or "no space left" in text or "quota exceeded" in text:
            return True
        seen = seen.__cause__ or seen.__context__
    return False


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
    flags = os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0)
    os.close(os.open(mark, flags, 0o644))
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


def _check_source_unchanged(
    src_engine: type[Engine],
    src_path: Path,
    src_options: Any,
    chosen: list[TableInfo],
    source_digests: dict[str, Digest],
    partial: Path,
    should_stop: Callable[[], bool] | None = None,
    hint: str | None = None,
) -> None:
    """Read the whole source again and compare with the digests the copy carried.

    A resumed copy holds tables digested by another run: a source changed meanwhile
    (even keeping its size and mtime) is caught here, never mixed into the result.

    Raises:
        SourceError: the source changed (exit 4).
    """
    with open_source(src_engine, src_path, src_options) as again:
        now = digest_store(again, chosen, str(src_path), None, should_stop, hint)
    if now != source_digests:
        raise SourceError(
            f"{src_path}: the source changed while the conversion was interrupted",
            hint=f"start over: remove {partial}",
        )


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
