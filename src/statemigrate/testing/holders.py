"""A running app that holds a store: a real process per engine, for the busy tests.

Each holder is a ``python -c`` child that runs the engine's declared
:attr:`~statemigrate.engines.base.Engine.app_holder` code: it opens the store with the
engine's own driver the way an application does (never through statemigrate's
writers), reads from it, prints ``ready`` and then sits idle until it is killed. With
``writing=True`` the app also sits inside a write transaction where the engine has one.
Every holder waits on its standard input, so it also ends when the test process dies.
"""

from __future__ import annotations

import queue
import subprocess
import sys
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path

# Seconds a holder may take to open the store and say "ready" before the test fails as a
# hang (a hang guard, not a time bound: opening takes well under a second).
START_GUARD = 60.0

_WAIT = "print('ready', flush=True)\nsys.stdin.read()\n"


def app_code(engine: str) -> str:
    """The whole program of ``engine``'s app: its declared code, then waiting."""
    from ..registry import get_engine

    holder = get_engine(engine).app_holder
    if holder is None:
        raise AssertionError(f"the {engine} engine declares no app that holds its stores")
    return "import sys\n" + holder.code + _WAIT


def _first_line(proc: subprocess.Popen[str], guard: float) -> str | None:
    """The child's first line of output, or None when it has said nothing after ``guard`` s."""
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        lines.put(proc.stdout.readline() if proc.stdout else "")

    threading.Thread(target=read, daemon=True).start()
    try:
        return lines.get(timeout=guard)
    except queue.Empty:
        return None


@contextmanager
def running(
    code: str, args: Sequence[str], *, cwd: Path | None = None, guard: float = START_GUARD
) -> Iterator[int]:
    """Run ``python -c code *args`` until it prints ``ready``; yield its pid; kill it on exit.

    Args:
        code: the program; it prints ``ready`` once it holds what it should.
        args: its arguments (``sys.argv[1:]``).
        cwd: its working directory (paths in ``args`` may be relative to it).
        guard: seconds after which a child that has not said ``ready`` fails the test
            as a hang.

    Raises:
        AssertionError: the child ended or hung before it was ready.
    """
    proc = subprocess.Popen(
        [sys.executable, "-c", code, *map(str, args)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=cwd,
    )
    try:
        line = _first_line(proc, guard)
        if line is None:
            raise AssertionError(f"the holder did not say 'ready' within {guard:.0f}s (hang guard)")
        if line.strip() != "ready":
            proc.kill()
            err = proc.communicate()[1]
            raise AssertionError(f"the holder did not start: {line!r}\n{err[-2000:]}")
        yield proc.pid
    finally:
        proc.kill()
        proc.communicate()


@contextmanager
def app_holding(engine: str, path: Path, *, writing: bool = False) -> Iterator[int]:
    """A real app process holds the store at ``path`` open the way ``engine``'s apps do.

    Args:
        engine: the engine's name (it declares its app: ``Engine.app_holder``).
        path: the store.
        writing: also sit inside an open write transaction, where the engine has them.

    Yields:
        The app's pid; the app is killed when the block ends.
    """
    with running(app_code(engine), [str(path), "write" if writing else "idle"]) as pid:
        yield pid


__all__ = ["START_GUARD", "app_code", "app_holding", "running"]
