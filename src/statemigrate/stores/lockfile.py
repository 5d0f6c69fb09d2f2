"""One writer per destination: the lock file ``DST.lock``, on every platform.

The first way the platform has:

- ``fcntl`` (Linux, macOS, the BSDs): an exclusive ``flock`` on ``DST.lock``;
- ``msvcrt`` (Windows): ``msvcrt.locking`` on one byte far past the start (Windows
  locks are mandatory: a lock on the pid would hide it from the run it refuses);
- neither: ``DST.lock`` created exclusively (``O_CREAT | O_EXCL``).

The holder writes its pid at the start of the file, so a run refused names it. The
kernel drops the first two locks when their process dies. Nothing drops the third: a
killed run leaves ``DST.lock`` behind, and the next run is refused with a hint to
remove it. It is never taken over: a pid may be reused, and two writers building one
destination is what the lock is for.
"""

from __future__ import annotations

import contextlib
import errno
import importlib
import os
import stat
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from types import ModuleType

from ..errors import DestinationError, StoreBusyError
from ..fsutil import kind_of, process_gone
from ..locks import MSVCRT_LOCK_BYTE, busy_message, pid_text

# Never through a symbolic link (the lock is truncated: a link planted there would
# truncate its target), never blocking on a FIFO planted there, bytes on Windows.
_FLAGS = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_BINARY", 0)


def lock_path(final: Path) -> Path:
    """The lock file of a destination: ``DST.lock``."""
    return final.with_name(final.name + ".lock")


@contextmanager
def writer_lock(final: Path) -> Iterator[None]:
    """Hold ``DST.lock`` for the block: no other statemigrate writes ``final`` meanwhile.

    Args:
        final: the destination path.

    Raises:
        StoreBusyError: another statemigrate holds the lock (exit 3, naming its pid).
        DestinationError: something that is not statemigrate's lock file is at
            ``DST.lock``, the directory is not writable, or a lock file a killed run
            left where nothing removes it (exit 5).
    """
    lock = lock_path(final)
    fcntl, msvcrt = _platform_module("fcntl"), _platform_module("msvcrt")
    if fcntl is not None:
        held = _flocked(fcntl, lock, final)
    elif msvcrt is not None:
        held = _msvcrt_locked(msvcrt, lock, final)
    else:
        held = _created_exclusively(lock, final)
    with held:
        yield


def _platform_module(name: str) -> ModuleType | None:
    try:
        return importlib.import_module(name)
    except ImportError:
        return None


@contextmanager
def _flocked(fcntl: ModuleType, lock: Path, final: Path) -> Iterator[None]:
    def take(fd: int) -> None:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)

    # Removed before it is released: whoever opened it meanwhile finds it gone once it
    # gets the lock (_still_at), and takes a new one.
    with _holding(_taken(lock, final, take, BlockingIOError, os.close), lock):
        yield


@contextmanager
def _msvcrt_locked(msvcrt: ModuleType, lock: Path, final: Path) -> Iterator[None]:
    def take(fd: int) -> None:
        os.lseek(fd, MSVCRT_LOCK_BYTE, os.SEEK_SET)
        msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)

    fd = _taken(lock, final, take, OSError, lambda fd: _msvcrt_release(msvcrt, fd))
    try:
        _write_pid(fd)
        yield
    finally:
        _msvcrt_release(msvcrt, fd)
        # Windows removes no file another process has open, so the lock goes first;
        # a run that opened the file meanwhile keeps it there and takes the lock on it.
        with contextlib.suppress(OSError):
            lock.unlink()


def _taken(
    lock: Path,
    final: Path,
    take: Callable[[int], None],
    refused: type[OSError],
    release: Callable[[int], None],
) -> int:
    """A descriptor of ``lock`` on which ``take`` got the lock, the file still being the
    one at ``lock`` (a holder that removed it meanwhile: ``release``, open it again).

    Raises:
        StoreBusyError: ``take`` raised ``refused``: another run holds it (its pid said).
    """
    while True:
        fd = _open(lock, final, os.O_RDWR | os.O_CREAT)
        try:
            take(fd)
        except refused as exc:
            pid = _read_pid(fd)
            os.close(fd)
            raise _busy(final, pid) from exc
        if _still_at(fd, lock):
            return fd
        release(fd)


@contextmanager
def _holding(fd: int, lock: Path) -> Iterator[None]:
    """Our pid in ``lock`` (open at ``fd``) while the caller runs; then the file removed
    and ``fd`` closed."""
    try:
        _write_pid(fd)
        try:
            yield
        finally:
            lock.unlink(missing_ok=True)
    finally:
        os.close(fd)


def _msvcrt_release(msvcrt: ModuleType, fd: int) -> None:
    try:
        os.lseek(fd, MSVCRT_LOCK_BYTE, os.SEEK_SET)
        with contextlib.suppress(OSError):
            msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
    finally:
        os.close(fd)


