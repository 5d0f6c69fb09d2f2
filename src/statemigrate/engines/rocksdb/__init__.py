"""RocksDB through rocksdict in raw mode: one column family per table.

The writer is :mod:`.writer`; an app's own prefix layout (every table in one column
family, option ``layout``) is :mod:`.layout`.

Versioned records store an 8-byte big-endian version before the value (the model's
versioned codec). The writer uses WriteBatches with the WAL off and ``atomic_flush``
on, so that whatever survives a crash of the private ``.partial`` directory is a
consistent prefix: the records of a batch and its checkpoint are flushed together or
not at all. Tables are written in table format 5 by default (readable since RocksDB 6.6).

A store written is readable by the RocksDB option ``rocksdb_compat`` names (default 7.8,
Debian 12's): its OPTIONS files keep only the keys that release knows
(:mod:`.options_file`), and a table format it cannot read is refused. rocksdict's
own ``rocksdict-config.json``, which it writes in every directory it opens, is removed
from a store the writer made (and put back as it was in a store it opened). A store
whose comparator is not RocksDB's bytewise one is refused: its keys are not in byte order.
"""

from .engine import RocksdbEngine
from .reader import RocksdbReader
from .writer import RocksdbWriter

__all__ = ["RocksdbEngine", "RocksdbReader", "RocksdbWriter"]
