"""What the command line prints: one-line errors, JSON reports and text for people.

Everything written to stdout goes through :func:`echo`, so a reader that goes away
(``statemigrate inspect STORE | head -1``) ends the command quietly, not as an error.
"""

from __future__ import annotations

import errno
import json
import os
import re
import sys
import traceback
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, NoReturn, TypeVar

import click

from ..errors import (
    EXIT_BUSY,
    EXIT_DESTINATION,
    EXIT_DIFFERENT,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_SOURCE,
    EXIT_USAGE,
    StateMigrateError,
)
from ..schema.errors import StoreMissingError

# The version of the ``--json`` report shapes (docs/schemas/*.schema.json): raised when
# a field is removed or changes meaning, not when one is added.
JSON_SCHEMA_VERSION = 1
# Commands whose object changed since version 1 (docs/schemas/<command>.schema.json):
# convert 2, its digests null after --no-verify (no verification work is done).
SCHEMA_VERSIONS = {"convert": 2}


def schema_version(command: str) -> int:
    """The ``schema_version`` of ``command``'s ``--json`` object."""
    return SCHEMA_VERSIONS.get(command, JSON_SCHEMA_VERSION)


def count(n: int | None) -> str:
    """A count for a table row: ``1,234``, or ``-`` where nothing counted it."""
    return "-" if n is None else f"{n:,}"


T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])

# Keys of click's ``ctx.meta``, shared by the group's context and the command's.
TRACEBACK = "statemigrate.traceback"
_QUIET = "statemigrate.quiet"
_VERBOSE = "statemigrate.verbose"

QUIET_HELP = "Print nothing on stderr but an error (no progress, no notes)."
VERBOSE_HELP = "On an error, also print its full traceback."


def _noted(*keys: str) -> Callable[[click.Context, click.Parameter, bool], None]:
    def note(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
        if value:
            for key in keys:
                ctx.meta[key] = True

    return note


def json_option(help: str = "Print the report as JSON.") -> Callable[[F], F]:
    """``--json``: the report (or the failure) as one JSON object on stdout."""
    return click.option("--json", "as_json", is_flag=True, help=help)


def verbosity_options(quiet: str = QUIET_HELP, verbose: str = VERBOSE_HELP) -> Callable[[F], F]:
    """``-q/--quiet`` and ``-v/--verbose``, the one declaration every command uses.

    The command reads them with :func:`quiet` and :func:`verbose`; ``-v`` also shows an
    error's traceback (the group's ``--traceback``).

    Args:
        quiet: what ``-q`` leaves out on this command.
        verbose: what ``-v`` adds on this command.
    """

    def decorate(fn: F) -> F:
        fn = click.option(
            "--verbose", "-v", is_flag=True, expose_value=False, is_eager=True,
            callback=_noted(_VERBOSE, TRACEBACK), help=verbose,
        )(fn)  # fmt: skip
        return click.option(
            "--quiet", "-q", is_flag=True, expose_value=False, is_eager=True,
            callback=_noted(_QUIET), help=quiet,
        )(fn)  # fmt: skip

    return decorate


def quiet() -> bool:
    """Whether the running command was given ``-q``."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.meta.get(_QUIET))


def verbose() -> bool:
    """Whether the running command was given ``-v``."""
    ctx = click.get_current_context(silent=True)
    return bool(ctx and ctx.meta.get(_VERBOSE))


class StdoutClosed(Exception):
    """The reader of stdout went away (a closed pipe): there is nobody left to tell."""


def say(text: str) -> bool:
    """Print one line on stderr; False (and nothing raised) when its reader has gone.

    A closed stderr (``2>&1 | head``) must not stop a convert or an upgrade half-way:
    the work goes on without its log, and the exit code still tells how it ended.
    """
    try:
        click.echo(text, err=True)
    except OSError as exc:  # BrokenPipeError is the EPIPE one
        if exc.errno != errno.EPIPE:
            raise
        return False
    return True


def echo(text: str = "") -> None:
    """Print one line on stdout.

    Raises:
        StdoutClosed: stdout is a pipe whose reader has gone.
    """
    try:
        click.echo(text)
    except BrokenPipeError as exc:
        raise StdoutClosed from exc


def emit_json(data: Any) -> None:
    """Print ``data`` as one indented JSON document on stdout."""
    echo(json.dumps(data, indent=2, sort_keys=False))


def silence_stdout() -> None:
    """Point stdout at /dev/null, so the interpreter's last flush meets no closed pipe."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # not a real file (a test runner's buffer)
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


