"""The commands that move and compare state: convert, verify, checksum, inspect, engines."""

from __future__ import annotations

import contextlib
import functools
import os
import signal
import sys
from collections.abc import Callable
from typing import Any, Protocol, TypeVar

import click

from .. import api
from ..errors import EXIT_INTERRUPTED, InterruptedByUser, LayoutNotNeeded, UsageError
from ..model import BATCH_BYTES, BATCH_RECORDS
from .output import (
    RESUME_HINT,
    describe,
    emit_failure,
    emit_report,
    json_option,
    options_of,
    print_checksum,
    print_convert,
    print_engines,
    print_inspect,
    print_verify,
    quiet,
    reported,
    say,
    verbose,
    verbosity_options,
)
from .progress import clear, for_stderr, print_summary

F = TypeVar("F", bound=Callable[..., Any])


class _Report(Protocol):
    def to_json(self) -> dict[str, Any]: ...


R = TypeVar("R", bound=_Report)


def _tell(line: bytes) -> None:
    """Write to stderr from a signal handler; a closed stderr changes nothing."""
    with contextlib.suppress(OSError):
        os.write(2, line)


class _Stopper:
    """SIGINT/SIGTERM: finish the batch in flight and checkpoint; a second one stops at once.

    Until the library first asks (:meth:`poll`), nothing is in flight that a checkpoint
    could keep (stores are being opened and checked): a signal then stops at once, so
    that an open or a read that cannot finish never outlives it.
    """

    def __init__(self, json_failure: Callable[[BaseException], None] | None = None) -> None:
        self.requested = False
        self.polled = False
        # With --json: prints the failure object, so a hard stop also leaves one on stdout.
        self.json_failure = json_failure

    def poll(self) -> bool:
        """Whether a stop was asked for; from the first call on, signals wait for a batch."""
        self.polled = True
        return self.requested

    def __call__(self, signum: int, _frame: Any) -> None:
        if sys.stderr.isatty():
            _tell(b"\r\x1b[K")  # a clean line: the message does not land on the bar
        if self.requested:
            message = "stopped at once; the destination's .partial stays resumable"
            _tell(f"statemigrate: {message}\n".encode())
            if self.json_failure is not None:
                with contextlib.suppress(Exception):
                    self.json_failure(InterruptedByUser(message, hint=RESUME_HINT))
                    sys.stdout.flush()
            os._exit(EXIT_INTERRUPTED)
        self.requested = True
        if not self.polled:
            _tell(b"statemigrate: stopping now (nothing in flight to finish)\n")
            raise KeyboardInterrupt  # ends a blocked system call too (PEP 475)
        _tell(b"statemigrate: stopping after the batch in flight (again to stop at once)\n")

    def install(self) -> None:
        """Handle SIGINT and SIGTERM from now on."""
        signal.signal(signal.SIGINT, self)
        signal.signal(signal.SIGTERM, self)


def _parse_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    """KEY=VALUE pairs as option name -> text (a repeated key -> its values, in order).

    The engine converts the text to the option's declared type
    (:mod:`statemigrate.engines.options`) and refuses what it does not know (exit 2).
    """
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}")
        key = key.strip().replace("-", "_")
        if key in out:
            before = out[key]
            out[key] = [*(before if isinstance(before, list) else [before]), value]
        else:
            out[key] = value
    return out


def _options_or_none(pairs: tuple[str, ...]) -> dict[str, Any] | None:
    """The options of ``--option KEY=VALUE`` pairs, or None when there are none."""
    return _parse_options(pairs) or None


def _option_pairs(flag: str, help: str) -> Callable[[F], F]:
    """A repeatable ``KEY=VALUE`` engine option flag."""
    return click.option(flag, multiple=True, metavar="KEY=VALUE", help=help)


def _layout_option(flag: str, whose: str) -> Callable[[F], F]:
    """A layout file for one side (shorthand for the ``layout=FILE`` engine option)."""
    return click.option(
        flag,
        type=click.Path(dir_okay=False),
        metavar="FILE",
        help=f"A layout file (TOML) saying how the app lays {whose} out (README: Your app's own"
        " layout; shorthand for the engine option layout=FILE).",
    )


def _with_layout(options: dict[str, Any] | None, layout: str | None) -> dict[str, Any] | None:
    """``options`` with ``layout`` set when a layout file was given."""
    if layout is None:
        return options
    return {**(options or {}), "layout": layout}


_SIDES = {"source": "sources", "dest": "destinations", "both": "stores"}


