"""What :func:`~statemigrate.pipeline.convert` did: per table and for the whole store."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from ..digest import Digest, store_digest
from ..model import TableInfo


@dataclass
class TableReport:
    """One table's outcome."""

    name: str
    kind: str
    records: int
    bytes: int
    digest: str

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly form."""
        return dict(self.__dict__)


@dataclass
class ConvertReport:
    """What :func:`~statemigrate.pipeline.convert` did."""

    source: str
    source_engine: str
    destination: str
    destination_engine: str
    tables: list[TableReport] = field(default_factory=list)
    store_digest: str = ""
    verified: bool = False
    resumed: bool = False
    # --resume found the destination already in place and equal to the source (the
    # run that placed it was killed after the rename): nothing was written.
    already_complete: bool = False
    seconds: float = 0.0
    # What the reader left out (skip_foreign_tables): {"what": "table 'x'", "records": n}.
    skipped: list[dict[str, Any]] = field(default_factory=list)

    @property
    def records(self) -> int:
        """Records copied, over every table."""
        return sum(t.records for t in self.tables)

    @property
    def bytes(self) -> int:
        """Payload bytes (keys and values) copied, over every table."""
        return sum(t.bytes for t in self.tables)

    def to_json(self) -> dict[str, Any]:
        """A JSON-friendly form (``convert --json``; docs/schemas/convert.schema.json)."""
        out = {k: v for k, v in self.__dict__.items() if k != "tables"}
        out["seconds"] = round(self.seconds, 3)
        out["tables"] = [t.to_json() for t in self.tables]
        out["records"] = self.records
        out["bytes"] = self.bytes
        return out


def fill_report(
    report: ConvertReport,
    chosen: list[TableInfo],
    digests: dict[str, Digest],
    sizes: dict[str, int],
) -> None:
    """Set the report's tables and store digest from the source's digests and sizes."""
    report.tables = [
        TableReport(
            t.name, t.kind.value, digests[t.name].count, sizes.get(t.name, 0), digests[t.name].hex()
        )
        for t in chosen
    ]
    report.store_digest = store_digest((t.name, t.kind, digests[t.name]) for t in chosen)
