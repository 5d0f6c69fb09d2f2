"""Errors of schema upgrades, carrying the contract's exit codes."""

from __future__ import annotations

from ..errors import EXIT_DESTINATION, EXIT_DIFFERENT, StateMigrateError, UsageError


class RevisionUnknownError(StateMigrateError):
    """The store is stamped with a revision this schema does not know (a newer app wrote it).

    Exit 1, like ``check`` finding the store off its expected revision: nothing changed.
    """

    exit_code = EXIT_DIFFERENT


class OffRevisionError(StateMigrateError):
    """``check``: the store is not at the schema's head, or an applied file changed."""

    exit_code = EXIT_DIFFERENT


class RevisionFailedError(StateMigrateError):
    """A revision's ``upgrade()``/``downgrade()`` failed; the store stays at the last revision done.

    Exit 5 (the store refused the change). The message names the revision.
    """

    exit_code = EXIT_DESTINATION


class SchemaError(UsageError):
    """The schema directory is missing, broken, or a revision target does not resolve."""