@functools.cache
def _shorthands() -> dict[str, list[Any]]:
    """Every registered engine's shorthand flags (``option(flag=...)``), by flag.

    Read on first use (``convert``'s parsing or help), never when the command line is
    imported: that loads every engine's module. An engine whose module cannot be
    imported here, whatever it raises (a plugin's missing dependency, a bug at its
    import), adds none; ``statemigrate engines`` lists it as broken.
    """
    from ..engines.options import shorthands
    from ..registry import EngineUnavailableError, engine_names, get_engine

    found: dict[str, list[Any]] = {}
    for name in engine_names():
        try:
            engine = get_engine(name)
        except EngineUnavailableError:  # one broken plugin must not break convert
            continue
        for short in shorthands(engine):
            found.setdefault(short.flag, []).append(short)
    return found


def _param(flag: str) -> str:
    return "flag_" + flag.lstrip("-").replace("-", "_")


def _shorthand_options() -> list[click.Option]:
    """The engines' shorthand flags as options of ``convert``, each one's help built from
    its declarations: which engines' sources or destinations, what it sets."""
    options = []
    for flag, decls in sorted(_shorthands().items()):
        first = decls[0]
        engines = sorted({d.engine for d in decls})
        side = "--source-option" if first.applies == "source" else "--dest-option"
        value = "true" if first.kind == "bool" else "VALUE"
        help = (
            f"{', '.join(engines)} {_SIDES[first.applies]}: {first.help} "
            f"(shorthand for {side} {first.name}={value})."
        )
        if first.kind == "bool":
            options.append(
                click.Option([flag, _param(flag)], is_flag=True, default=None, help=help)
            )
        else:
            options.append(
                click.Option(
                    [flag, _param(flag)],
                    multiple=first.kind == "list of text",
                    metavar="INT" if first.kind == "int" else "TEXT",
                    default=None,
                    help=help,
                )
            )
    return options


class _WithShorthands(click.Command):
    """``convert``: the engines' shorthand flags join its options (before the layout
    files) when click first asks for them, to parse its arguments or show its help."""

    _shorthands_added = False

    def get_params(self, ctx: click.Context) -> list[click.Parameter]:
        if not self._shorthands_added:
            self._shorthands_added = True
            at = next(
                (i for i, p in enumerate(self.params) if p.name == "source_layout"),
                len(self.params),
            )
            self.params[at:at] = _shorthand_options()
        return super().get_params(ctx)


def _engine_options(
    source_opts: tuple[str, ...], dest_opts: tuple[str, ...], flags: dict[str, Any]
) -> tuple[dict[str, Any] | None, dict[str, Any] | None]:
    """The reader's and the writer's options: KEY=VALUE pairs and the engines' shorthand
    flags (a repeatable one adds to the pairs; the engine checks every value)."""
    src = _parse_options(source_opts)
    dst = _parse_options(dest_opts)
    for flag, decls in _shorthands().items():
        value = flags.get(_param(flag))
        if value is None or value == () or value is False:
            continue
        first = decls[0]
        into = src if first.applies == "source" else dst
        if first.kind == "list of text":
            given = into.get(first.name, [])
            into[first.name] = [*([given] if isinstance(given, str) else given), *value]
        else:
            into[first.name] = value
    return src or None, dst or None


def _count_option(flag: str, default: int, help: str, minimum: int = 1) -> Callable[[F], F]:
    """An option taking a count of at least ``minimum``, its default shown in the help."""
    return click.option(
        flag, type=click.IntRange(min=minimum), default=default, show_default=True, help=help
    )


