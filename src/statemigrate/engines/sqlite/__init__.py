"""SQLite through apsw, in the default layout of DESIGN.md (SQL text in :mod:`._sql`).

One ``WITHOUT ROWID`` table per table (``key BLOB PRIMARY KEY, value BLOB`` and, when
versioned, ``version INTEGER``), metadata in ``__statemigrate__``, the schema
revision mirrored into Alembic's ``alembic_version`` table.
"""

from .engine import APSW_ERRORS, SqliteEngine
from .reader import SqliteReader
from .writer import SqliteWriter

__all__ = ["APSW_ERRORS", "SqliteEngine", "SqliteReader", "SqliteWriter"]
