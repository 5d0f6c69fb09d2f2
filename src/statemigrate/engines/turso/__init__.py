"""Turso (pyturso): the engine (:mod:`.engine`), on the SQL family's DB-API reader and
writer (:mod:`statemigrate.engines._dbapi`)."""

from .engine import TursoEngine, TursoReader

__all__ = ["TursoEngine", "TursoReader"]
