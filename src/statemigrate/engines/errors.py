"""Driver errors as the contract's errors: one context manager, fed by a table per engine.

An engine declares what its driver's errors mean (:class:`DriverErrors`: which
exception classes or message words say busy, damaged, full, too big …); readers and
writers run driver calls inside :func:`mapped` (through ``Reader.errors`` and
``Writer.errors``), which raises the matching :class:`~statemigrate.errors.StateMigrateError`
with the engine's one-line message. The contract's own errors pass through untouched,
and so do ``KeyboardInterrupt``, ``SystemExit`` and ``GeneratorExit``. A driver panic
(pyo3's ``PanicException``, a BaseException, seen on damaged files) is always the
driver's error.
"""

from __future__ import annotations

import contextlib
import enum
import re
import shutil
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from ..errors import DestinationError, SourceError, StateMigrateError, StoreBusyError
from ..locks import busy_message

# Free bytes under which a failed write is taken for a full disk (some drivers report a
# short write on a full disk as a plain I/O error).
FULL_MARGIN = 16 << 20
_CONTROL = (KeyboardInterrupt, SystemExit, GeneratorExit)
# A private read copy (engines/snapshot.py) is named in a message as the store itself.
_PRIVATE_DIR = re.compile(r"\S*statemigrate-[a-z0-9]+-ro-[^/\s]*/")


class Meaning(enum.Enum):
    """What a driver error says about the store (and so the exit code)."""

    BUSY = "busy"  # another process holds the store: exit 3
    DAMAGED = "damaged"  # the store's bytes are wrong: exit 4
    UNSUPPORTED = "unsupported"  # a store (format, version) the engine cannot read: exit 4
    OUTSIDE_MODEL = "outside_model"  # a record the state model cannot hold: exit 4
    FULL = "full"  # no space left: exit 5
    TOO_BIG = "too_big"  # a key, value or transaction over the engine's limits: exit 5
    CONFLICT = "conflict"  # a duplicate or out-of-order key: exit 5
    READ_ONLY = "read_only"  # the destination cannot be written: exit 5
    REFUSED = "refused"  # the destination cannot hold what it is given: exit 5
    IO = "io"  # the disk failed: exit 5 writing, 4 reading
    FAILED = "failed"  # anything else: exit 4 when the source fails, 5 otherwise


_MESSAGES: dict[Meaning, str] = {
    Meaning.DAMAGED: "{where}: the store is damaged ({text})",
    Meaning.UNSUPPORTED: "{where}: not supported ({text})",
    Meaning.REFUSED: "{path}: {text}",
    Meaning.OUTSIDE_MODEL: "{where}: a record outside the model ({text})",
    Meaning.FULL: "{path}: disk full ({text})",
    Meaning.TOO_BIG: "{where}: over the engine's limits ({text})",
    Meaning.CONFLICT: "{path}: duplicate or out-of-order key ({text})",
    Meaning.READ_ONLY: "{path}: not writable ({text})",
}
_SOURCE = (Meaning.DAMAGED, Meaning.UNSUPPORTED, Meaning.OUTSIDE_MODEL)


class _Fields(dict[str, Any]):
    """Template fields; one a call site did not give reads as ``?``, never a KeyError."""

    def __missing__(self, key: str) -> str:
        return "?"


def _class_names(exc: BaseException) -> set[str]:
    names = set()
    for cls in type(exc).__mro__:
        names.add(cls.__name__)
        names.add(f"{cls.__module__}.{cls.__name__}")
    return names


def first_line(exc: BaseException, whole: bool = False) -> str:
    """The first line of an error's text (or all of it on one line), private read copies
    named as the store."""
    text = " ".join(str(exc).split()) if whole else str(exc).split("\n")[0]
    return _PRIVATE_DIR.sub("", text)


def disk_nearly_full(path: Path) -> bool:
    """Whether the file system holding ``path`` has less than :data:`FULL_MARGIN` free."""
    for p in (path, path.parent):
        try:
            return shutil.disk_usage(p).free < FULL_MARGIN
        except OSError:
            continue
    return False


