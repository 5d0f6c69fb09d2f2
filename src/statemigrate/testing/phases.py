"""A progress sink that records the phases a convert announces (which path ran)."""

from __future__ import annotations

from ..progress import Progress


class Phases(Progress):
    """Records the phases a convert announces ("copying natively (…)", "converting" …)."""

    def __init__(self) -> None:
        self.phases: list[str] = []

    def phase(self, name: str) -> None:
        self.phases.append(name)

    def native(self) -> bool:
        """Whether the convert took the engine's own copy (and not the batch loop too)."""
        copied = any(p.startswith("copying natively") for p in self.phases)
        assert copied != ("converting" in self.phases), self.phases
        return copied
