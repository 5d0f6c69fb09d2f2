"""Who holds a store: POSIX record locks probed without taking or waiting for them.

``fcntl`` is imported when a probe runs, not with the module: ``import statemigrate``
works where it does not exist (Windows). There a probe cannot see POSIX locks: it
says so once (a :class:`~statemigrate.errors.PlatformWarning`, one line on the command
line) and sees only what the platform shows, a file another process opened without
sharing it (Windows: a ``PermissionError`` on open or read), as held by an unknown pid.

The files a writer opens at a store (:class:`SideFile`, declared by each engine as it
declares its :class:`LockProbe`) are looked at here too, before a driver opens them:
a link there is refused, never written through (:func:`refuse_linked_side_files`).
"""

from __future__ import annotations

import glob
import importlib
import os
import stat
import struct
import sys
import warnings
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType

from .errors import LinkRefusedError, PlatformWarning, StoreBusyError, UsageError
from .fsutil import kind_of_mode

# struct flock in each platform's C layout (native sizes and alignment), field by field.
# Linux: short l_type, short l_whence, off_t l_start, off_t l_len, pid_t l_pid.
# macOS and the BSDs: off_t l_start, off_t l_len, pid_t l_pid, short l_type, short l_whence
# (FreeBSD's trailing int l_sysid falls in the zeroed room the buffer leaves).
_FLOCK_LAYOUTS = {
    "linux": ("hhqqi", ("type", "whence", "start", "len", "pid")),
    "bsd": ("qqihh", ("start", "len", "pid", "type", "whence")),
}
_LINUX_PLATFORMS = ("linux", "android")
_BSD_PLATFORMS = ("darwin", "freebsd", "openbsd", "netbsd", "dragonfly")
# The buffer F_GETLK reads and fills: room for any platform's struct flock.
_FLOCK_BUFFER = 64


def _flock_layout(platform: str = sys.platform) -> tuple[str, tuple[str, ...]]:
    """The ``struct`` format and field names of ``struct flock`` on ``platform``.

    Raises:
        UsageError: a platform whose layout is not known here (a probe would misread
            the kernel's answer without an error).
    """
    if platform.startswith(_LINUX_PLATFORMS):
        return _FLOCK_LAYOUTS["linux"]
    if platform.startswith(_BSD_PLATFORMS):
        return _FLOCK_LAYOUTS["bsd"]
    raise UsageError(
        f"statemigrate does not know struct flock on {platform}: it cannot tell whether "
        "another process holds a store, so it does not write one here"
    )


def _pack_flock(layout: tuple[str, tuple[str, ...]], **fields: int) -> bytes:
    """A ``struct flock`` of ``layout`` holding ``fields``, zero-padded to the buffer."""
    fmt, names = layout
    return struct.pack(fmt, *(fields[name] for name in names)).ljust(_FLOCK_BUFFER, b"\0")


def _unpack_flock(layout: tuple[str, tuple[str, ...]], data: bytes) -> dict[str, int]:
    """The fields of the ``struct flock`` of ``layout`` at the start of ``data``."""
    fmt, names = layout
    return dict(zip(names, struct.unpack_from(fmt, data), strict=True))


def _fcntl() -> ModuleType | None:
    """The ``fcntl`` module, or None where the platform has none (Windows)."""
    try:
        import fcntl
    except ImportError:
        return None
    return fcntl


# The byte msvcrt.locking locks (Windows): past any pid written at the start (Windows
# locks are mandatory: a lock on the pid would hide it), and locking past the end of a
# file is allowed.
MSVCRT_LOCK_BYTE = 1 << 30