@contextmanager
def _created_exclusively(lock: Path, final: Path) -> Iterator[None]:
    try:
        fd = _open(lock, final, os.O_WRONLY | os.O_CREAT | os.O_EXCL)
    except FileExistsError as exc:
        raise _refusal_of_existing(lock, final) from exc
    with _holding(fd, lock):
        yield


def _refusal_of_existing(lock: Path, final: Path) -> Exception:
    """Why an exclusive create of ``lock`` failed: a writer, a leftover, or not a lock."""
    _check_kind(lock)
    try:
        with open(lock, "rb") as f:
            pid = f.read(32).decode(errors="replace").strip() or "unknown"
    except OSError:
        pid = "unknown"
    remove = f"remove {lock}, then run the same command"
    if pid.isdigit() and process_gone(int(pid)):
        return DestinationError(
            f"{lock}: left by statemigrate pid {pid}, which is no longer running (this "
            "platform has no file locks, so nothing removed it)",
            hint=remove,
        )
    return StoreBusyError(
        f"{final}: another statemigrate (pid {pid}) is writing this destination",
        hint=f"if no statemigrate is running (a killed run leaves its lock here), {remove}",
    )


def _open(lock: Path, final: Path, flags: int) -> int:
    """A descriptor of the lock file (created, never through a link), checked regular.

    Raises:
        FileExistsError: ``O_EXCL`` was asked and something is at ``lock``.
        DestinationError: a link, a FIFO or anything but a regular file is at ``lock``,
            or the directory refuses it.
    """
    try:
        fd = os.open(lock, flags | _FLAGS, 0o644)
    except FileExistsError:
        raise
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            _check_kind(lock)
        raise DestinationError(f"{final.parent}: cannot write here ({exc.strerror})") from exc
    try:
        _check_kind(lock)
    except DestinationError:
        os.close(fd)
        raise
    return fd


def _check_kind(lock: Path) -> None:
    """Refuse (exit 5) anything at ``lock`` that is not a regular file."""
    try:
        what = kind_of(lock, follow=False)
    except OSError:
        return  # gone meanwhile: the caller's next step sees it
    if what == "a symbolic link":
        raise DestinationError(
            f"{lock}: a symbolic link where statemigrate keeps its lock",
            hint="remove it, then run the same command",
        )
    if what != "a regular file":
        raise DestinationError(
            f"{lock}: {what} where statemigrate keeps its lock",
            hint="remove it, then run the same command",
        )


def _still_at(fd: int, lock: Path) -> bool:
    """Whether the locked file is still the one at ``lock`` (its holder removes it)."""
    try:
        return os.path.samestat(os.fstat(fd), os.stat(lock))
    except FileNotFoundError:
        return False


def _read_pid(fd: int) -> str:
    return pid_text(fd) or "unknown"


def _write_pid(fd: int) -> None:
    os.ftruncate(fd, 0)
    os.lseek(fd, 0, os.SEEK_SET)
    os.write(fd, str(os.getpid()).encode())


def _busy(final: Path, pid: str) -> StoreBusyError:
    return StoreBusyError(f"{final}: another statemigrate (pid {pid}) is writing this destination")


def writer_pid(final: Path) -> int | None:
    """The pid of another statemigrate writing ``final`` (holding ``DST.lock``), or None.

    Probed without waiting and without changing the file: a shared ``flock`` taken and
    dropped at once (``fcntl``), a read lock of the locked byte (``msvcrt``), or, with
    neither, the lock file's pid while that process runs. -1: held, the pid unknown.
    """
    lock = lock_path(final)
    try:
        fd = os.open(lock, os.O_RDONLY | _FLAGS)
    except OSError:
        return None  # no lock file (or not one statemigrate would have written)
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            return None
        text = pid_text(fd) or ""
        pid = int(text) if text.isdigit() else -1
        if pid == os.getpid():
            return None
        fcntl, msvcrt = _platform_module("fcntl"), _platform_module("msvcrt")
        if fcntl is not None:
            try:
                fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
            except BlockingIOError:
                return pid
            return None  # closing the descriptor drops the shared lock
        if msvcrt is not None:
            os.lseek(fd, MSVCRT_LOCK_BYTE, os.SEEK_SET)
            try:
                msvcrt.locking(fd, msvcrt.LK_NBRLCK, 1)
            except OSError:
                return pid
            with contextlib.suppress(OSError):
                os.lseek(fd, MSVCRT_LOCK_BYTE, os.SEEK_SET)
                msvcrt.locking(fd, msvcrt.LK_UNLCK, 1)
            return None
        return None if pid < 0 or process_gone(pid) else pid
    finally:
        os.close(fd)


def refuse_if_written(final: Path, doing: str) -> None:
    """Refuse (exit 3, naming its pid) a store another statemigrate writes meanwhile.

    Args:
        final: the store.
        doing: what the writer does, after the contract's line ("statemigrate is
            running upgrade on it").

    Raises:
        StoreBusyError: :func:`writer_pid` names a writer.
    """
    pid = writer_pid(final)
    if pid is not None:
        raise StoreBusyError(
            f"{busy_message(final, pid)}: {doing}", hint="let it finish, then run the same command"
        )
