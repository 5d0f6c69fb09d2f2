"""Engines by name (entry-point group ``statemigrate.engines``) and detection by path.

Built-in and third-party engines come through the same door. Modules load lazily:
listing names reads entry points only; an engine's driver loads only when used.
"""

from __future__ import annotations

from functools import cache, lru_cache
from importlib.metadata import entry_points
from pathlib import Path

from .engines.base import Engine
from .errors import SourceError, UsageError

GROUP = "statemigrate.engines"

# Fallback when the package runs from a source tree without installed metadata.
_BUILTIN = {
    "sqlite": "statemigrate.engines.sqlite:SqliteEngine",
    "rocksdb": "statemigrate.engines.rocksdb:RocksdbEngine",
    "jsonl": "statemigrate.engines.jsonl:JsonlEngine",
    "lmdb": "statemigrate.engines.lmdb:LmdbEngine",
    "libsql": "statemigrate.engines.libsql:LibsqlEngine",
    "turso": "statemigrate.engines.turso:TursoEngine",
    "helixdb": "statemigrate.engines.helixdb:HelixdbEngine",
    "redb": "statemigrate.engines.redb:RedbEngine",
}


@lru_cache(maxsize=1)
def _entry_points() -> dict[str, str]:
    found = dict(_BUILTIN)
    for ep in entry_points(group=GROUP):
        found[ep.name] = ep.value
    return found


def engine_names() -> list[str]:
    """Names of every registered engine, sorted."""
    return sorted(_entry_points())


@cache
def get_engine(name: str) -> type[Engine]:
    """The engine class registered as ``name``.

    Raises:
        UsageError: no engine has that name (the message lists the known ones).
    """
    target = _entry_points().get(name)
    if target is None:
        raise UsageError(f"unknown engine {name!r}; known engines: {', '.join(engine_names())}")
    module_name, _, attr = target.partition(":")
    import importlib

    module = importlib.import_module(module_name)
    engine = getattr(module, attr)
    return engine  # type: ignore[no-any-return]


def detect_engine(path: Path) -> type[Engine]:
    """The engine whose signature ``path`` carries; changes nothing at ``path``.

    Raises:
        SourceError: the path does not exist, cannot be read, or matches no engine.
    """
    try:
        if not path.exists():
            raise SourceError(f"{path}: no such file or directory")
        matches = [n for n in engine_names() if get_engine(n).detect(path)]
    except PermissionError as exc:
        raise SourceError(f"{path}: permission denied") from exc
    except OSError as exc:
        raise SourceError(f"{path}: cannot be read ({exc.strerror or exc})") from exc
    if not matches:
        raise SourceError(
            f"{path}: not a store of any known engine",
            hint="name the engine as ENGINE:PATH or with --from",
        )
    # A SQLite file is also a libSQL file: prefer the most specific, then sqlite.
    preferred = [n for n in matches if n == "sqlite"] or matches
    return get_engine(preferred[0])


def parse_store(spec: str, engine: str | None = None) -> tuple[type[Engine] | None, Path]:
    """Split ``ENGINE:PATH`` (or a plain path with an optional engine name).

    Returns:
        The named engine (None when it is left to detection) and the path.
    """
    name, sep, rest = spec.partition(":")
    if sep and name in _entry_points() and rest:
        if engine and engine != name:
            raise UsageError(f"{spec!r} names engine {name!r} but {engine!r} was given")
        return get_engine(name), Path(rest)
    return (get_engine(engine) if engine else None), Path(spec)


def resolve_source(spec: str, engine: str | None = None) -> tuple[type[Engine], Path]:
    """An existing store: its engine (given or detected) and path."""
    eng, path = parse_store(spec, engine)
    if eng is None:
        eng = detect_engine(path)
    elif not path.exists():
        raise SourceError(f"{path}: no such file or directory")
    return eng, path