# --- failures ------------------------------------------------------------------------


@dataclass(frozen=True)
class Failure:
    """A failure as the command line shows it: one line, an optional hint, an exit code."""

    message: str
    hint: str | None
    exit_code: int

    def to_json(self) -> dict[str, Any]:
        """The fields every ``--json`` error object carries."""
        return {"error": self.message, "hint": self.hint, "exit_code": self.exit_code}


def os_error_code(exc: OSError) -> tuple[int, str | None]:
    """Exit code and hint of an OSError that no engine turned into its own error.

    A full or read-only disk is the destination's (only writing meets it); anything
    else (permission, symlink loop, missing file) is met opening a store to read, the
    destination's directory being checked before.
    """
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG):
        return EXIT_DESTINATION, "free some space; the destination's .partial is kept for --resume"
    return EXIT_SOURCE, None


RESUME_HINT = "run the same command with --resume to finish"
AGAIN_HINT = "run the same command again"


def describe(exc: BaseException, options: set[str]) -> Failure:
    """The message, hint and exit code the contract gives ``exc``.

    Args:
        exc: what the command raised.
        options: the long options of the command that failed; a hint names no other.
    """
    if isinstance(exc, StateMigrateError):
        return Failure(exc.message, hint_for(exc.cli_hint, options), exc.exit_code)
    if isinstance(exc, KeyboardInterrupt):
        return Failure(
            "interrupted", hint_for(RESUME_HINT, options) or AGAIN_HINT, EXIT_INTERRUPTED
        )
    if isinstance(exc, OSError):
        code, hint = os_error_code(exc)
        path = f"{exc.filename}: " if exc.filename else ""
        return Failure(f"{path}{exc.strerror or exc}", hint_for(hint, options), code)
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return Failure(
        f"internal error: {type(exc).__name__}: {exc} "
        f"(at {os.path.basename(where.filename)}:{where.lineno})",
        "a bug in statemigrate: please report it with the output of the same command run "
        "with --traceback",
        EXIT_INTERNAL,
    )


def options_of(*commands: click.Command) -> set[str]:
    """The long options (``--from`` …) of these commands, hidden ones included.

    An option declaring a metavar is there twice: ``--to`` and ``--to ENGINE``, so
    that a hint saying ``--to ENGINE`` is told from ``upgrade``'s ``--to REV``.
    """
    found = set()
    for command in commands:
        for param in command.params:
            for opt in (*param.opts, *param.secondary_opts):
                if opt.startswith("--"):
                    found.add(opt)
                    if isinstance(param, click.Option) and param.metavar:
                        found.add(f"{opt} {param.metavar}")
    return found


# A hint's alternatives and steps: "A, or B", "A or B", "A, then B".
_CLAUSES = re.compile(r"(, or |, then | or )")
# An option, and the word of capitals after it that says what it takes (--to ENGINE).
_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)(?: ([A-Z][A-Z_]*)\b(?!:))?")
# Another command, quoted whole (`statemigrate upgrade STORE --schema DIR`): its options
# are that command's, not the failing one's.
_OTHER_COMMAND = re.compile(r"`statemigrate [^`]*`")


def hint_options(hint: str) -> set[str]:
    """The options a hint tells the user to pass to the command that failed.

    Returns:
        Each as ``--opt``, or ``--opt METAVAR`` when the hint says what it takes.
    """
    return {
        f"{opt} {what}" if what else opt
        for opt, what in _OPTION.findall(_OTHER_COMMAND.sub("", hint))
    }


def hint_for(hint: str | None, options: set[str]) -> str | None:
    """``hint`` without the alternatives that name an option the command lacks.

    The library's hints speak of the command line's options (``--from``, ``--resume``,
    ``--skip-foreign-tables``), but not every command has each of them: ``inspect``
    has no ``--from``. A hint naming only options the command has is unchanged.

    Args:
        hint: the library's hint, or None.
        options: the long options of the command that failed (``--from`` …).

    Returns:
        The hint, its alternatives naming a missing option left out, or None when
        nothing is left.
    """
    if hint is None or hint_options(hint) <= options:
        return hint
    parts = _CLAUSES.split(hint)  # clause, separator, clause, ...
    kept = ""
    for sep, clause in zip(["", *parts[1::2]], parts[::2]):
        if hint_options(clause) <= options:
            kept += (sep if kept else "") + clause
    return kept or None


