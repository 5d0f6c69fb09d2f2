"""Errors that carry the contract's exit codes (DESIGN.md, "Exit codes").

The library raises these; only the CLI turns them into one line on stderr and an
exit status.
"""

from __future__ import annotations

EXIT_OK = 0
EXIT_DIFFERENT = 1
EXIT_USAGE = 2
EXIT_BUSY = 3
EXIT_SOURCE = 4
EXIT_DESTINATION = 5
EXIT_INTERRUPTED = 6
EXIT_INTERNAL = 70


class StateMigrateError(Exception):
    """Base class: a failure with a one-line message, an exit code and an optional hint."""

    exit_code: int = EXIT_INTERNAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = hint


class UsageError(StateMigrateError):
    """Bad option, unknown engine, missing driver."""

    exit_code = EXIT_USAGE


class StoreBusyError(StateMigrateError):
    """Another process holds the store (the app is running)."""

    exit_code = EXIT_BUSY


class SourceError(StateMigrateError):
    """The source cannot be read: corrupt, truncated, unsupported, wrong engine, changed."""

    exit_code = EXIT_SOURCE


class LayoutNotNeeded(SourceError):
    """A layout file was asked for a store already in statemigrate's own layout for its
    engine (``layout init``): it is read and written as it is, without one. The command
    line says so and exits 0."""


class DestinationError(StateMigrateError):
    """The destination is refused: exists, not writable, no space, a key the engine rejects."""

    exit_code = EXIT_DESTINATION


class LinkRefusedError(DestinationError):
    """A store is not written: a symbolic link (or no regular file) is where its engine's
    writer opens a file (``locks.refuse_linked_side_files``)."""


class InterruptedByUser(StateMigrateError):
    """A signal stopped the work; a ``--resume`` finishes it."""

    exit_code = EXIT_INTERRUPTED


class PlatformWarning(UserWarning):
    """Something this platform cannot do (a lock probe) is skipped; the work goes on.

    The CLI prints it as one line on stderr; a program filters it like any warning.
    """


class MissingDriverError(UsageError):
    """The engine's Python driver is not installed."""

    def __init__(self, engine: str, extra: str) -> None:
        super().__init__(
            f"the {engine} engine needs its driver, which is not installed",
            hint=f"pip install 'statemigrate[{extra}]'",
        )


class UpgradeInterruptedError(SourceError):
    """A read-only command met a store whose upgrade was interrupted (exit 4).

    Its tables are between two revisions until ``statemigrate upgrade`` (or
    ``downgrade``) finishes the revision; reading it now would copy or digest that.
    """
