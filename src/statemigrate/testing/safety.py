"""Helpers for the safety tests any engine can use: store builders, the kill -9
harness, corruption helpers and a size-limited file system (a running app that holds a
store: :mod:`.holders`; the readers' fuzzer: :mod:`.fuzz`).

Everything here drives the real ``statemigrate`` command in a subprocess (a kill -9
must hit a real process; a crash must not take the test runner down with it) and
checks stores through the engines' own readers.
"""

from __future__ import annotations

import hashlib
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

from ..digest import Digest, batch_digest, store_digest
from ..engines.base import Engine
from ..fsutil import CRASH_ENV, NO_EXCHANGE_ENV
from ..model import TableInfo, TableKind
from ..registry import engine_names, get_engine

# Steps where the pipeline can be made to SIGKILL itself (fsutil.crash_point).
CRASH_POINTS = (
    "locked",
    "created",
    "batch",
    "copied",
    "finished",
    "verifying",
    "verified",
    "synced",
    "place:new",
    "placed",
)
# Steps of replacing an existing destination (--overwrite).
OVERWRITE_CRASH_POINTS = ("place:swap", "place:exchanged", "place:aside", "place:renamed", "placed")

# Files that SQLite readers write by design (WAL read marks) and that hold no data.
COORDINATION_SUFFIXES = ("-shm",)

LONG = os.environ.get("STATEMIGRATE_LONG") == "1"

# Engines that take minutes to write 200,000 records (helixdb: ~100 s on the CI machine):
# tests that only need "long enough to interrupt" give them fewer records in CI.
SLOW_ENGINES = {"helixdb"}


# --- stores ---------------------------------------------------------------------------


def store_file(engine: str, directory: Path, name: str = "store") -> Path:
    """A fresh path for a store of ``engine`` (with the suffix the CLI recognises)."""
    suffixes = get_engine(engine).suffixes
    return directory / f"{name}{suffixes[0] if suffixes else '.' + engine}"


def spec(engine: str, path: Path) -> str:
    """``ENGINE:PATH`` so the CLI never has to guess."""
    return f"{engine}:{path}"


def _records(table: TableInfo, count: int, seed: int) -> Iterator[list]:
    rnd = random.Random(seed)
    step = 10_000
    for start in range(0, count, step):
        batch: list = []
        for i in range(start, min(count, start + step)):
            key = b"k" + i.to_bytes(6, "big")  # keys 7 bytes: accepted by every engine
            value = rnd.randbytes(rnd.randint(0, 24))
            if table.versioned:
                batch.append((key, value, (i * 2654435761) % (2**64)))
            else:
                batch.append((key, value))
        yield batch


def build_store(
    engine: str | type[Engine],
    path: Path,
    records: int = 2_000,
    seed: int = 1,
    metadata: Mapping[str, bytes] | None = None,
) -> str:
    """Create a store of ``records`` small records in three tables; return its digest.

    Tables: ``events`` (versioned, 60%), ``settings`` (plain, the rest) and ``empty``.
    Keys are 7 bytes, values 0-24 random bytes, so every engine's limits are met.
    """
    eng = get_engine(engine) if isinstance(engine, str) else engine
    n_events = records * 3 // 5
    plan = [
        (TableInfo("empty"), 0),
        (TableInfo("events", TableKind.VERSIONED), n_events),
        (TableInfo("settings"), records - n_events),
    ]
    writer = eng.create_writer(path)
    parts = []
    try:
        writer.put_metadata(dict(metadata or {b"schema".decode(): b"safety-test"}))
        for table, count in sorted(plan, key=lambda p: p[0].name.encode()):
            writer.create_table(table)
            total = Digest()
            for batch in _records(table, count, seed + len(table.name)):
                writer.write_batch(table, batch)
                total = total + batch_digest(batch, table.versioned)
            parts.append((table.name, table.kind, total))
        writer.finish()
    finally:
        writer.close()
    return store_digest(parts)


def digest_of(engine: str, path: Path) -> str:
    """The store digest as read back through the engine's reader."""
    from .. import api

    return api.checksum(spec(engine, path)).digest


def store_exists(engine: str, path: Path) -> bool:
    """Whether anything of the store is at ``path``."""
    return bool(get_engine(engine).store_paths(path)) or path.exists() or path.is_symlink()


def files_sha256(engine: str, path: Path) -> dict[str, str]:
    """sha256 of every file of a store, sidecars included, SQLite's ``-shm`` excluded.

    The ``-shm`` file is SQLite's shared-memory index of the WAL: every reader writes
    its read marks there by design; it holds no data.
    """
    out: dict[str, str] = {}
    roots = get_engine(engine).store_paths(path)
    for root in roots:
        files = (
            [root]
            if root.is_file()
            else sorted(Path(r) / f for r, _d, fs in os.walk(root) for f in fs)
        )
        for f in files:
            if f.name.endswith(COORDINATION_SUFFIXES):
                continue
            out[str(f.relative_to(path.parent))] = hashlib.sha256(f.read_bytes()).hexdigest()
    return out