@dataclass(frozen=True)
class Rule:
    """One line of an engine's error table.

    A rule matches an error when every condition it sets holds.

    Attributes:
        meaning: what a matching error says.
        types: exception class names (``"BusyError"`` or ``"apsw.BusyError"``), any of
            which the error is an instance of.
        words: fragments (lower case), any of which is in the error's first line.
        nearly_full: the destination's file system is nearly full (checked when writing).
        message: the message template, instead of the meaning's; fields ``path``,
            ``where``, ``doing``, ``text`` and those the call site gives.
        hint: the hint of the error raised.
    """

    meaning: Meaning
    types: tuple[str, ...] = ()
    words: tuple[str, ...] = ()
    nearly_full: bool = False
    message: str | None = None
    hint: str | None = None

    def matches(self, names: set[str], text: str, path: Path, writing: bool) -> bool:
        """Whether an error of classes ``names`` and first line ``text`` matches."""
        if self.types and not names.intersection(self.types):
            return False
        low = text.lower()
        if self.words and not any(w in low for w in self.words):
            return False
        return not self.nearly_full or (writing and disk_nearly_full(path))


@dataclass(frozen=True)
class DriverErrors:
    """What an engine's driver errors mean, declared once by the engine.

    Attributes:
        rules: tried in order; the first that matches decides.
        driver: class names of the driver's errors; other exceptions pass through
            (a pyo3 ``PanicException`` is always the driver's).
        failed: the message of an error no rule matches.
        source_failed: the same, when reading a source (default: ``failed``).
        scan_failed: the same, for an error while a table is read (default: the others).
        whole_text: the driver's whole message on one line, not its first line.
        noise: fragments the driver adds to every message, left out of it.
    """

    rules: tuple[Rule, ...] = ()
    driver: tuple[str, ...] = ("Exception",)
    failed: str = "{path}: {doing} failed ({text})"
    source_failed: str | None = None
    scan_failed: str | None = None
    whole_text: bool = False
    noise: tuple[str, ...] = ()

    def claims(self, exc: BaseException) -> bool:
        """Whether ``exc`` is the driver's error (one of ``driver``, or a pyo3 panic)."""
        names = _class_names(exc)
        return "PanicException" in names or bool(names.intersection(self.driver))

    def error(
        self,
        exc: BaseException,
        path: Path,
        doing: str = "",
        *,
        source: bool,
        writing: bool,
        holder: Callable[[], int | None] | None = None,
        busy_hint: str | None = None,
        failed: str | None = None,
        hint: str | None = None,
        **fields: Any,
    ) -> StateMigrateError | None:
        """The contract's error for a driver error, or None when it is not the driver's.

        Args:
            exc: the error raised inside a driver call.
            path: the store.
            doing: what was being done, for the message ("reading table 'a'").
            source: an unmatched error is the source's (exit 4), else the destination's.
            writing: a disk failure is the destination's (exit 5), else the source's.
            holder: finds the pid holding the store, for a busy store's message.
            busy_hint: the hint of a busy store's error.
            failed: the message of an unmatched error, instead of the table's.
            hint: the hint of an unmatched error.
            **fields: more fields for the templates (``where`` defaults to the path).
        """
        if not self.claims(exc):
            return None
        names = _class_names(exc)
        text = first_line(exc, self.whole_text)
        for fragment in self.noise:
            text = text.replace(fragment, "")
        fields = {"path": path, "where": path, "doing": doing, "text": text, **fields}
        rule = next((r for r in self.rules if r.matches(names, text, path, writing)), None)
        meaning = rule.meaning if rule else Meaning.FAILED
        if meaning is Meaning.BUSY:
            if rule and rule.message:  # the driver names no process: the rule says who
                message = rule.message.format_map(_Fields(fields))
            else:
                message = busy_message(path, holder() if holder is not None else None)
            return StoreBusyError(message, hint=(rule and rule.hint) or busy_hint)
        template = rule.message if rule and rule.message else _MESSAGES.get(meaning)
        if template is None:  # IO or FAILED
            template = failed or (self.source_failed if source else None) or self.failed
        cls: type[StateMigrateError]
        if meaning in _SOURCE:
            cls = SourceError
        elif meaning is Meaning.FAILED:
            cls = SourceError if source else DestinationError
        elif meaning is Meaning.IO:
            cls = DestinationError if writing else SourceError
        else:
            cls = DestinationError
        message = template.format_map(_Fields(fields))
        return cls(message, hint=rule.hint if rule and rule.hint else hint)

    @contextlib.contextmanager
    def mapped(self, path: Path, doing: str = "", **how: Any) -> Iterator[None]:
        """Raise the contract's error for a driver error raised inside the block.

        Args:
            path: the store.
            doing: what the block does, for the message.
            **how: as for :meth:`error` (``source`` and ``writing`` are required).
        """
        try:
            yield
        except StateMigrateError:
            raise
        except _CONTROL:
            raise
        except BaseException as exc:
            mapped = self.error(exc, path, doing, **how)
            if mapped is None:
                raise
            raise mapped from exc
