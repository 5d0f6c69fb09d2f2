"""LMDB through py-lmdb: one named database per table, in a directory holding data.mdb.

Versioned records store an 8-byte big-endian version before the value (the model's
versioned codec, as RocksDB).
Metadata lives in the named database ``__statemigrate__``, which also records which
tables are versioned (``kind:<name>``, hidden from :meth:`metadata`).

Reading (one read transaction, never a write to ``data.mdb``) is :mod:`.reader`;
writing, with the writer mutex's owner read from the lock file first, :mod:`.writer`
and :mod:`.lockfile`; an app's own layout, :mod:`.layout`.
"""

from .engine import LmdbEngine
from .reader import LmdbReader
from .writer import LmdbWriter

__all__ = ["LmdbEngine", "LmdbReader", "LmdbWriter"]
