"""Errors of schema upgrades, carrying the contract's exit codes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from ..errors import (
    EXIT_DESTINATION,
    EXIT_DIFFERENT,
    SourceError,
    StateMigrateError,
    UsageError,
)


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


def with_adoption_hint(
    exc: RevisionFailedError, stamp: list[str], tables: list[Any], store: Path, schema: Path
) -> None:
    """Give ``exc`` the hint to ``stamp`` when a store holding tables but no revision (an app's
    store from before it used statemigrate) had a table the first revision creates."""
    if not stamp and tables and "already exists" in exc.message:
        exc.hint = (
            f"{store} holds tables but no schema revision: if it already has the schema, "
            f"adopt it with `statemigrate stamp {store} --schema {schema} REVISION` (sets "
            "the revision, runs nothing), then upgrade"
        )


class StoreMissingError(SourceError):
    """There is no store at the path to upgrade (exit 4, ``"status": "missing"``).

    Nothing is created: an installer tells a first install (no state yet) from a
    failed upgrade by this status.
    """


class SchemaError(UsageError):
    """The schema directory is missing, broken, or a revision target does not resolve."""
