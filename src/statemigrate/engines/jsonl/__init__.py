"""The portable dump (DESIGN.md, "The portable dump"): UTF-8 JSON lines.

A header line ``{"statemigrate": 1, "schema": text|null, "revision": [ids]|null,
"meta": {...}}``, then per table a table line, its records (``k``/``v`` in base64,
``ver`` when versioned) and a batch line after each batch with the batch's digest;
a footer with every table's digest, the offset of its table line, the store digest
and ``meta``. The reader checks every batch line as it reads it and every table
against the footer, and refuses a file without a valid footer (a truncated dump).

Metadata: the header's documented ``schema`` and ``revision`` are the stamp (a dump
written to DESIGN.md has nothing else); the ``meta`` maps of the header and footer
(base64 values, what statemigrate 0.1 read the stamp from) carry every other entry
and the stamp again for older readers. ``revision`` is a JSON list of revision ids,
as in the metadata entry ``revision`` (:data:`~.base.META_REVISION`).

While a dump is being written, its checkpoint lives in ``PATH.checkpoint`` beside it:
the byte offset of the last complete batch and the metadata changed since the header.
Its size does not grow with the tables written: ``--resume`` truncates the dump at
that offset and rebuilds the list of tables from the table and batch lines before it.
"""

from __future__ import annotations

from .engine import JsonlEngine
from .format import CHECKPOINT_SUFFIX, CHUNK, FORMAT, JSONL_FACTS, _last_line
from .reader import JsonlReader
from .writer import JsonlWriter

__all__ = [
    "CHECKPOINT_SUFFIX",
    "CHUNK",
    "FORMAT",
    "JSONL_FACTS",
    "JsonlEngine",
    "JsonlReader",
    "JsonlWriter",
    "_last_line",
]
