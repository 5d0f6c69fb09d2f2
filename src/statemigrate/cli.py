"""The command line: parse, call the library, print, exit with the contract's code.

Exit codes: 0 done/equal, 1 different, 2 usage, 3 store busy, 4 source unreadable,
5 destination refused, 6 interrupted (resume finishes), 70 internal error.
"""

from __future__ import annotations

import errno
import functools
import json
import os
import signal
import sys
import traceback
from collections.abc import Callable
from typing import Any

import click

from .errors import (
    EXIT_DESTINATION,
    EXIT_INTERNAL,
    EXIT_INTERRUPTED,
    EXIT_SOURCE,
    StateMigrateError,
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
REPORT_URL = "the statemigrate issue tracker"


def _fail(message: str, hint: str | None, code: int) -> None:
    click.echo(f"statemigrate: error: {message}", err=True)
    if hint:
        click.echo(f"hint: {hint}", err=True)
    sys.exit(code)


def _os_error_code(exc: OSError) -> tuple[int, str | None]:
    """Exit code and hint for an OSError: a full or read-only disk is the destination's
    (only writing meets it); anything else (permission, symlink loop, missing file) is met
    opening a store to read, the destination's directory being checked before."""
    if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EFBIG):
        return EXIT_DESTINATION, "free some space; the destination's .partial is kept for --resume"
    return EXIT_SOURCE, None


def handle_errors(fn: Callable[..., Any]) -> Callable[..., Any]:
    """Turn library errors into one line on stderr and the documented exit code."""

    @functools.wraps(fn)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        ctx = click.get_current_context()
        show_tb = bool(ctx.find_root().params.get("traceback"))
        try:
            return fn(*args, **kwargs)
        except StateMigrateError as exc:
            if show_tb:
                traceback.print_exc()
            _fail(exc.message, exc.hint, exc.exit_code)
        except KeyboardInterrupt:
            _fail("interrupted", "run the same command with --resume to finish", EXIT_INTERRUPTED)
        except OSError as exc:
            # A file-system refusal that no engine turned into its own error: still one line.
            if show_tb:
                traceback.print_exc()
            code, hint = _os_error_code(exc)
            path = f"{exc.filename}: " if exc.filename else ""
            _fail(f"{path}{exc.strerror or exc}", hint, code)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - a bug: say where, never a bare traceback unless asked
            if show_tb:
                traceback.print_exc()
            where = traceback.extract_tb(exc.__traceback__)[-1]
            _fail(
                f"internal error: {type(exc).__name__}: {exc} (at {os.path.basename(where.filename)}:{where.lineno})",
                f"please report it to {REPORT_URL}, with the output of the same command run with --traceback",
                EXIT_INTERNAL,
            )

    return wrapper


def _emit_json(data: Any) -> None:
    click.echo(json.dumps(data, indent=2, sort_keys=False))


@click.group(epilog=EXIT_CODES_HELP, context_settings={"help_option_names": ["-h", "--help"]})
@click.option(
    "--traceback", is_flag=True, help="Show the full traceback of an error (for debugging)."
)
@click.version_option(package_name="statemigrate")
def main(traceback: bool) -> None:
    """Move an app's embedded state store between engines, and prove nothing was lost.

    A store is a path; its engine is detected from the file's signature, or named
    as ENGINE:PATH (for example rocksdb:state.db). `statemigrate engines` lists them.
    """


def _progress(quiet: bool) -> Any:
    if quiet or not sys.stderr.isatty():
        return None
    from .tqdm_progress import TqdmProgress

    return TqdmProgress()


class _Stopper:
    """SIGINT/SIGTERM: finish the batch in flight and checkpoint; a second one stops at once.

    Until the library first asks (:meth:`poll`), nothing is in flight that a checkpoint
    could keep (stores are being opened and checked): a signal then stops at once, so
    that an open or a read that cannot finish never outlives it.
    """

    def __init__(self) -> None:
        self.requested = False
        self.polled = False

    def poll(self) -> bool:
        """Whether a stop was asked for; from the first call on, signals wait for a batch."""
        self.polled = True
        return self.requested

    def __call__(self, signum: int, _frame: Any) -> None:
        if self.requested:
            os.write(
                2, b"statemigrate: stopped at once; the destination's .partial stays resumable\n"
            )
            os._exit(EXIT_INTERRUPTED)
        self.requested = True
        if not self.polled:
            os.write(2, b"statemigrate: stopping now (nothing in flight to finish)\n")
            raise KeyboardInterrupt  # ends a blocked system call too (PEP 475)
        os.write(2, b"statemigrate: stopping after the batch in flight (again to stop at once)\n")

    def install(self) -> None:
        signal.signal(signal.SIGINT, self)
        signal.signal(signal.SIGTERM, self)


