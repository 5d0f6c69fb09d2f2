"""What :func:`~statemigrate.api.convert` did: per table and for the whole store."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from ..digest import Digest, store_digest
from ..model import TableInfo


@dataclass
class TableReport:
    """One table's outcome.

    ``digest`` is None after a convert with ``verify=False`` (no verification work was
    done: ``statemigrate checksum`` gives it); ``records`` and ``bytes`` are None where
    nothing counted them (the engine's own copy, unverified, reads no record).
    """

    name: str
    kind: str
    records: int | None
    bytes: int | None
    digest: str | None

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly form."""
        return dict(self.__dict__)


@dataclass
class ConvertReport:
    """What :func:`~statemigrate.api.convert` did (``store_digest`` None: not verified)."""

    source: str
    source_engine: str
    destination: str
    destination_engine: str
    tables: list[TableReport] = field(default_factory=list)
    store_digest: str | None = None
    verified: bool = False
    resumed: bool = False
    # --resume found the destination already in place and equal to the source (the
    # run that placed it was killed after the rename): nothing was written.
    already_complete: bool = False
    seconds: float = 0.0
    # What the reader left out (skip_foreign_tables): {"what": "table 'x'", "records": n}.
    skipped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def records(self) -> int | None:
        """Records copied, over every table (None: not counted)."""
        return _total(t.records for t in self.tables)

    @property
    def bytes(self) -> int | None:
        """Payload bytes (keys and values) copied, over every table (None: not counted)."""
        return _total(t.bytes for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly form (``convert --json``; docs/schemas/convert.schema.json)."""
        out = {k: v for k, v in self.__dict__.items() if k != "tables"}
        out["seconds"] = round(self.seconds, 3)
        out["tables"] = [t.to_json() for t in self.tables]
        out["records"] = self.records
        out["bytes"] = self.bytes
        return out


def _total(counts: Iterable[int | None]) -> int | None:
    total = 0
    for n in counts:
        if n is None:
            return None
        total += n
    return total


def fill_report(
    report: ConvertReport,
    chosen: list[TableInfo],
    digests: dict[str, Digest],
    sizes: dict[str, int],
) -> None:
    """Set the report's tables and store digest from the source's digests and sizes.

    Only a verified convert carries digests; a table the run did not count (the
    engine's own copy, unverified, reads no record) has no records or bytes.
    """
    report.tables = []
    for t in chosen:
        d = digests.get(t.name)
        report.tables.append(
            TableReport(
                t.name,
                t.kind.value,
                None if d is None else d.count,
                None if d is None else sizes.get(t.name, 0),
                d.hex() if d is not None and report.verified else None,
            )
        )
    if report.verified:
        report.store_digest = store_digest((t.name, t.kind, digests[t.name]) for t in chosen)
