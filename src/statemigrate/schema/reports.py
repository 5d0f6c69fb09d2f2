"""What the schema verbs report: :class:`UpgradeReport` and :class:`CurrentReport`."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any


@dataclass
class UpgradeReport:
    """What :func:`upgrade`, :func:`downgrade` or :func:`stamp` did (or would do)."""

    store: str
    engine: str
    schema: str
    status: str = ""  # upgraded, downgraded, stamped, up_to_date, dry_run
    from_revisions: list[str] = field(default_factory=list)
    to_revisions: list[str] = field(default_factory=list)
    revisions: list[dict[str, Any]] = field(default_factory=list)
    digest_before: str | None = None
    digest_after: str | None = None
    backup: str | None = None
    recovered: str | None = None
    created: bool = False  # upgrade --create made the store (a first install)
    dry_run: bool = False
    seconds: float = 0.0

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        out["from"] = out.pop("from_revisions")
        out["to"] = out.pop("to_revisions")
        return out


@dataclass
class CurrentReport:
    """What :func:`current` and :func:`check` found."""

    store: str
    engine: str
    current: list[str]
    heads: list[str] | None = None
    at_head: bool | None = None
    unknown: list[str] = field(default_factory=list)
    changed_files: list[dict[str, str]] = field(default_factory=list)
    checksums: dict[str, str] = field(default_factory=dict)
    # An upgrade that was interrupted and not finished yet (see journal.interrupted).
    interrupted: dict[str, Any] | None = None
    # Tables named like an upgrade's private tables that no upgrade recorded: left alone.
    unrecorded_private: list[str] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        """At head, every revision known, no applied file changed, no unfinished upgrade."""
        return (
            bool(self.at_head)
            and not self.unknown
            and not self.changed_files
            and self.interrupted is None
        )

    def to_json(self) -> dict[str, Any]:
        out = dict(self.__dict__)
        if self.heads is not None:
            out["ok"] = self.ok
        return out
