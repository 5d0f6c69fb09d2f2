"""fjall 3.x (on-disk format 3): the engine (:mod:`.engine`), on the fjall family's
reader and writer (:mod:`statemigrate.engines._fjall`)."""

from .engine import Fjall3Engine

__all__ = ["Fjall3Engine"]
