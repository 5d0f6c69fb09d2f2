"""The command line: parse, call the library (:mod:`statemigrate.api`), print, exit.

Exit codes: 0 done/equal, 1 different, 2 usage, 3 store busy, 4 source unreadable,
5 destination refused, 6 interrupted (resume finishes), 70 internal error.

Modules: :mod:`.convert` (convert, verify, checksum, inspect, engines),
:mod:`.schema` (the schema commands), :mod:`.output` (what is printed). Errors are
turned into one line on stderr and the contract's exit code here, once, for every
command.
"""

from __future__ import annotations

import traceback as _traceback
import warnings
from typing import Any, TextIO

import click

from ..errors import PlatformWarning
from . import convert as _convert
from . import schema as _schema
from .convert import _Stopper as _Stopper  # the signal handler; tests import it from here
from .output import (
    TRACEBACK,
    Failure,
    StdoutClosed,
    describe,
    emit_failure,
    fail,
    json_requested,
    options_of,
    say,
    silence_stdout,
)

EXIT_CODES_HELP = """\b
Exit codes:
  0  done: converted and verified; stores equal; upgraded or at target
  1  a difference: verify found differences; check found the store off head
  2  usage error (bad option, unknown engine, missing driver)
  3  store busy: another process holds it (the app is running)
  4  source unreadable: corrupt, truncated, unsupported, wrong engine
  5  destination refused: exists, not writable, not enough free space
  6  interrupted (signal); run again with --resume to finish
  70 internal error (a bug); please report it
"""

_TRACEBACK = TRACEBACK
_ARGS = "statemigrate.args"


def _note_traceback(ctx: click.Context, _param: click.Parameter, value: bool) -> None:
    if value:
        ctx.meta[_TRACEBACK] = True  # meta is shared by the group's and the command's context


def _traceback_option(hidden: bool) -> click.Option:
    return click.Option(
        ["--traceback"],
        is_flag=True,
        expose_value=False,
        is_eager=True,
        hidden=hidden,
        callback=_note_traceback,
        help="Show the full traceback of an error (for debugging).",
    )


class _Main(click.Group):
    """The group: every command also takes ``--traceback``, and every error of every
    command becomes one line on stderr with the contract's exit code."""

    def main(self, *args: Any, **kwargs: Any) -> Any:
        with warnings.catch_warnings():
            others = warnings.showwarning

            def show(
                message: Warning | str,
                category: type[Warning],
                filename: str,
                lineno: int,
                file: TextIO | None = None,
                line: str | None = None,
            ) -> None:
                """statemigrate's warnings (a lock probe the platform lacks): one line,
                under ``--quiet`` too: like an error, it says what the run could not check."""
                if issubclass(category, PlatformWarning):
                    say(f"statemigrate: warning: {message}")
                else:
                    others(message, category, filename, lineno, file, line)

            warnings.showwarning = show
            return super().main(*args, **kwargs)

    def add_command(self, cmd: click.Command, name: str | None = None) -> None:
        cmd.params.append(_traceback_option(hidden=True))
        super().add_command(cmd, name)

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        ctx.meta[_ARGS] = list(args)  # a usage error's JSON object needs to know of --json
        return super().parse_args(ctx, args)

    def invoke(self, ctx: click.Context) -> Any:
        try:
            return super().invoke(ctx)
        except StdoutClosed:
            silence_stdout()  # the reader has what it wanted (`| head -1`): not an error
            ctx.exit(0)
        except click.UsageError as exc:
            self._usage_json(ctx, exc)
            raise
        except (click.exceptions.Exit, click.ClickException, click.exceptions.Abort, SystemExit):
            raise
        except (Exception, KeyboardInterrupt) as exc:  # noqa: BLE001 - a bug is one line too
            if ctx.meta.get(_TRACEBACK) and not isinstance(exc, KeyboardInterrupt):
                _traceback.print_exc()
            fail(describe(exc, self._options(ctx)))

    def _usage_json(self, ctx: click.Context, exc: click.UsageError) -> None:
        """With ``--json``, click's usage error is one JSON object on stdout too."""
        args = ctx.meta.get(_ARGS, [])
        name = ctx.invoked_subcommand
        command = self.get_command(ctx, name) if name else None
        if command is None or "--json" not in options_of(command) or not json_requested(args):
            return
        failure = Failure(exc.format_message(), f"see `statemigrate {name} --help`", exc.exit_code)
        try:
            emit_failure(name or "", None, failure, {})
        except StdoutClosed:
            silence_stdout()

    def _options(self, ctx: click.Context) -> set[str]:
        """The options of the group and of the command that ran."""
        name = ctx.invoked_subcommand
        command = self.get_command(ctx, name) if name else None
        return options_of(self, *([command] if command else []))


@click.group(
    cls=_Main, epilog=EXIT_CODES_HELP, context_settings={"help_option_names": ["-h", "--help"]}
)
@click.version_option(package_name="statemigrate")
def main() -> None:
    """Move an app's embedded state store between engines, and prove nothing was lost.

    A store is a path; its engine is detected from the file's signature, or named
    as ENGINE:PATH (for example rocksdb:state.db). `statemigrate engines` lists them.
    """


main.params.insert(0, _traceback_option(hidden=False))
for _command in (*_convert.COMMANDS, *_schema.COMMANDS):
    main.add_command(_command)

__all__ = ["EXIT_CODES_HELP", "main"]
