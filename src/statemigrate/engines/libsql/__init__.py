"""libSQL (``libsql`` / ``libsql-experimental``): the engine (:mod:`.engine`), on the SQL
family's DB-API reader and writer (:mod:`statemigrate.engines._dbapi`)."""

from .engine import LibsqlEngine, map_error

__all__ = ["LibsqlEngine", "map_error"]