# --- one JSON object on every path ----------------------------------------------------

# The status a failure has in ``--json``, one per exit code: an installer or a script
# branches on either and finds the same answer.
_FAILURE_STATUS = {
    EXIT_DIFFERENT: "too_new",  # the only failure raised with exit 1: a newer app's store
    EXIT_USAGE: "usage_error",
    EXIT_BUSY: "busy",
    EXIT_SOURCE: "unreadable",
    EXIT_DESTINATION: "failed",
    EXIT_INTERRUPTED: "interrupted",
}


def failure_status(exc: BaseException | None, exit_code: int) -> str:
    """The installer's word for a failure (``--json``'s ``status``).

    ``missing`` (nothing at the path) is told apart from ``unreadable``: both exit 4.
    """
    if exit_code == EXIT_SOURCE and _is_missing(exc):
        return "missing"
    return _FAILURE_STATUS.get(exit_code, "error")


def _is_missing(exc: BaseException | None) -> bool:
    if isinstance(exc, StoreMissingError):
        return True
    return isinstance(exc, StateMigrateError) and isinstance(exc.__cause__, FileNotFoundError)


def envelope(command: str, status: str, exit_code: int) -> dict[str, Any]:
    """The fields every ``--json`` object starts with, success or not."""
    return {
        "schema_version": schema_version(command),
        "command": command,
        "status": status,
        "exit_code": exit_code,
        "error": None,
        "hint": None,
    }


def emit_report(command: str, status: str, exit_code: int, report: dict[str, Any]) -> None:
    """Print a successful (or exit-1) report as one JSON object with its envelope."""
    emit_json({**envelope(command, status, exit_code), **report})


def emit_failure(
    command: str, exc: BaseException | None, failure: Failure, context: dict[str, Any]
) -> None:
    """Print a failure as one JSON object: the envelope and what the command was given."""
    out = envelope(command, failure_status(exc, failure.exit_code), failure.exit_code)
    emit_json({**out, **failure.to_json(), **context})


def reported(command: str, as_json: bool, context: dict[str, Any], fn: Callable[[], T]) -> T:
    """Run ``fn``; with ``--json`` a failure is also one JSON object on stdout.

    The group then prints the one line on stderr and exits with the same code
    (click's own usage errors are the group's to report).

    Args:
        command: the command's name (``--json``'s ``command``).
        as_json: whether ``--json`` was given.
        context: what the command was given (``store``, ``source`` …), for the object.
        fn: the library call.
    """
    try:
        return fn()
    except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort, StdoutClosed):
        raise
    except (Exception, KeyboardInterrupt) as exc:
        if as_json:
            ctx = click.get_current_context()
            emit_failure(command, exc, describe(exc, options_of(ctx.command)), context)
        raise


def json_requested(args: list[str]) -> bool:
    """Whether ``--json`` is among a command line's options (before a ``--``)."""
    return "--json" in (args[: args.index("--")] if "--" in args else args)


def fail(failure: Failure) -> NoReturn:
    """Print the failure as one line (and its hint) on stderr and exit with its code."""
    from .progress import clear

    clear()  # a bar left open by the failure would share the message's line
    if say(f"statemigrate: error: {failure.message}") and failure.hint:
        say(f"hint: {failure.hint}")
    sys.exit(failure.exit_code)


# --- text for people -----------------------------------------------------------------


def print_inspect(report: Any) -> None:
    """The text form of an :class:`~statemigrate.api.InspectReport`: facts, then a table."""
    from .tables import inspect_lines

    for line in inspect_lines(report):
        echo(line)


def print_engines(rows: list[dict[str, Any]]) -> None:
    """The text form of :func:`statemigrate.api.engines`: an aligned table."""
    from .tables import engines_lines

    for line in engines_lines(rows):
        echo(line)


def print_checksum(report: Any, aligned: bool) -> None:
    """The text form of a :class:`~statemigrate.verification.ChecksumReport`.

    Args:
        report: the report.
        aligned: a table with a header (a terminal), else one tab-separated line a
            table (table, kind, records, digest), which scripts read.
    """
    if aligned:
        from .tables import printable, table

        rows = [
            [printable(t["table"]), t["kind"], f"{t['count']:,}", t["sum"]] for t in report.tables
        ]
        for line in table(["table", "kind", "records", "digest"], rows, right={2}):
            echo(line)
    else:
        for t in report.tables:
            echo(f"{t['table']}\t{t['kind']}\t{t['count']}\t{t['sum']}")
    echo(f"store digest {report.digest}")


