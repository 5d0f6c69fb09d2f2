"""The RocksDB MANIFEST a store's ``CURRENT`` names, checked before RocksDB reads it.

RocksDB's log reader spins forever on some damaged MANIFEST tails (no error is ever
raised; found by fuzzing rocksdict 0.3.29), so the framing of every record is checked
natively first (``_native.rocksdb_manifest_check``): blocks, headers, checksums,
fragment order. Memory stays one 32 KiB block whatever the MANIFEST's size.
"""

from __future__ import annotations

from pathlib import Path

from ...errors import SourceError


def check_manifest(path: Path, shown: Path | None = None) -> None:
    """Raise SourceError when the MANIFEST named by ``path/CURRENT`` is damaged.

    A missing ``CURRENT`` or MANIFEST is left to RocksDB, which reports it itself.
    ``shown`` is the store's path for messages when ``path`` is its private image.
    """
    from ... import _native

    where = path if shown is None else shown

    try:
        name = (path / "CURRENT").read_bytes()
    except OSError:
        return
    text = name.decode("ascii", "replace").rstrip("\n")
    if not text.startswith("MANIFEST-") or not text[9:].isdigit():
        raise SourceError(f"{where}: CURRENT is damaged (it names {text[:40]!r}, not a MANIFEST)")
    manifest = path / text
    if not manifest.is_file():
        return
    problem = _native.rocksdb_manifest_check(str(manifest))
    if problem is not None:
        raise SourceError(f"{where}: {text} is damaged ({problem})")
