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


# A hint is written once, in the command line's words (``pass --overwrite``); a library
# caller reads it in the keyword arguments' (``pass overwrite=True``). Phrases first,
# then each option on its own.
_LIBRARY_WORDS = (
    ("run the same command with --resume", "call it again with resume=True"),
    ("`statemigrate upgrade --create`", "upgrade(..., create=True)"),
    ("`statemigrate upgrade STORE --schema DIR`", "upgrade(STORE, DIR)"),
    ("`statemigrate layout init SRC`", "statemigrate.layout(None, SRC)"),
    ("`statemigrate layout init STORE`", "statemigrate.layout(None, STORE)"),
    ("--to ENGINE", "to_engine="),
    ("--redb-format 2", "the destination option redb_format=2"),
    ("--skip-foreign-tables", "the option skip_foreign_tables=True"),
    ("--source-layout", "a layout in source_options"),
    ("--allow-empty", "allow_empty=True"),
    ("--overwrite", "overwrite=True"),
    ("--resume", "resume=True"),
    ("--force", "force=True"),
    ("--create", "create=True"),
    ("--tables", "tables=[...]"),
    ("--layout", "a layout in its options"),
    ("--from", "from_engine="),
)


def library_words(hint: str | None) -> str | None:
    """``hint`` as a library caller reads it: keyword arguments for the CLI's options."""
    if hint is None or "--" not in hint and "`statemigrate " not in hint:
        return hint
    for cli, library in _LIBRARY_WORDS:
        hint = hint.replace(cli, library)
    return hint


class StateMigrateError(Exception):
    """Base class: a failure with a one-line message, an exit code and an optional hint.

    ``hint`` names the keyword arguments a library caller passes (``overwrite=True``);
    ``cli_hint`` is the same hint in the command line's words (``--overwrite``), which
    the CLI prints.
    """

    exit_code: int = EXIT_INTERNAL

    def __init__(self, message: str, *, hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.cli_hint = hint

    @property
    def hint(self) -> str | None:
        """What to do about it, in the library's words."""
        return library_words(self.cli_hint)

    @hint.setter
    def hint(self, value: str | None) -> None:
        self.cli_hint = value


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