@click.command(cls=_WithShorthands)
@click.argument("source")
@click.argument("destination")
@click.option(
    "--from", "from_engine", metavar="ENGINE", help="Source engine (detected when omitted)."
)
@click.option(
    "--to",
    "to_engine",
    metavar="ENGINE",
    help="Destination engine (from ENGINE:PATH or the suffix).",
)
@click.option("--tables", metavar="NAMES", help="Only these tables, comma-separated.")
@_count_option("--batch-records", BATCH_RECORDS, "Records per batch at most.")
@_count_option("--batch-bytes", BATCH_BYTES, "Payload bytes per batch at most.")
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace an existing destination (kept until the new one verified).",
)
@click.option(
    "--resume", is_flag=True, help="Continue DST.partial left by an interrupted run (or start)."
)
@click.option(
    "--no-verify",
    is_flag=True,
    help="Do no verification work: no read back, no digests in the report (not recommended).",
)
@click.option("--force", is_flag=True, help="Skip the free-space check.")
@click.option(
    "--allow-empty",
    is_flag=True,
    help="Convert even when --skip-foreign-tables left every part of SOURCE out "
    "(refused by default: exit 4).",
)
@_layout_option("--source-layout", "the source's state")
@_layout_option("--dest-layout", "the destination's state")
@click.option(
    "--source-option",
    "source_opts",
    multiple=True,
    metavar="KEY=VALUE",
    help="Engine option for the reader (repeatable; `statemigrate engines` lists them).",
)
@click.option(
    "--dest-option",
    "dest_opts",
    multiple=True,
    metavar="KEY=VALUE",
    help="Engine option for the writer (repeatable; `statemigrate engines` lists them).",
)
@json_option("Print one JSON report on stdout at the end.")
@verbosity_options(
    quiet="No progress and no summary (an error still prints).",
    verbose="Also list each table: records, bytes, digest; an error's full traceback.",
)
def convert(
    source: str,
    destination: str,
    from_engine: str | None,
    to_engine: str | None,
    tables: str | None,
    batch_records: int,
    batch_bytes: int,
    overwrite: bool,
    resume: bool,
    no_verify: bool,
    force: bool,
    allow_empty: bool,
    source_layout: str | None,
    dest_layout: str | None,
    source_opts: tuple[str, ...],
    dest_opts: tuple[str, ...],
    as_json: bool,
    **flags: Any,
) -> None:
    """Convert SOURCE to DESTINATION on another engine, verified, never in place.

    The destination is built at DESTINATION.partial, read back and compared with
    the source's digests, synced, and only then renamed into place. The source is
    opened read-only and never modified. Ctrl-C stops after the batch in flight;
    `--resume` continues.

    \b
    Example:
      statemigrate convert --from redb --to sqlite state.redb state.sqlite
    """
    context = {"source": source, "destination": destination}
    ctx = click.get_current_context()

    def json_failure(exc: BaseException) -> None:
        emit_failure("convert", exc, describe(exc, options_of(ctx.command)), context)

    progress = for_stderr(quiet() or as_json)

    def run() -> api.ConvertReport:
        src_options, dst_options = _engine_options(source_opts, dest_opts, flags)
        src_options = _with_layout(src_options, source_layout)
        dst_options = _with_layout(dst_options, dest_layout)
        stopper = _Stopper(json_failure if as_json else None)
        stopper.install()
        return api.convert(
            source,
            destination,
            from_engine=from_engine,
            to_engine=to_engine,
            tables=[t for t in tables.split(",") if t] if tables else None,
            batch_records=batch_records,
            batch_bytes=batch_bytes,
            overwrite=overwrite,
            verify=not no_verify,
            resume=resume,
            force=force,
            source_options=src_options,
            destination_options=dst_options,
            progress=progress,
            should_stop=stopper.poll,
            allow_empty=allow_empty,
        )

    report = reported("convert", as_json, context, run)
    clear()
    print_summary(progress, report)
    if as_json:
        status = "already_complete" if report.already_complete else "converted"
        emit_report("convert", status, 0, report.to_json())
    elif not quiet():
        print_convert(report, tables=verbose())


@click.command()
@click.argument("a")
@click.argument("b", required=False)
@click.option(
    "--manifest",
    type=click.Path(dir_okay=False),
    help="Compare A with a manifest from `checksum --json`.",
)
@_count_option("--limit", 20, "Differences to list.", minimum=0)
@_option_pairs("--option-a", "Engine option for reading A (repeatable).")
@_option_pairs("--option-b", "Engine option for reading B (repeatable).")
@_layout_option("--layout-a", "A's state")
@_layout_option("--layout-b", "B's state")
@json_option()
@verbosity_options(
    quiet="No progress on stderr (the report stays).",
    verbose="Also print each table's record counts and digests on both sides.",
)
def verify(
    a: str,
    b: str | None,
    manifest: str | None,
    limit: int,
    option_a: tuple[str, ...],
    option_b: tuple[str, ...],
    layout_a: str | None,
    layout_b: str | None,
    as_json: bool,
) -> None:
    """Check that stores A and B (any engines) hold the same state.

    Lists the first differences (key in hex, which side misses it, value or version
    differs) and both store digests; -v adds each table's counts and digests. Exit 0
    when equal, 1 when different.

    \b
    Examples:
      statemigrate verify state.redb state.sqlite
      statemigrate verify state.sqlite --manifest before.json
    """

    progress = for_stderr(as_json or quiet())

    def run() -> api.VerifyReport:
        options_a = _with_layout(_options_or_none(option_a), layout_a)
        options_b = _with_layout(_options_or_none(option_b), layout_b)
        if manifest is not None and b is None:
            if options_b:
                flag = "--layout-b" if layout_b is not None else "--option-b"
                raise UsageError(f"{flag} needs a second store B")
            return api.verify_manifest(a, manifest, options=options_a, progress=progress)
        if manifest is None and b is not None:
            # Two processes: B's tables are digested in a worker while A's are here.
            return api.verify(
                a, b, limit=limit, options_a=options_a, options_b=options_b,
                progress=progress, workers=2,
            )  # fmt: skip
        raise UsageError("give either a second store B or --manifest M")

    report = reported("verify", as_json, {"a": a, "b": b, "manifest": manifest}, run)
    clear()
    print_summary(progress)
    code = 0 if report.equal else 1
    if as_json:
        emit_report("verify", "equal" if report.equal else "different", code, report.to_json())
    else:
        print_verify(report, tables=verbose())
    sys.exit(code)


