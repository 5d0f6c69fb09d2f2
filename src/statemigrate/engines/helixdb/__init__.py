"""HelixDB embedded (``helix-db`` with ``helix-db-embedded``): one node label per table.

A store is a directory ``P`` holding the database ``Client.embedded(Disk(P, "db"))``
keeps in ``P/db`` (SlateDB's ``manifest/``, ``wal/`` …): HelixDB percent-encodes a
database name with non-ASCII characters, inconsistently (``é`` became ``%C3%A9`` for
one directory and ``%25C3%25A9`` for another), so the name it sees is always the plain
``db`` and any path works. A store an app made as ``Disk(ROOT, NAME)``, that is
``ROOT/NAME`` holding ``manifest/`` directly, is read too. Each record is a node of its table's
label with ``k`` (lower-case hex of the key, under a ``node_range`` index, so that
string order is the key's byte order), ``v`` (base64 of the value) and, in a versioned
table, ``ver`` (the version as a signed 64-bit integer with the same bits, as SQLite).

Labels: a table's label is ``t`` followed by the lower-case hex of its UTF-8 name, so
any name (quotes, slashes, non-ASCII, 255 bytes) maps to a plain label and back.
Metadata is the label ``__statemigrate__`` (nodes ``key``/``value``, value in base64).

Tables are found in the store itself, as DESIGN.md lays it out: every label present
that is ``t`` + hex is a table (HelixDB has no catalog of labels, so one grouped count
over every node finds them; see the quirks below), and so is every table the metadata
names, which is how a table without records exists. A table's kind shows in its
records (``ver`` present or not); ``kind:<table>`` (``plain``/``versioned``) in the
metadata states it, which an empty table needs. What statemigrate writes also keeps
``helixdb.table:<label>`` (name, kind and the range index's build operation, to wait
for or to check); both key families are hidden from :meth:`metadata`, and any two sources of a
kind must agree. A label that is neither a table nor the metadata, or any edge, is not
in the layout: refused (exit 4) unless ``skip_foreign_tables``. Every record is checked
as it is read (``k`` lower-case hex, ``v`` base64, ``ver`` an integer exactly in
versioned tables), and a table read from its start must yield as many records as the
count found nodes of its label: a label without its range index on ``k``, or nodes
without a ``k``, are refused (exit 4) rather than read short.

Quirks handled here:

- ``Client.embedded_reader`` writes new manifest files (its snapshot is a checkpoint in
  SlateDB's manifest), so the reader opens a private image of the store made of hard
  links in a temporary directory (SlateDB never rewrites a file in place), and the
  source stays byte-identical. Reading while the app writes is not supported: stop it.
- A writer killed while HelixDB builds a range index leaves the build queued or running,
  and a reader (which never builds) sees it so for good: such a table is read by
  :func:`sorted_by_scan`, not refused. A writer waits only for the builds it started.
- Reads page through the range index, ``n_with_label_where(label, k > last)``, which
  returns ascending keys; every page is checked, and should one ever come back out of
  order the table is read by :func:`sorted_by_scan` instead (an external merge sort
  with bounded memory). Index builds are waited for before reading.
- Values travel as query parameters: a literal over a few MiB breaks HelixDB's planner.
- There is no lock file: a second writer silently takes the database over and the
  first one's writes then fail ("detected newer DB client", mapped to exit 3). Before
  opening an existing store for writing we refuse (exit 3) when another statemigrate
  holds its writer lock (``statemigrate.lock`` in the store, a POSIX lock) or another
  process with HelixDB loaded names the store on its command line or works in it. An app
  that opens the store otherwise is not seen: stop it first.
- The synchronous client runs ``asyncio.run()`` per call, so every call here runs on a
  private thread and the engine works under a caller's running event loop.
- HelixDB has no catalog of labels, and its query engine gathers the whole stream of a
  filtered, skipped or counted scan over all nodes before answering (a filter and then
  ``limit(1)`` still reads every node); only an id list or a label's range index reads
  in bounded steps. Finding the labels therefore takes one grouped count over every
  node when a store is opened: it adds about 60% to the time a whole read takes
  (measured at 40k records) and needs memory in proportion to the store. That call is given the store's size at
  :data:`SCAN_BYTES_PER_SECOND` instead of :data:`READ_TIMEOUT`.
- Storage is about 10x the payload and loads run at a few thousand records per second;
  :attr:`HelixdbEngine.space_factor` says so to the free-space check.
"""

from __future__ import annotations

from .client import HELIX_FACTS, database_of, label_of, name_of
from .engine import HelixdbEngine
from .reader import HelixdbReader, OutOfOrder, decode_rows, read_table, sorted_by_scan
from .writer import HelixdbWriter

__all__ = [
    "HELIX_FACTS",
    "HelixdbEngine",
    "HelixdbReader",
    "HelixdbWriter",
    "OutOfOrder",
    "database_of",
    "decode_rows",
    "label_of",
    "name_of",
    "read_table",
    "sorted_by_scan",
]