def lock_exclusively(fd: int) -> None:
    """Lock the open file ``fd`` exclusively until it is closed, or raise ``OSError`` at
    once while another process holds it.

    A POSIX record lock (``fcntl.lockf``, which :func:`fcntl_holder` sees with its
    holder's pid) where ``fcntl`` exists; on Windows ``msvcrt.locking`` of
    :data:`MSVCRT_LOCK_BYTE`, released when ``fd`` is closed; where neither exists,
    no lock (the probes say so once).
    """
    fcntl = _fcntl()
    if fcntl is not None:
        fcntl.lockf(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        return
    try:
        msvcrt = importlib.import_module("msvcrt")
    except ImportError:
        return
    os.lseek(fd, MSVCRT_LOCK_BYTE, os.SEEK_SET)
    msvcrt.locking(fd, msvcrt.LK_NBLCK, 1)
    os.lseek(fd, 0, os.SEEK_SET)


def pid_text(fd: int) -> str | None:
    """What a lock's holder wrote at the start of its lock file (its pid), or None."""
    try:
        os.lseek(fd, 0, os.SEEK_SET)
        text = os.read(fd, 32)
    except OSError:
        return None
    return text.decode(errors="replace").strip() or None


NO_POSIX_LOCKS = (
    "this platform has no POSIX file locks (no fcntl module): statemigrate sees an app "
    "holding a store only where the app denies sharing its files, so stop the apps that "
    "use the stores first"
)


_warned: list[bool] = []  # NO_POSIX_LOCKS was said in this process


def _unseen(path: Path) -> int | None:
    """A probe without ``fcntl``: say so (once per process), then look at sharing."""
    if not _warned:
        _warned.append(True)
        warnings.warn(NO_POSIX_LOCKS, PlatformWarning, stacklevel=3)
    return share_mode_holder(path)


def share_mode_holder(path: Path, *, platform: str = os.name) -> int | None:
    """-1 when another process opened ``path`` without sharing it, else None.

    On Windows an app that denies sharing (or holds a byte-range lock on the start of
    the file) makes opening or reading it fail with ``PermissionError``; the pid is not
    known. Elsewhere a ``PermissionError`` means the mode bits, not a holder: None.

    Args:
        path: the file to look at (anything but a regular file has no holder here).
        platform: ``os.name`` of the platform whose meaning of the error applies.
    """
    flags = os.O_RDONLY | getattr(os, "O_BINARY", 0) | getattr(os, "O_NONBLOCK", 0)
    try:
        fd = os.open(path, flags)
    except PermissionError:
        return -1 if platform == "nt" else None
    except OSError:
        return None
    try:
        if stat.S_ISREG(os.fstat(fd).st_mode):
            os.read(fd, 1)
    except PermissionError:
        return -1 if platform == "nt" else None
    except OSError:
        return None
    finally:
        os.close(fd)
    return None


def _open_regular(path: Path) -> int | None:
    """A read-only descriptor of ``path`` if it is a regular file, else None.

    ``O_NONBLOCK`` so that a FIFO put where a store's file should be never blocks.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOCTTY", 0)
    try:
        fd = os.open(path, flags)
    except OSError:
        return None
    try:
        regular = stat.S_ISREG(os.fstat(fd).st_mode)
    except OSError:
        regular = False
    if not regular:
        os.close(fd)
        return None
    return fd


def fcntl_holder(path: Path, *, readers: bool = False) -> int | None:
    """The pid of another process holding a lock on ``path``, or None.

    Uses ``F_GETLK`` on a read-only descriptor, so it neither blocks nor changes the
    file. A lock held by this very process is not reported (POSIX locks are per
    process), and closing the descriptor does not release locks of other processes.

    Args:
        path: the file to look at (anything but a regular file has no holder here).
        readers: also report shared (read) locks. The query then asks for a write
            lock, which every lock conflicts with: an idle SQLite connection in WAL
            mode holds only shared locks (on ``-shm``), and replacing its store under
            it loses what it writes next. Without it only write locks are reported,
            which is what a reader that may run beside other readers needs.

    Without ``fcntl`` (Windows) see :func:`share_mode_holder`, after one warning.

    Raises:
        UsageError: a ``struct flock`` not known here.
    """
    fcntl = _fcntl()
    if fcntl is None:
        return _unseen(path)
    layout = _flock_layout()
    fd = _open_regular(path)
    if fd is None:
        return None
    try:
        wanted = fcntl.F_WRLCK if readers else fcntl.F_RDLCK
        query = _pack_flock(layout, type=wanted, whence=os.SEEK_SET, start=0, len=0, pid=0)
        try:
            answer = fcntl.fcntl(fd, fcntl.F_GETLK, query)
        except OSError:
            return None
        lock = _unpack_flock(layout, answer)
        if lock["type"] == fcntl.F_UNLCK:
            return None
        return int(lock["pid"]) or -1
    finally:
        os.close(fd)


def busy_message(path: Path, pid: int | None) -> str:
    """The contract's one line for a store held by another process."""
    who = f"pid {pid}" if pid and pid > 0 else "pid unknown"
    return f"{path}: store is in use by another process ({who})"


def flock_held(path: Path) -> bool:
    """Whether another open file holds an exclusive ``flock`` on ``path`` (redb's lock).

    Takes a shared flock without waiting and drops it at once; changes nothing.
    Without ``fcntl`` (Windows) see :func:`share_mode_holder`, after one warning.
    """
    fcntl = _fcntl()
    if fcntl is None:
        return _unseen(path) is not None
    fd = _open_regular(path)
    if fd is None:
        return False
    try:
        fcntl.flock(fd, fcntl.LOCK_SH | fcntl.LOCK_NB)
    except BlockingIOError:
        return True
    except OSError:
        return False
    finally:
        os.close(fd)  # closing drops our shared lock
    return False


def flock_holder_pid(path: Path) -> int | None:
    """The pid of another process holding a ``flock`` on ``path``, from ``/proc/locks``.

    None where that file does not exist (not Linux) or names no such holder.
    """
    try:
        inode = path.stat().st_ino
        lines = Path("/proc/locks").read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        # "1: FLOCK  ADVISORY  WRITE 4242 08:01:1234 0 EOF" (a blocked waiter has "->")
        if len(parts) >= 6 and parts[1] == "FLOCK" and "->" not in parts:
            dev_inode = parts[5].rsplit(":", 1)
            if len(dev_inode) == 2 and dev_inode[1] == str(inode) and parts[4].isdigit():
                pid = int(parts[4])
                if pid > 0 and pid != os.getpid():
                    return pid
    return None


def store_holder(paths: list[Path], *, readers: bool = False) -> int | None:
    """The pid of a process holding any file of a store (fcntl or flock), -1 if unknown, or None.

    Looks at every file of the given files and directories (not recursively below a
    directory's subdirectories): SQLite locks the database and its ``-shm``, RocksDB its
    ``LOCK``, LMDB its ``lock.mdb``, redb its file (flock).

    Args:
        paths: the store's files and directories (missing ones are skipped).
        readers: also report shared locks (see :func:`fcntl_holder`); a destination
            about to be replaced is probed so.
    """
    files: list[Path] = []
    for p in paths:
        if p.is_dir():
            files += sorted(c for c in p.iterdir() if c.is_file())
        elif p.is_file():
            files.append(p)
    unknown = False  # held, but by a lock that names no pid (an OFD lock)
    for f in files:
        pid = fcntl_holder(f, readers=readers)
        if pid is not None and pid > 0:
            return pid
        unknown = unknown or pid is not None
        if flock_held(f):
            pid = flock_holder_pid(f)
            if pid is not None:
                return pid
            unknown = True
    return -1 if unknown else None


@dataclass(frozen=True)
class LockProbe:
    """Where another process holding a store shows, and how to look: declared by its engine.

    Attributes:
        file: the file looked at: ``""`` for the store's own file, a suffix starting with
            ``-`` for a file beside a one-file store (``"-shm"``), or a name inside a
            directory store (``"LOCK"``, ``"lock.mdb"``).
        how: ``"write"``: a POSIX write lock (a writer); ``"any"``: any POSIX lock,
            shared ones included (an open LMDB environment); ``"flock"``: a BSD flock,
            its pid from ``/proc/locks`` (redb); or the engine's own look at a file of
            its format, a function of the file giving the holder's pid or None (LMDB's
            writer mutex, :func:`statemigrate.engines.lmdb.lockfile.writer_pid`).
    """

    file: str = ""
    how: str | Callable[[Path], int | None] = "write"

    def target(self, path: Path) -> Path:
        """The file this probe looks at for the store at ``path``."""
        if not self.file:
            return path
        if self.file.startswith("-"):
            return Path(str(path) + self.file)
        return path / self.file


def _probe(target: Path, how: str | Callable[[Path], int | None]) -> int | None:
    if callable(how):
        return how(target)
    if how == "write":
        return fcntl_holder(target)
    if how == "any":
        return fcntl_holder(target, readers=True)
    if how == "flock":
        if flock_held(target):
            return flock_holder_pid(target) or -1
        return None
    raise ValueError(f"unknown lock probe {how!r}")


def lock_holder(path: Path, probes: Iterable[LockProbe]) -> int | None:
    """The pid of another process holding the store at ``path``, as its engine's probes see it.

    Args:
        path: the store's file or directory.
        probes: the engine's declared probes, tried in order.

    Returns:
        The first pid a probe names; -1 when held by a lock that names none; None when free.

    Raises:
        UsageError: a ``struct flock`` not known here (see :func:`fcntl_holder`).
    """
    unknown = False
    for probe in probes:
        pid = _probe(probe.target(path), probe.how)
        if pid is not None and pid > 0:
            return pid
        unknown = unknown or pid is not None
    return -1 if unknown else None


def refuse_if_held(path: Path, probes: Iterable[LockProbe], *, hint: str | None = None) -> None:
    """Refuse (exit 3, naming the pid) a store another process holds: "refuse if held", once.

    Args:
        path: the store's file or directory.
        probes: the engine's declared probes.
        hint: the hint of the error.

    Raises:
        StoreBusyError: a probe found a holder.
        UsageError: a ``struct flock`` not known here (see :func:`fcntl_holder`).
    """
    pid = lock_holder(path, probes)
    if pid is not None:
        raise StoreBusyError(busy_message(path, pid), hint=hint)


# --- the files a writer opens at a store -------------------------------------------------


@dataclass(frozen=True)
class SideFile:
    """A file that a writer of an engine opens at a store, declared by the engine
    (:attr:`~statemigrate.engines.base.Engine.side_files`).

    Before any verb's writer opens a store (:func:`refuse_linked_side_files`), a symbolic
    link or anything but a regular file at one of these names is refused: the driver
    opens them with ``O_CREAT|O_RDWR`` (LMDB's ``lock.mdb``) or truncates them (a
    journal), so a link planted there would have it write the file the link leads to.

    Attributes:
        name: inside a directory store, a name or a shell pattern below it (``"lock.mdb"``,
            ``"*.jnl"``, ``"journals/*"``); beside a one-file store, a suffix (``"-wal"``).
        holds: what the engine keeps there, for the refusal ("LMDB's lock file").
        made: the driver creates it whenever it opens the store for writing (a lock file):
            it is created first, here, never through a link, so the driver finds a
            regular file.
    """

    name: str
    holds: str
    made: bool = False

    def targets(self, path: Path, directory: bool) -> list[Path]:
        """The files this declaration names at the store ``path`` (a pattern: those there)."""
        if not directory:
            return [Path(str(path) + self.name)]
        if not any(c in self.name for c in "*?["):
            return [path / self.name]
        return sorted(Path(p) for p in glob.glob(os.path.join(glob.escape(str(path)), self.name)))


# Never through a link, never blocking on a FIFO planted there, never a terminal taken.
_NO_FOLLOW = (
    os.O_RDONLY
    | getattr(os, "O_NOFOLLOW", 0)
    | getattr(os, "O_NONBLOCK", 0)
    | getattr(os, "O_NOCTTY", 0)
    | getattr(os, "O_CLOEXEC", 0)
)


def refuse_linked_side_files(
    path: Path, files: Iterable[SideFile], *, directory: bool, make: bool
) -> None:
    """Refuse (exit 5) a store whose writer would write through a link: once, for every engine.

    Called before the driver opens the store for writing (stamp, upgrade, downgrade, a
    convert's ``.partial``). The store's own path must not be a symbolic link, nor any
    directory on the way to a declared file inside it, and a declared file that exists
    must be a regular file, looked at without following it. With ``make``, the files the
    driver would create anyway are created here with ``O_CREAT|O_NOFOLLOW`` (the mode of
    the store, as the process umask narrows it), so that it opens a regular file.

    What remains: whoever may write the store's directory can still put a link in place
    between this check and the driver's own open (the driver opens by name and follows
    links); a regular file made here only narrows that window to the moment between two
    opens. That user can write the store anyway; what is closed is a link planted before
    the run, the way a file outside the store was overwritten.

    Args:
        path: the store's file or directory.
        files: the engine's declarations.
        directory: the store is a directory (names are inside it, not suffixes).
        make: create the declared ``made`` files (the store exists and is opened).

    Raises:
        LinkRefusedError: a link, or something other than a regular file, at one of
            them (exit 5, naming it).
    """
    if os.path.islink(path):
        raise LinkRefusedError(
            f"{path}: a symbolic link; statemigrate does not write a store through a link",
            hint=f"name the store where the link leads ({os.path.realpath(path)}) if that "
            "is the store to write",
        )
    mode = _store_mode(path)
    for side in files:
        for target in side.targets(path, directory):
            if directory:
                _refuse_linked_below(path, target, side)
            if side.made and make and mode is not None:
                _make_regular(target, side, mode)
            else:
                _refuse_unless_regular(target, side)


def _store_mode(path: Path) -> int | None:
    """The permission bits a file made in the store gets (the store's, without execute)."""
    try:
        return os.lstat(path).st_mode & 0o666
    except OSError:
        return None


def _refuse_linked_below(top: Path, target: Path, side: SideFile) -> None:
    """Refuse a directory between the store ``top`` and ``target`` that is a link."""
    try:
        parts = target.relative_to(top).parts[:-1]
    except ValueError:
        return
    here = top
    for part in parts:
        here = here / part
        if os.path.islink(here):
            raise _refusal(here, "a symbolic link", side)


def _refuse_unless_regular(target: Path, side: SideFile) -> None:
    try:
        st = os.lstat(target)
    except FileNotFoundError:
        return  # the driver creates it (SQLite opens its side files O_NOFOLLOW itself)
    except OSError:
        return  # what cannot be looked at is the driver's to report
    if not stat.S_ISREG(st.st_mode):
        raise _refusal(target, kind_of_mode(st.st_mode), side)


def _make_regular(target: Path, side: SideFile, mode: int) -> None:
    """Create ``target`` if missing, never through a link; refuse it if it is not a file."""
    try:
        fd = os.open(target, _NO_FOLLOW | os.O_CREAT, mode)
    except OSError as exc:
        try:
            st = os.lstat(target)
        except OSError:
            return  # not made (a directory refusing it): the driver's own open reports it
        if stat.S_ISREG(st.st_mode):
            return
        raise _refusal(target, kind_of_mode(st.st_mode), side) from exc
    try:
        what = os.fstat(fd).st_mode
    finally:
        os.close(fd)
    if not stat.S_ISREG(what):
        raise _refusal(target, kind_of_mode(what), side)


def _refusal(target: Path, what: str, side: SideFile) -> LinkRefusedError:
    if what == "a symbolic link":
        return LinkRefusedError(
            f"{target}: a symbolic link where {side.holds} belongs; statemigrate does not "
            "write through links",
            hint="remove the link (what it leads to is not the store's), then run the same command",
        )
    return LinkRefusedError(
        f"{target}: {what} where {side.holds} belongs; statemigrate does not write through it",
        hint="move it away, then run the same command",
    )
