"""Engines by name (entry-point group ``statemigrate.engines``) and detection by path.

Built-in and third-party engines come through the same door. Modules load lazily:
listing names reads entry points only; an engine's driver loads only when used.
"""

from __future__ import annotations

import difflib
import errno
import os
import re
from functools import cache, lru_cache
from importlib.metadata import entry_points
from pathlib import Path
from types import ModuleType
from typing import TypeAlias

from .engines.base import Engine
from .errors import SourceError, UsageError
from .fsutil import kind_of

# What every verb takes for a store: a path, or a string naming the engine too (ENGINE:PATH).
StorePath: TypeAlias = str | os.PathLike[str]

GROUP = "statemigrate.engines"
# Where the built-in engines live, for a source tree without installed metadata.
_BUILTIN_PACKAGE = "statemigrate.engines"


@lru_cache(maxsize=1)
def _entry_points() -> dict[str, str]:
    found = {ep.name: ep.value for ep in entry_points(group=GROUP)}
    return found or _builtin_engines()


def _builtin_engines() -> dict[str, str]:
    """The built-in engines when no metadata lists them (the package runs from a source tree).

    By convention an engine lives in the module of :mod:`statemigrate.engines` named
    as the engine; modules that hold none (``base``, shared helpers) are left out.
    Only this fallback imports the modules to tell.
    """
    import importlib
    import pkgutil

    # Not ``from . import engines``: the package's ``engines`` attribute is the api verb.
    package = importlib.import_module(_BUILTIN_PACKAGE)
    found = {}
    for info in pkgutil.iter_modules(package.__path__):
        if info.name.startswith("_"):
            continue
        try:
            module = importlib.import_module(f"{_BUILTIN_PACKAGE}.{info.name}")
        except ImportError:
            continue  # not importable here (a platform without fcntl): not listed
        engine = _engine_in(module, info.name)
        if engine is not None:
            found[info.name] = f"{module.__name__}:{engine.__name__}"
    return found


def engine_names() -> list[str]:
    """Names of every registered engine, sorted."""
    return sorted(_entry_points())


class EngineUnavailableError(UsageError):
    """A registered engine whose module cannot be imported (exit 2, like a missing driver).

    Whatever the import raised (an ImportError, a RuntimeError or a SyntaxError in a
    plugin) is its cause and is named in its message.
    """


@cache
def get_engine(name: str) -> type[Engine]:
    """The engine class registered as ``name``; the first call imports its module.

    Raises:
        UsageError: no engine has that name (the message lists the known ones).
        EngineUnavailableError: its module raised, in any way, when imported, or
            does not define the registered class.
    """
    target = _entry_points().get(name)
    if target is None:
        raise unknown_engine(name)
    module_name, _, attr = target.partition(":")
    import importlib

    try:
        module = importlib.import_module(module_name)
        engine = getattr(module, attr)
    except (Exception, SystemExit) as exc:  # a plugin's import may raise anything at all
        raise EngineUnavailableError(
            f"engine {name!r} cannot be loaded ({target}): {type(exc).__name__}: {exc}",
            hint="statemigrate engines lists every engine and why one is broken",
        ) from exc
    return engine  # type: ignore[no-any-return]


def unknown_engine(name: str, spec: str | None = None) -> UsageError:
    """The usage error (exit 2) for an engine name nobody registered.

    Args:
        name: the name given (``--from``/``--to``, or before the colon of ``spec``).
        spec: the ``ENGINE:PATH`` it came from, if any.

    Returns:
        The error: the known names close to ``name`` ("did you mean"), or every known one.
    """
    known = engine_names()
    near = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if near:
        message = f"unknown engine {name!r}; did you mean {near[0]!r}?"
        hints = [f"known engines: {', '.join(known)}"]
    else:
        message = f"unknown engine {name!r}; known engines: {', '.join(known)}"
        hints = []
    if spec is not None:
        hints.append(f"a path with a colon in its name is written ./{spec}")
    return UsageError(message, hint="; ".join(hints) or None)


# What a user writing ENGINE:PATH puts before the colon: a name, no path separator. One
# letter is a Windows drive (C:state.db), not an engine.
_ENGINE_PREFIX = re.compile(r"[A-Za-z0-9_-]{2,}")


def _engine_in(module: ModuleType, name: str) -> type[Engine] | None:
    """The engine class named ``name`` that ``module`` defines (or, a package, one of its
    modules), or None."""
    for value in vars(module).values():
        if (
            isinstance(value, type)
            and issubclass(value, Engine)
            and (value.__module__ + ".").startswith(module.__name__ + ".")
            and vars(value).get("name") == name
        ):
            return value
    return None