def _verify_table_lines(tables: dict[str, dict[str, Any]]) -> list[str]:
    """Each table's records and digest on both sides (``verify -v``), aligned.

    B's digest is written out only where it differs from A's.
    """
    from .tables import printable, table

    rows = []
    for name, t in tables.items():
        a, b = t.get("a") or {}, t.get("b") or {}
        count_a = f"{a['count']:,}" if a else "missing"
        count_b = f"{b['count']:,}" if b else "missing"
        same = a and b and a.get("sum") == b.get("sum")
        rows.append([printable(name), count_a, count_b, a.get("sum", "-"),
                     "same" if same else b.get("sum", "-")])  # fmt: skip
    return table(["table", "A records", "B records", "A digest", "B digest"], rows, right={1, 2})


# A key longer than this is shown by its first bytes and its length (``--json`` keeps
# every key whole).
SHOWN_KEY_BYTES = 32


def key_text(key: bytes) -> str:
    """A record's key as one short hex word: ``(empty key)``, or its first 32 bytes in
    hex followed by ``… (800 bytes)`` when it is longer."""
    if not key:
        return "(empty key)"
    if len(key) <= SHOWN_KEY_BYTES:
        return key.hex()
    return f"{key[:SHOWN_KEY_BYTES].hex()}… ({len(key):,} bytes)"


def _difference_line(diff: Any) -> str:
    from .tables import printable

    if not diff.key and diff.what.startswith("table "):  # about the table, not a record
        return f"{printable(diff.table)}: {diff.what}"
    return f"{printable(diff.table)}: key {key_text(diff.key)}: {diff.what}"


def _equal_records_line(report: Any) -> str:
    """How many records were the same on both sides, and of how many."""
    counts = {
        side: sum(t[side]["count"] for t in report.tables.values() if t.get(side))
        for side in ("a", "b")
    }
    same = f"{report.equal_records:,} records the same"
    if report.equal:
        tables = len(report.tables)
        return f"{same} in A and B ({tables} table{'' if tables == 1 else 's'})"
    return f"{same} in A and B (A holds {counts['a']:,}, B {counts['b']:,})"


def print_verify(report: Any, tables: bool = False) -> None:
    """The text form of a :class:`~statemigrate.verification.VerifyReport`.

    Args:
        report: the report.
        tables: also each table's counts and digests on both sides (``-v``).
    """
    for diff in report.differences:
        echo(_difference_line(diff))
    if report.difference_count > len(report.differences):
        echo(f"... and {report.difference_count - len(report.differences)} more differences")
    if tables and report.tables:
        for line in _verify_table_lines(report.tables):
            echo(line)
    echo(f"A {report.a}: {report.digest_a}")
    echo(f"B {report.b}: {report.digest_b}")
    echo(_equal_records_line(report))
    n = report.difference_count
    echo("equal" if report.equal else f"DIFFERENT ({n} difference{'' if n == 1 else 's'})")


def print_convert(report: Any, tables: bool = False) -> None:
    """The text form of a :class:`~statemigrate.pipeline.ConvertReport`.

    Args:
        report: the report.
        tables: first each table's records, bytes and digest (``-v``).
    """
    if tables and report.tables:
        from .tables import printable, table

        rows = [
            [printable(t.name), t.kind, count(t.records), count(t.bytes), t.digest or "-"]
            for t in report.tables
        ]
        for line in table(["table", "kind", "records", "bytes", "digest"], rows, right={2, 3}):
            echo(line)
    if report.already_complete:
        echo(f"nothing to do: {report.destination} is already complete")
    else:
        state = "verified" if report.verified else "NOT verified (--no-verify)"
        what = "" if report.records is None else f"{report.records:,} records in "
        echo(
            f"converted {what}{len(report.tables)} tables "
            f"{report.source_engine} -> {report.destination_engine} in {report.seconds:.1f}s, "
            f"{state}"
        )
    if report.store_digest is not None:
        echo(f"store digest {report.store_digest}")
    if report.skipped:
        from ..pipeline.conversion import skipped_text

        listed = ", ".join(skipped_text(s) for s in report.skipped)
        echo(f"left out (not in the layout, --skip-foreign-tables): {listed}")