def _parse_options(pairs: tuple[str, ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep:
            raise click.BadParameter(f"expected KEY=VALUE, got {pair!r}")
        out[key.replace("-", "_")] = int(value) if value.isdigit() else value
    return out


@main.command()
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
@click.option(
    "--batch-records",
    type=click.IntRange(min=1),
    default=10_000,
    show_default=True,
    help="Records per batch at most.",
)
@click.option(
    "--batch-bytes",
    type=click.IntRange(min=1),
    default=8 << 20,
    show_default=True,
    help="Payload bytes per batch at most.",
)
@click.option(
    "--overwrite",
    is_flag=True,
    help="Replace an existing destination (kept until the new one verified).",
)
@click.option(
    "--resume", is_flag=True, help="Continue DST.partial left by an interrupted run (or start)."
)
@click.option(
    "--no-verify", is_flag=True, help="Skip reading the destination back (not recommended)."
)
@click.option("--force", is_flag=True, help="Skip the free-space check.")
@click.option(
    "--skip-foreign-tables",
    is_flag=True,
    help="SQLite sources: leave out tables not in statemigrate's layout instead of refusing.",
)
@click.option(
    "--rocksdb-format-version",
    type=click.IntRange(2, 6),
    default=None,
    help="RocksDB destinations: block-based table format (default 5, readable since RocksDB 6.6).",
)
@click.option(
    "--redb-format",
    type=click.IntRange(1, 3),
    default=None,
    help="redb destinations: file format (3 = redb 2.6+/3.x/4.x, default; 2 = redb 2.x).",
)
@click.option(
    "--bytewise-key",
    "bytewise_keys",
    multiple=True,
    metavar="TYPE",
    help="redb destinations: assert that this custom key type sorts bytewise (repeatable).",
)
@click.option(
    "--source-option",
    "source_opts",
    multiple=True,
    metavar="KEY=VALUE",
    help="Engine option for the reader.",
)
@click.option(
    "--dest-option",
    "dest_opts",
    multiple=True,
    metavar="KEY=VALUE",
    help="Engine option for the writer.",
)
@click.option("--json", "as_json", is_flag=True, help="Print one JSON report on stdout at the end.")
@click.option("--quiet", "-q", is_flag=True, help="No progress and no summary.")
@handle_errors
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
    skip_foreign_tables: bool,
    rocksdb_format_version: int | None,
    redb_format: int | None,
    bytewise_keys: tuple[str, ...],
    source_opts: tuple[str, ...],
    dest_opts: tuple[str, ...],
    as_json: bool,
    quiet: bool,
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
    from . import api

    src_options = _parse_options(source_opts)
    if skip_foreign_tables:
        src_options["skip_foreign_tables"] = True
    dst_options = _parse_options(dest_opts)
    if rocksdb_format_version is not None:
        dst_options["rocksdb_format_version"] = rocksdb_format_version
    if redb_format is not None:
        dst_options["redb_format"] = redb_format
    if bytewise_keys:
        dst_options["bytewise_key_types"] = list(bytewise_keys)
    stopper = _Stopper()
    stopper.install()
    report = api.convert(
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
        source_options=src_options or None,
        destination_options=dst_options or None,
        progress=_progress(quiet or as_json),
        should_stop=stopper.poll,
    )
    if as_json:
        _emit_json(report.to_json())
    elif not quiet:
        state = "verified" if report.verified else "NOT verified (--no-verify)"
        click.echo(
            f"converted {report.records:,} records in {len(report.tables)} tables "
            f"{report.source_engine} -> {report.destination_engine} in {report.seconds:.1f}s, {state}"
        )
        click.echo(f"store digest {report.store_digest}")


@main.command()
@click.argument("a")
@click.argument("b", required=False)
@click.option(
    "--manifest",
    type=click.Path(dir_okay=False),
    help="Compare A with a manifest from `checksum --json`.",
)
@click.option(
    "--limit",
    type=click.IntRange(min=0),
    default=20,
    show_default=True,
    help="Differences to list.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handle_errors
def verify(a: str, b: str | None, manifest: str | None, limit: int, as_json: bool) -> None:
    """Check that stores A and B (any engines) hold the same state.

    Lists the first differences (key in hex, which side misses it, value or version
    differs) and the per-table digests. Exit 0 when equal, 1 when different.
    """
    from . import api
    from .errors import UsageError

    if (b is None) == (manifest is None):
        raise UsageError("give either a second store B or --manifest M")
    report = api.verify_manifest(a, manifest) if manifest else api.verify(a, b, limit=limit)  # type: ignore[arg-type]
    if as_json:
        _emit_json(report.to_json())
    else:
        for diff in report.differences:
            click.echo(diff.line())
        if report.difference_count > len(report.differences):
            click.echo(
                f"... and {report.difference_count - len(report.differences)} more differences"
            )
        click.echo(f"A {report.a}: {report.digest_a}")
        click.echo(f"B {report.b}: {report.digest_b}")
        click.echo(
            "equal" if report.equal else f"DIFFERENT ({report.difference_count} differences)"
        )
    sys.exit(0 if report.equal else 1)


@main.command()
@click.argument("store")
@click.option(
    "--json",
    "as_json",
    is_flag=True,
    help="Print a manifest (JSON) that `verify --manifest` reads.",
)
@handle_errors
def checksum(store: str, as_json: bool) -> None:
    """Print each table's record count and digest, and the store digest.

    The digest is engine-independent (XXH3-128 per record, summed; see the README):
    the same state gives the same digest on every engine.
    """
    from . import api

    report = api.checksum(store)
    if as_json:
        _emit_json(report.to_json())
        return
    for t in report.tables:
        click.echo(f"{t['table']}\t{t['kind']}\t{t['count']}\t{t['sum']}")
    click.echo(f"store digest {report.digest}")


@main.command()
@click.argument("store")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handle_errors
def inspect(store: str, as_json: bool) -> None:
    """Describe STORE: engine, format, tables (kind, records, bytes), schema revision."""
    from . import api

    report = api.inspect(store)
    if as_json:
        _emit_json(report.to_json())
        return
    click.echo(f"store    {report.store}")
    click.echo(f"engine   {report.engine}")
    for key, value in report.format.items():
        click.echo(f"{key:<8} {value}")
    click.echo(
        f"schema   {report.schema or '-'}  revision {', '.join(report.revision or []) or '-'}"
    )
    for t in report.tables:
        extra = f"  {t['meta']}" if t.get("meta") else ""
        click.echo(
            f"  {t['table']}\t{t['kind']}\t{t['records']} records\t{t['bytes']} bytes{extra}"
        )


@main.command()
@click.option("--json", "as_json", is_flag=True, help="Print the list as JSON.")
@handle_errors
def engines(as_json: bool) -> None:
    """List the engines, whether each driver is installed, and their capabilities."""
    from . import api

    rows = api.engines()
    if as_json:
        _emit_json(rows)
        return
    for row in rows:
        if "error" in row:
            click.echo(f"{row['name']:<8} broken plugin: {row['error']}")
            continue
        installed = (
            "installed"
            if row["driver_installed"]
            else f"missing: pip install 'statemigrate[{row['extra']}]'"
        )
        caps = ", ".join(k for k, v in row["capabilities"].items() if v is True)
        click.echo(f"{row['name']:<8} {row['description']}  [{installed}]  {caps}")


# --- schema upgrades in place (statemigrate.upgrade) --------------------------------

UPGRADE_EXIT_HELP = """\b
Installer contract (exit codes):
  0  upgraded, or already at the target (--json: "status": "upgraded" | "up_to_date")
  1  the store is at a revision this schema does not know (a newer app wrote it);
     nothing changed ("too_new")
  3  the store is held by another process (the app is running) ("busy")
  4  no store at the path ("missing"; nothing created: --create makes one),
     or it cannot be read ("unreadable")
  5  a revision failed, or the disk is full; the store stays at the last
     revision that completed ("failed")
  6  interrupted by a signal; run it again ("interrupted")
  2  usage error ("usage_error"); 70 internal error ("error")
"""


def _upgrade_status(exc: StateMigrateError) -> str:
    from .errors import InterruptedByUser, SourceError, StoreBusyError, UsageError
    from .upgrade.errors import RevisionUnknownError, StoreMissingError

    for kind, status in (
        (StoreBusyError, "busy"),
        (RevisionUnknownError, "too_new"),
        (StoreMissingError, "missing"),
        (SourceError, "unreadable"),
        (UsageError, "usage_error"),
        (InterruptedByUser, "interrupted"),
    ):
        if isinstance(exc, kind):
            return status
    return "failed"


def _upgrade_failure(exc: BaseException) -> dict[str, Any]:
    """The JSON fields of a schema command that failed, as handle_errors will exit."""
    if isinstance(exc, StateMigrateError):
        return {
            "status": _upgrade_status(exc),
            "error": exc.message,
            "hint": exc.hint,
            "exit_code": exc.exit_code,
        }
    if isinstance(exc, KeyboardInterrupt):
        return {
            "status": "interrupted",
            "error": "interrupted",
            "hint": "run the same command again: each revision is applied whole or not at all",
            "exit_code": EXIT_INTERRUPTED,
        }
    if isinstance(exc, OSError):
        code, hint = _os_error_code(exc)
        path = f"{exc.filename}: " if exc.filename else ""
        return {
            "status": "failed" if code == EXIT_DESTINATION else "unreadable",
            "error": f"{path}{exc.strerror or exc}",
            "hint": hint,
            "exit_code": code,
        }
    where = traceback.extract_tb(exc.__traceback__)[-1]
    return {
        "status": "error",
        "error": f"internal error: {type(exc).__name__}: {exc} "
        f"(at {os.path.basename(where.filename)}:{where.lineno})",
        "hint": f"please report it to {REPORT_URL}, with the output of the same command run with --traceback",
        "exit_code": EXIT_INTERNAL,
    }


def _upgrade_call(as_json: bool, store: str | None, fn: Callable[[], Any]) -> Any:
    """Run ``fn``; with --json every failure is also one JSON object on stdout.

    handle_errors then prints the one line on stderr and exits with the same code.
    """
    try:
        return fn()
    except (click.exceptions.Exit, click.ClickException):
        raise
    except (Exception, KeyboardInterrupt) as exc:
        if as_json:
            _emit_json({"store": store, **_upgrade_failure(exc)})
        raise


def _print_migration(report: Any) -> None:
    if report.created:
        click.echo(f"created {report.store}: a new, empty {report.engine} store")
    if report.recovered:
        click.echo(f"recovered: {report.recovered}")
    for rev in report.revisions:
        took = "" if report.dry_run else f"  ({rev['seconds']:.2f}s)"
        click.echo(
            f"{rev['direction']:<9} {rev['revision']}  {rev['message'].splitlines()[0] if rev['message'] else ''}{took}"
        )
        if report.dry_run:
            for line in rev["operations"]:
                click.echo(f"    op.{line}")
    was = ", ".join(report.from_revisions) or "base"
    now = ", ".join(report.to_revisions) or "base"
    if report.status == "up_to_date":
        click.echo(f"{report.store}: already at {now}; nothing to do")
    elif report.status == "dry_run":
        click.echo(f"dry run: {report.store} would go from {was} to {now}; nothing was changed")
    else:
        click.echo(f"{report.store}: {report.status} from {was} to {now}")
    if report.backup:
        click.echo(f"backup written to {report.backup}")
    if report.digest_before and report.status != "dry_run":
        click.echo(f"store digest before {report.digest_before}, after {report.digest_after}")


def _migration_options(fn: Callable[..., Any]) -> Callable[..., Any]:
    for option in reversed(
        [
            click.option(
                "--schema",
                "schema",
                required=True,
                type=click.Path(file_okay=False),
                help="The schema directory (an Alembic script directory).",
            ),
            click.option(
                "--backup",
                type=click.Path(),
                help="First write an engine-native backup of the store here.",
            ),
            click.option(
                "--dry-run",
                is_flag=True,
                help="Print the revisions and operations that would run; change nothing.",
            ),
            click.option(
                "--no-digest", is_flag=True, help="Skip the store digest before and after (faster)."
            ),
            click.option(
                "--json",
                "as_json",
                is_flag=True,
                help="Print one JSON report on stdout (errors too).",
            ),
        ]
    ):
        fn = option(fn)
    return fn


@main.command(epilog=UPGRADE_EXIT_HELP)
@click.argument("store")
@click.option(
    "--to",
    "target",
    default="head",
    show_default=True,
    metavar="REV|head|heads|+N",
    help="The revision to upgrade to.",
)
@click.option(
    "--create",
    is_flag=True,
    help="Make the store first when nothing is at STORE (a first install); its engine is "
    "ENGINE:STORE or told by the suffix.",
)
@_migration_options
@handle_errors
def upgrade(
    store: str,
    target: str,
    create: bool,
    schema: str,
    backup: str | None,
    dry_run: bool,
    no_digest: bool,
    as_json: bool,
) -> None:
    """Bring STORE to the schema's head (or --to REV) in place, one atomic revision at a time.

    An installer step: no prompts; each revision is applied together with its stamp
    or not at all (a crash leaves the old revision with the old data, and the next
    run finishes cleanly). At the target already: does nothing, exit 0.

    \b
    Example:
      statemigrate upgrade state.sqlite --schema schemas/example --json
    """
    from .upgrade import runner

    report = _upgrade_call(
        as_json,
        store,
        lambda: runner.upgrade(
            store,
            schema,
            to=target,
            dry_run=dry_run,
            backup=backup,
            digests=not no_digest,
            create=create,
        ),
    )
    _emit_json(report.to_json()) if as_json else _print_migration(report)


@main.command(epilog=UPGRADE_EXIT_HELP)
@click.argument("store")
@click.option(
    "--to", "target", required=True, metavar="REV|base|-N", help="The revision to go back to."
)
@_migration_options
@handle_errors
def downgrade(
    store: str,
    target: str,
    schema: str,
    backup: str | None,
    dry_run: bool,
    no_digest: bool,
    as_json: bool,
) -> None:
    """Take STORE back to an earlier revision (--to REV, -1 or base) through the downgrades."""
    from .upgrade import runner

    report = _upgrade_call(
        as_json,
        store,
        lambda: runner.downgrade(
            store, schema, to=target, dry_run=dry_run, backup=backup, digests=not no_digest
        ),
    )
    _emit_json(report.to_json()) if as_json else _print_migration(report)


@main.command()
@click.argument("store")
@click.argument("revision")
@click.option(
    "--schema",
    "schema",
    required=True,
    type=click.Path(file_okay=False),
    help="The schema directory (an Alembic script directory).",
)
@click.option("--dry-run", is_flag=True, help="Print what the stamp would be; change nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handle_errors
def stamp(store: str, revision: str, schema: str, dry_run: bool, as_json: bool) -> None:
    """Set STORE's schema revision to REVISION (an id, head or base) without running anything."""
    from .upgrade import runner

    report = _upgrade_call(
        as_json, store, lambda: runner.stamp(store, schema, revision, dry_run=dry_run)
    )
    if as_json:
        _emit_json(report.to_json())
    else:
        now = ", ".join(report.to_revisions) or "base"
        verb = "would be stamped" if dry_run else "stamped"
        click.echo(
            f"{report.store}: {verb} {now} (was {', '.join(report.from_revisions) or 'base'})"
        )


def _print_unrecorded(report: Any) -> None:
    if report.unrecorded_private:
        click.echo(
            f"note: {', '.join(report.unrecorded_private)}: named like an upgrade's private "
            "tables (__sm_tmp__), but no upgrade recorded them; left alone as your data"
        )


def _print_current(report: Any) -> None:
    at = ", ".join(report.current) or "base (no revision)"
    click.echo(f"{report.store}: at {at}{' (interrupted)' if report.interrupted else ''}")
    if report.interrupted:
        click.echo(f"interrupted: {report.interrupted['message']}")
    _print_unrecorded(report)


@main.command()
@click.argument("store")
@click.option(
    "--schema", "schema", type=click.Path(file_okay=False), help="Also say whether it is at head."
)
@click.option(
    "--dry-run",
    is_flag=True,
    hidden=True,
    help="Accepted for compatibility: current never changes the store.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handle_errors
def current(store: str, schema: str | None, dry_run: bool, as_json: bool) -> None:
    """Print STORE's stamped schema revision(s). Read only: it never changes the store.

    An upgrade interrupted by a crash is reported ("interrupted"), not finished:
    `statemigrate upgrade` (or `downgrade`) finishes it.
    """
    from .upgrade import runner

    report = _upgrade_call(as_json, store, lambda: runner.current(store, schema=schema))
    _emit_json(report.to_json()) if as_json else _print_current(report)


@main.command()
@click.argument("store")
@click.option(
    "--schema",
    "schema",
    required=True,
    type=click.Path(file_okay=False),
    help="The schema directory (an Alembic script directory).",
)
@click.option(
    "--dry-run",
    is_flag=True,
    hidden=True,
    help="Accepted for compatibility: check never changes the store.",
)
@click.option("--json", "as_json", is_flag=True, help="Print the report as JSON.")
@handle_errors
def check(store: str, schema: str, dry_run: bool, as_json: bool) -> None:
    """Exit 0 when STORE is at the schema's head, 1 otherwise (naming both revisions).

    Also exit 1 when a revision file changed after it was applied (its checksum,
    recorded beside the stamp, differs), the store's revision is unknown, or an
    upgrade was interrupted (reported, not finished: check never changes the store).
    """
    from .upgrade import runner

    report = _upgrade_call(as_json, store, lambda: runner.current(store, schema=schema))
    if as_json:
        _emit_json(report.to_json())
    else:
        at = ", ".join(report.current) or "base"
        head = ", ".join(report.heads or []) or "base"
        if report.interrupted:
            click.echo(f"{report.store}: at {at}, but {report.interrupted['message']}")
        elif report.unknown:
            click.echo(
                f"{report.store}: at {at}, unknown to this schema (head {head}): a newer app wrote it"
            )
        elif report.at_head:
            click.echo(f"{report.store}: at head {head}")
        else:
            click.echo(
                f"{report.store}: at {at}, schema head is {head}: run `statemigrate upgrade`"
            )
        for f in report.changed_files:
            click.echo(f"revision {f['revision']} changed after it was applied: {f['path']}")
        _print_unrecorded(report)
    sys.exit(0 if report.ok else 1)


@main.command()
@click.option(
    "--schema",
    "schema",
    required=True,
    type=click.Path(file_okay=False),
    help="The schema directory (an Alembic script directory).",
)
@click.option(
    "--dry-run", is_flag=True, hidden=True, help="Accepted for symmetry; history changes nothing."
)
@click.option("--json", "as_json", is_flag=True, help="Print the revisions as JSON.")
@handle_errors
def history(schema: str, dry_run: bool, as_json: bool) -> None:
    """List the schema's revisions, newest first (like `alembic history`)."""
    from .upgrade import runner

    rows = _upgrade_call(as_json, None, lambda: runner.history(schema))
    if as_json:
        _emit_json(rows)
        return
    for r in rows:
        down = ", ".join(r["down_revision"]) or "<base>"
        tags = [
            t
            for t, on in (
                ("head", r["is_head"]),
                ("merge", r["is_merge"]),
                ("branchpoint", r["is_branch_point"]),
            )
            if on
        ]
        tag = f" ({', '.join(tags)})" if tags else ""
        first = r["message"].splitlines()[0] if r["message"] else ""
        click.echo(f"{down} -> {r['revision']}{tag}, {first}")


@main.command()
@click.option(
    "--schema",
    "schema",
    required=True,
    type=click.Path(file_okay=False),
    help="The schema directory (an Alembic script directory).",
)
@click.option("-m", "--message", required=True, help="What the revision does.")
@click.option("--head", default="head", show_default=True, help="The revision it follows.")
@click.option("--rev-id", help="The revision id (default: random, as Alembic makes them).")
@click.option("--dry-run", is_flag=True, help="Say what would be written; write nothing.")
@click.option("--json", "as_json", is_flag=True, help="Print the new file's path as JSON.")
@handle_errors
def revision(
    schema: str, message: str, head: str, rev_id: str | None, dry_run: bool, as_json: bool
) -> None:
    """Write a new revision file into the schema from its script.py.mako template."""
    from .upgrade import runner

    if dry_run:
        out = {"schema": schema, "message": message, "head": head, "path": None, "dry_run": True}
        _emit_json(out) if as_json else click.echo(
            f"would write a revision after {head}: {message}"
        )
        return
    path = _upgrade_call(
        as_json, None, lambda: runner.revision(schema, message, head=head, rev_id=rev_id)
    )
    _emit_json({"schema": schema, "message": message, "path": path}) if as_json else click.echo(
        f"wrote {path}"
    )


if __name__ == "__main__":
    main()