def _read_one(
    command: str,
    verb: Callable[..., R],
    store: str,
    as_json: bool,
    options: dict[str, Any] | None,
    show: Callable[[R], None],
) -> None:
    """A verb that reads one store (``checksum``, ``inspect``): its report as JSON, or
    shown; a progress bar in a terminal only, never log lines."""
    progress = for_stderr(as_json or quiet(), log=False)
    report = reported(
        command, as_json, {"store": store}, lambda: verb(store, options=options, progress=progress)
    )
    clear()
    if as_json:
        emit_report(command, "ok", 0, report.to_json())
    else:
        show(report)


@click.command()
@click.argument("store")
@json_option("Print a manifest (JSON) that `verify --manifest` reads.")
@_option_pairs("--option", "Engine option for reading STORE (repeatable).")
@_layout_option("--layout", "STORE's state")
@verbosity_options(quiet="No progress bar on stderr.")
def checksum(store: str, as_json: bool, option: tuple[str, ...], layout: str | None) -> None:
    """Print each table's record count and digest, and the store digest.

    The digest is engine-independent (XXH3-128 per record, summed; see the README):
    the same state gives the same digest on every engine. In a terminal the tables
    are an aligned table; piped, one tab-separated line each (table, kind, records,
    digest).

    \b
    Examples:
      statemigrate checksum state.sqlite
      statemigrate checksum state.sqlite --json > before.json
    """
    _read_one(
        "checksum",
        api.checksum,
        store,
        as_json,
        _with_layout(_options_or_none(option), layout),
        lambda report: print_checksum(report, aligned=sys.stdout.isatty()),
    )


@click.command()
@click.argument("store")
@json_option()
@_option_pairs("--option", "Engine option for reading STORE (repeatable).")
@_layout_option("--layout", "STORE's state")
@verbosity_options(quiet="No progress bar on stderr.")
def inspect(store: str, as_json: bool, option: tuple[str, ...], layout: str | None) -> None:
    """Describe STORE: engine, format, tables (kind, records, bytes), schema revision.

    \b
    Examples:
      statemigrate inspect state.sqlite
      statemigrate inspect rocksdb:state.db --json
    """
    _read_one(
        "inspect",
        api.inspect,
        store,
        as_json,
        _with_layout(_options_or_none(option), layout),
        print_inspect,
    )


@click.command()
@json_option("Print the list as JSON.")
@verbosity_options()
def engines(as_json: bool) -> None:
    """List the engines, whether each driver is installed, their capabilities and options.

    \b
    Examples:
      statemigrate engines
      statemigrate engines --json
    """
    rows = api.engines()
    if as_json:
        emit_report("engines", "ok", 0, {"engines": rows})
    else:
        print_engines(rows)


@click.group()
def layout() -> None:
    """Layout files: how an app lays its state out in one engine (README: Your app's own
    layout).

    \b
    Example:
      statemigrate layout init app.sqlite > app-layout.toml
    """


@layout.command("init")
@click.argument("engine_or_store", metavar="[ENGINE] STORE")
@click.argument("store", required=False, metavar=" ")
@verbosity_options()
def layout_init(engine_or_store: str, store: str | None) -> None:
    """Print a layout file guessed from STORE, an existing store, to check and save.

    The engine is detected from the store (or given first, or as ENGINE:PATH). A
    store already in statemigrate's own layout needs no layout file: that is said on
    stderr, and the exit status is 0.

    \b
    Example:
      statemigrate layout init app.sqlite > app-layout.toml
    """
    engine, path = (None, engine_or_store) if store is None else (engine_or_store, store)
    try:
        text = api.layout(engine, path)
    except LayoutNotNeeded as exc:
        if not quiet():
            say(exc.message)
        return
    click.echo(text, nl=False)


COMMANDS = (convert, verify, checksum, inspect, engines, layout)