def leftovers(final: Path) -> list[str]:
    """Files a finished convert must not leave beside its destination."""
    names = [
        final.name + s
        for s in (
            ".partial",
            ".lock",
            ".swap",
            ".replaced",
            ".partial.checkpoint",
            ".partial.done",
            ".partial-wal",
            ".partial-journal",
        )
    ]
    return sorted(n for n in names if (final.parent / n).exists())


# --- the command in a subprocess --------------------------------------------------------


def cli_command() -> list[str]:
    """argv prefix that runs this interpreter's statemigrate."""
    return [
        sys.executable,
        "-c",
        "import sys; from statemigrate.cli import main; sys.argv[0] = 'statemigrate'; main()",
    ]


@dataclass
class Run:
    """One finished subprocess."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def lines(self) -> list[str]:
        """The non-empty lines of stderr."""
        return [line for line in self.stderr.splitlines() if line.strip()]

    def killed_by(self, sig: int = signal.SIGKILL) -> bool:
        """Whether the process died of ``sig`` (a kill that landed), not by exiting."""
        return self.returncode == -sig


# Root reads every file whatever its mode: without these capabilities the mode bits bind.
DROP_DAC = [
    "setpriv",
    "--bounding-set=-dac_override,-dac_read_search",
    "--inh-caps=-dac_override,-dac_read_search",
    "--",
]


def run_cli(
    args: Sequence[str],
    *,
    timeout: float = 60,
    env: Mapping[str, str] | None = None,
    honour_permissions: bool = False,
    cwd: Path | None = None,
) -> Run:
    """Run ``statemigrate ARGS`` to completion (killed and failed after ``timeout``).

    Args:
        args: the command line after ``statemigrate``.
        timeout: seconds before the test fails as a hang.
        env: extra environment variables.
        honour_permissions: run without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH (through
            ``setpriv``), so that a root test run meets "permission denied" like a user.
        cwd: working directory.
    """
    cmd = cli_command() + [str(a) for a in args]
    if honour_permissions:
        cmd = DROP_DAC + cmd
    full_env = dict(os.environ, **(env or {}))
    started = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"statemigrate {' '.join(map(str, args))} hung for more than {timeout}s"
        ) from exc
    return Run(
        list(map(str, args)), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started
    )


def run_and_kill(
    args: Sequence[str],
    delay: float,
    *,
    env: Mapping[str, str] | None = None,
    sig: int = signal.SIGKILL,
    timeout: float = 60,
) -> Run:
    """Start ``statemigrate ARGS``, send ``sig`` after ``delay`` seconds, wait for it.

    A run that ends before ``delay`` is not killed: check :meth:`Run.killed_by` and
    count such a run as not-a-kill (it still must have done its whole job).
    """
    cmd = cli_command() + [str(a) for a in args]
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **(env or {})),
    )
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.communicate()
        raise AssertionError(
            f"statemigrate {' '.join(map(str, args))} did not stop after signal {sig}"
        ) from exc
    return Run(list(map(str, args)), proc.returncode, out, err, time.monotonic() - started)


def one_line_error(run: Run) -> str:
    """The error line of a failed run; asserts there is no traceback and at most a hint."""
    lines = run.lines()
    assert "Traceback" not in run.stderr, run.stderr
    assert lines, f"exit {run.returncode} without a message"
    errors = [line for line in lines if line.startswith("statemigrate: error:")]
    assert len(errors) == 1, run.stderr
    others = [
        line
        for line in lines
        if not line.startswith(("statemigrate: error:", "hint:", "statemigrate: stop"))
    ]
    assert not others, run.stderr
    return errors[0]


# --- kill points ------------------------------------------------------------------------


@dataclass(frozen=True)
class KillPoint:
    """Where one kill lands: a pair of engines and a fraction of an uninterrupted run,
    or a named crash point."""

    source: str
    destination: str
    fraction: float | None = None
    crash_at: str | None = None
    overwrite: bool = False

    @property
    def id(self) -> str:
        where = f"{self.fraction:.3f}" if self.fraction is not None else self.crash_at
        return f"{self.source}-{self.destination}-{'overwrite-' if self.overwrite else ''}{where}"


def copies_natively(source: str, destination: str) -> bool:
    """Whether a plain convert of this pair takes the engine's own copy, not the batch loop.

    A same-engine convert without ``--tables`` or options, of an engine that has one
    (:meth:`Engine.native_copy`): it has no ``created`` or ``batch`` step and keeps no
    checkpoint (pipeline/native.py).
    """
    engine = get_engine(destination)
    return source == destination and engine.native_copy.__func__ is not Engine.native_copy.__func__  # type: ignore[attr-defined]


def engine_pairs(
    sources: Sequence[str], destinations: Sequence[str] | None = None
) -> list[tuple[str, str]]:
    """Every (source, destination) pair: each destination engine with each source engine."""
    dests = list(destinations if destinations is not None else engine_names())
    return [(s, d) for d in dests for s in sources]


def spread_points(
    pairs: Sequence[tuple[str, str]],
    count: int,
    *,
    every_pair: bool = False,
    overwrite: bool = False,
    end: float = 1.02,
) -> list[KillPoint]:
    """``count`` kill points at fractions spread evenly over (0, ``end``) of a run.

    Pairs take turns so that each pair is killed at fractions across the whole run; with
    ``every_pair`` every pair is killed at every fraction (the long run).
    """
    out = []
    for i in range(count):
        fraction = end * (i + 0.5) / count
        chosen = pairs if every_pair else [pairs[i % len(pairs)]]
        out += [KillPoint(s, d, fraction=fraction, overwrite=overwrite) for s, d in chosen]
    return out


def crash_points(
    pairs: Sequence[tuple[str, str]],
    names: Sequence[str],
    *,
    every_pair: bool = False,
    overwrite: bool = False,
) -> list[KillPoint]:
    """One kill per named crash point, pairs taking turns (or every pair)."""
    out = []
    for i, name in enumerate(names):
        chosen = pairs if every_pair else [pairs[(i * 7 + 3) % len(pairs)]]
        out += [KillPoint(s, d, crash_at=name, overwrite=overwrite) for s, d in chosen]
    return out


# --- corruption -------------------------------------------------------------------------


def data_files(path: Path) -> list[Path]:
    """The files of a store that hold its data (every regular file of a directory store)."""
    if path.is_file():
        return [path]
    skip = ("LOCK", "LOG")
    return sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith(skip))


def copy_store(src: Path, dst: Path) -> Path:
    """Copy a store file or directory."""
    if src.is_dir():
        shutil.copytree(src, dst, symlinks=True)
    else:
        shutil.copy2(src, dst)
    return dst


def truncate_file(path: Path, fraction: float) -> None:
    """Cut a file to ``fraction`` of its size."""
    size = path.stat().st_size
    os.truncate(path, int(size * fraction))


def flip_bytes(path: Path, offsets: Sequence[int]) -> None:
    """XOR 0xFF into the bytes at ``offsets`` (modulo the file size)."""
    data = bytearray(path.read_bytes())
    if not data:
        return
    for off in offsets:
        data[off % len(data)] ^= 0xFF
    path.write_bytes(bytes(data))


def mutate(data: bytes, rnd: random.Random, flips: int = 4) -> bytes:
    """``data`` with a few random bytes changed, or cut short, or with a run duplicated."""
    buf = bytearray(data)
    choice = rnd.random()
    if not buf:
        return bytes(rnd.randbytes(rnd.randint(0, 64)))
    if choice < 0.15:
        return bytes(buf[: rnd.randrange(len(buf))])
    if choice < 0.25:
        a = rnd.randrange(len(buf))
        b = min(len(buf), a + rnd.randint(1, 512))
        return bytes(buf[:b] + buf[a:])
    for _ in range(flips):
        buf[rnd.randrange(len(buf))] = rnd.randrange(256)
    return bytes(buf)


# --- a small file system ----------------------------------------------------------------


@contextmanager
def small_filesystem(size: str = "2m") -> Iterator[Path]:
    """A size-limited tmpfs mounted on a fresh directory; unmounted afterwards.

    Raises AssertionError (the test fails loudly, never skips) when mounting is refused.
    """
    where = Path(tempfile.mkdtemp(prefix="statemigrate-small-fs-"))
    proc = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", f"size={size}", "tmpfs", str(where)],
        capture_output=True,
        text=True,
        check=False,
    )
    if proc.returncode != 0:
        where.rmdir()
        raise AssertionError(
            f"cannot mount a {size} tmpfs for the disk-full test: {proc.stderr.strip()}"
        )
    try:
        yield where
    finally:
        subprocess.run(["umount", "-l", str(where)], capture_output=True, check=False)
        shutil.rmtree(where, ignore_errors=True)


def grow(fs: Path) -> None:
    """Free space on a :func:`small_filesystem`: grow it to 512 MiB."""
    grown = subprocess.run(
        ["mount", "-o", "remount,size=512m", str(fs)], capture_output=True, text=True, check=False
    )
    assert grown.returncode == 0, grown.stderr


def environment_for(point: KillPoint) -> dict[str, str]:
    """The environment of a kill run: the crash point, if any.

    The steps of the rename-aside fallback of ``place()`` are reached only where the
    file system cannot swap two paths in one step; those runs turn the swap off.
    """
    env = {CRASH_ENV: point.crash_at} if point.crash_at else {}
    if point.crash_at in ("place:aside", "place:renamed"):
        env[NO_EXCHANGE_ENV] = "1"
    return env


def describe(run: Run) -> str:
    """A short account of a run for assertion messages."""
    return f"exit {run.returncode} after {run.seconds:.2f}s\nstdout: {run.stdout[-500:]}\nstderr: {run.stderr[-1500:]}"


def write_content(engine: str, path: Path, content: Mapping[TableInfo, list]) -> Path:
    """Create a store holding exactly ``content`` (each table's records, sorted here)."""
    writer = get_engine(engine).create_writer(path)
    try:
        for table in sorted(content, key=lambda t: t.name.encode()):
            writer.create_table(table)
            records = sorted(content[table], key=lambda r: r[0])
            for i in range(0, len(records), 1000):
                writer.write_batch(table, records[i : i + 1000])
        writer.finish()
    finally:
        writer.close()
    return path