def engine_for_suffix(path: Path) -> type[Engine] | None:
    """The engine a new store named ``path`` is for, told by its suffix (any case).

    Every engine declares its ``suffixes``; of two claiming one, the higher
    ``detect_priority`` wins, then the first by name. An engine that cannot be loaded
    (a broken plugin, a platform its module does not import on) claims nothing.

    Returns:
        The engine, or None when no engine claims the suffix.
    """
    suffix = path.suffix.lower()
    if not suffix:
        return None
    claims = [eng for eng in _loadable_engines() if suffix in eng.suffixes]
    return max(claims, key=lambda eng: eng.detect_priority, default=None)


def _loadable_engines() -> list[type[Engine]]:
    """Every registered engine whose module imports, by name."""
    found = []
    for name in engine_names():
        try:
            found.append(get_engine(name))
        except EngineUnavailableError:  # one engine that cannot load must not hide the others
            continue
    return found


def detect_engine(path: Path) -> type[Engine]:
    """The engine whose signature ``path`` carries; changes nothing at ``path``.

    Raises:
        SourceError: the path does not exist, cannot be read, or matches no engine.
    """
    try:
        if not path.exists():
            raise SourceError(f"{path}: no such file or directory")
        matches = [eng for eng in _loadable_engines() if eng.detect(path)]
    except PermissionError as exc:
        raise SourceError(f"{path}: permission denied") from exc
    except OSError as exc:
        raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if not matches:
        raise SourceError(
            f"{path}: not a store of any known engine",
            hint="name the engine as ENGINE:PATH or with --from",
        )
    # A SQLite file is also a libSQL file: the engine declaring the higher priority wins.
    return max(matches, key=lambda eng: eng.detect_priority)


def parse_store(spec: StorePath, engine: str | None = None) -> tuple[type[Engine] | None, Path]:
    """Split ``ENGINE:PATH`` (or a plain path with an optional engine name).

    Returns:
        The named engine (None when it is left to detection) and the path.
    """
    spec = os.fspath(spec)
    name, sep, rest = spec.partition(":")
    if sep and name in _entry_points() and rest:
        if engine and engine != name:
            raise UsageError(f"{spec!r} names engine {name!r} but {engine!r} was given")
        return get_engine(name), Path(rest)
    if sep and rest and _ENGINE_PREFIX.fullmatch(name) and not os.path.lexists(spec):
        # A typo in the prefix (rockdb:x.db) would otherwise make a file of that name.
        raise unknown_engine(name, spec)
    return (get_engine(engine) if engine else None), Path(spec)


def resolve_source(spec: StorePath, engine: str | None = None) -> tuple[type[Engine], Path]:
    """An existing store: its engine (given or detected) and path.

    Every verb that reads a store comes through here, so the store's files are looked
    at before any driver opens them: only regular files and directories are stores.
    A FIFO, a device or a socket would block an open forever or never end a read.

    Raises:
        SourceError: the path is missing, a symbolic link loop, not a file or a
            directory, holds such a thing among its files, or matches no engine.
    """
    eng, path = parse_store(spec, engine)
    check_store_path(path)
    if eng is None:
        eng = detect_engine(path)
    check_store_files(eng, path)
    return eng, path


def check_store_path(path: Path) -> None:
    """Refuse (exit 4) a source path that is missing or not a regular file or directory.

    Raises:
        SourceError: one line naming the path and what is there instead.
    """
    try:
        what = kind_of(path)
    except FileNotFoundError as exc:
        if os.path.islink(path):
            raise SourceError(f"{path}: a symbolic link to nothing (dangling)") from exc
        raise SourceError(f"{path}: no such file or directory") from exc
    except PermissionError as exc:
        raise SourceError(f"{path}: permission denied") from exc
    except OSError as exc:
        if exc.errno == errno.ELOOP:
            raise SourceError(f"{path}: symbolic link loop") from exc
        raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if what not in ("a regular file", "a directory"):
        raise SourceError(f"{path}: {what}, not a store (a store is a file or a directory)")


def check_store_files(engine: type[Engine], path: Path) -> None:
    """Refuse (exit 4) a store whose side files or inner files are not regular files.

    A FIFO named like a store's ``-wal`` or among a RocksDB directory's files blocks
    the driver's open just as one given as the store itself does. A directory store's
    files are walked without following a link; a link out of the store is refused
    (:func:`.engines.snapshot.store_files`), so that no verb reads, through a store a
    user owns, a file that user cannot read.

    Raises:
        SourceError: naming the odd file.
    """
    if path.is_dir():
        from .engines.snapshot import store_files

        store_files(path)  # no link out of the store, no special file (its rule)
    for p in engine.store_paths(path)[1:]:
        try:
            what = kind_of(p)
        except OSError:
            continue  # gone meanwhile, or a dangling link: the driver says what it lacks
        if what not in ("a regular file", "a directory"):
            raise SourceError(f"{p}: {what} inside the store {path}, not a store's file")
