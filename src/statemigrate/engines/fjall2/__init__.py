"""fjall 2.x (on-disk format 2): the engine (:mod:`.engine`), on the fjall family's
reader and writer (:mod:`statemigrate.engines._fjall`)."""

from .engine import Fjall2Engine, escape, unescape

__all__ = ["Fjall2Engine", "escape", "unescape"]
