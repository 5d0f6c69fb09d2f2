"""The schema commands: upgrade, downgrade, stamp, current, check, history, revision.

With ``--json`` each prints one JSON object on stdout on every path, its failures
included (``status``, ``error``, ``hint``, ``exit_code``): an installer reads the
outcome from stdout and the exit code, never from the wording on stderr.
"""

from __future__ import annotations

import os
import re
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import click

from .. import api
from ..errors import InterruptedByUser
from .output import echo, emit_report, json_option, quiet, reported, verbosity_options
from .progress import clear, for_stderr

F = TypeVar("F", bound=Callable[..., Any])


def _exit_help(verb: str, missing: str) -> str:
    """The installer contract of ``upgrade`` or ``downgrade`` (its ``--help`` epilog)."""
    return f"""\b
Installer contract (exit codes):
  0  {verb}, or already at the target
     (--json: "status": "{verb}" | "up_to_date")
  1  the store is at a revision this schema does not know (a newer app wrote it);
     nothing changed ("too_new")
  3  the store is held by another process (the app is running) ("busy")
  4  no store at the path ("missing"{missing}),
     or it cannot be read ("unreadable")
  5  a revision failed, or the disk is full; the store stays at the last
     revision that completed ("failed")
  6  interrupted by a signal; run it again ("interrupted")
  2  usage error ("usage_error"); 70 internal error ("error")
"""


UPGRADE_EXIT_HELP = _exit_help("upgraded", "; nothing created: --create makes one")
DOWNGRADE_EXIT_HELP = _exit_help("downgraded", "")
INTERRUPTED_HINT = "run the same command again: each revision is applied whole or not at all"
SCHEMA_HELP = "The schema directory (an Alembic script directory)."


def schema_option(required: bool = True, help: str = SCHEMA_HELP) -> Callable[[F], F]:
    """``--schema DIR``, the one declaration every schema command uses."""
    return click.option(
        "--schema",
        "schema",
        required=required,
        type=click.Path(file_okay=False),
        metavar="DIR",
        help=help,
    )


def _call(as_json: bool, store: str | None, fn: Callable[[], Any]) -> Any:
    """Run ``fn``; with ``--json`` every failure is also one JSON object on stdout.

    The group then prints the one line on stderr and exits with the same code.
    """

    params = click.get_current_context().params

    def run() -> Any:
        if params.get("schema") is not None:
            check_schema_dir(params["schema"])
        try:
            return fn()
        except KeyboardInterrupt as exc:
            # Each revision is whole or not done: again, not --resume, finishes the work.
            raise InterruptedByUser("interrupted", hint=INTERRUPTED_HINT) from exc

    command = click.get_current_context().command.name or ""
    return reported(command, as_json, {"store": store}, run)


# A revision (or the template that makes them) of `alembic init`: Alembic's op runs SQL
# through a migration context statemigrate never sets up (its proxy's NameError).
_ALEMBIC_OP = re.compile(r"^\s*(from alembic import op\b|import alembic\.op\b)", re.MULTILINE)


def check_schema_dir(schema: str) -> None:
    """Refuse, with what to do, a schema directory that is not one or is Alembic's own.

    Raises:
        SchemaError: no ``versions/`` folder (hint: ``statemigrate init``), or the
            template or a revision imports Alembic's ``op`` (hint: what to change).
    """
    from ..schema.errors import SchemaError

    path = Path(schema)
    if not (path / "versions").is_dir():
        raise SchemaError(
            f"{schema}: not a schema directory (no versions/ folder)",
            hint=f"start one with `statemigrate init {schema}`",
        )
    files = [path / "script.py.mako", *sorted((path / "versions").glob("*.py"))]
    alembic = [f for f in files if f.is_file() and _ALEMBIC_OP.search(_text(f))]
    if alembic:
        raise SchemaError(
            f"{alembic[0]}: made by `alembic init`: it imports Alembic's op, which runs"
            " SQL, not statemigrate's operations",
            hint="in script.py.mako and each revision, write `from statemigrate import op`"
            " for `from alembic import op` (and drop `import sqlalchemy as sa`)",
        )


def _text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return ""  # unreadable: the schema's loader says so in its own words


def _emit_migration(report: Any) -> None:
    """``--json`` of upgrade, downgrade and stamp (docs/schemas/upgrade.schema.json)."""
    command = click.get_current_context().command.name or ""
    out = report.to_json()
    out["seconds"] = round(out["seconds"], 3)
    emit_report(command, report.status, 0, out)


def _print_migration(report: Any, asked_backup: str | None = None) -> None:
    if report.created:
        echo(f"created {report.store}: a new, empty {report.engine} store")
    if report.recovered:
        echo(f"recovered: {report.recovered}")
    for rev in report.revisions:
        took = "" if report.dry_run else f"  ({rev['seconds']:.2f}s)"
        first = rev["message"].splitlines()[0] if rev["message"] else ""
        echo(f"{rev['direction']:<9} {rev['revision']}  {first}{took}")
        if report.dry_run:
            for line in rev["operations"]:
                echo(f"    op.{line}")
    was = ", ".join(report.from_revisions) or "base"
    now = ", ".join(report.to_revisions) or "base"
    if report.status == "up_to_date":
        echo(f"{report.store}: already at {now}; nothing to do")
    elif report.status == "dry_run":
        echo(f"dry run: {report.store} would go from {was} to {now}; nothing was changed")
    else:
        echo(f"{report.store}: {report.status} from {was} to {now}")
    if report.backup:
        echo(f"backup written to {report.backup}")
    if report.backup and asked_backup and report.backup != os.fspath(asked_backup):
        echo(f"{asked_backup} was there already (an earlier run's backup): kept as it was")
    if report.digest_before and report.status != "dry_run":
        echo(f"store digest before {report.digest_before}, after {report.digest_after}")


def _layout_option() -> Callable[[F], F]:
    """``--layout FILE``: the store is in an app's own layout (engine option layout=FILE)."""
    return click.option(
        "--layout",
        type=click.Path(dir_okay=False),
        metavar="FILE",
        help="A layout file (TOML): the store is in the app's own layout (README: Your app's"
        " own layout).",
    )


def _layout(layout: str | None) -> dict[str, Any] | None:
    """The engine options of ``--layout``."""
    return {"layout": layout} if layout is not None else None


def _migration_options(fn: F) -> F:
    for option in reversed(
        [
            schema_option(),
            click.option(
                "--backup",
                type=click.Path(),
                help="First write an engine-native backup of the store here; when PATH is taken "
                "(a retry), PATH is kept and the backup gets the UTC time in its name.",
            ),
            click.option(
                "--dry-run",
                is_flag=True,
                help="Print the revisions and operations that would run; change nothing.",
            ),
            click.option(
                "--no-digest", is_flag=True, help="Skip the store digest before and after (faster)."
            ),
            json_option("Print one JSON report on stdout (errors too)."),
            _layout_option(),
            verbosity_options(
                quiet="No progress on stderr (each revision, the records each operation "
                "writes; the report stays)."
            ),
        ]
    ):
        fn = option(fn)
    return fn


def _migrate(
    verb: Callable[..., api.UpgradeReport],
    store: str,
    target: str,
    as_json: bool,
    *,
    schema: str,
    backup: str | None,
    dry_run: bool,
    no_digest: bool,
    layout: str | None,
    **extra: Any,
) -> None:
    """``upgrade`` or ``downgrade`` (``verb``) of STORE to ``target``, its report printed."""
    report = _call(
        as_json,
        store,
        lambda: verb(
            store,
            schema,
            to=target,
            dry_run=dry_run,
            backup=backup,
            digests=not no_digest,
            progress=for_stderr(quiet() or as_json),
            options=_layout(layout),
            **extra,
        ),
    )
    clear()
    _print_migration(report, backup) if not as_json else _emit_migration(report)


@click.command(epilog=UPGRADE_EXIT_HELP)
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
    help="Make the store first when nothing is at STORE, or STORE is an empty directory where"
    " a directory engine's store goes (a first install); its engine is ENGINE:STORE or told"
    " by the suffix. With --backup: nothing is backed up of a store just made.",
)
@_migration_options
def upgrade(store: str, target: str, create: bool, as_json: bool, **common: Any) -> None:
    """Bring STORE to the schema's head (or --to REV) in place, one atomic revision at a time.

    An installer step: no prompts; each revision is applied together with its stamp
    or not at all (a crash leaves the old revision with the old data, and the next
    run finishes cleanly). At the target already: does nothing, exit 0.

    \b
    Examples:
      statemigrate upgrade state.sqlite --schema schemas/example --json
      statemigrate upgrade sqlite:state --create --schema schemas/example
    """
    _migrate(api.upgrade, store, target, as_json, create=create, **common)


@click.command(epilog=DOWNGRADE_EXIT_HELP)
@click.argument("store")
@click.option(
    "--to", "target", required=True, metavar="REV|base|-N", help="The revision to go back to."
)
@_migration_options
def downgrade(store: str, target: str, as_json: bool, **common: Any) -> None:
    """Take STORE back to an earlier revision (--to REV, -1 or base) through the downgrades.

    Each revision's downgrade() runs in place, applied with its stamp or not at all,
    as upgrade does.

    \b
    Examples:
      statemigrate downgrade state.sqlite --to -1 --schema schemas/example
      statemigrate downgrade state.sqlite --to base --schema schemas/example --dry-run
    """
    _migrate(api.downgrade, store, target, as_json, **common)


@click.command()
@click.argument("store")
@click.argument("revision")
@schema_option()
@click.option("--dry-run", is_flag=True, help="Print what the stamp would be; change nothing.")
@json_option()
@_layout_option()
@verbosity_options()
def stamp(
    store: str, revision: str, schema: str, dry_run: bool, as_json: bool, layout: str | None
) -> None:
    """Set STORE's schema revision to REVISION (an id, head or base) without running anything.

    \b
    Example:
      statemigrate stamp state.sqlite 0003 --schema schemas/example
    """
    report = _call(
        as_json,
        store,
        lambda: api.stamp(store, schema, revision, dry_run=dry_run, options=_layout(layout)),
    )
    if as_json:
        _emit_migration(report)
        return
    now = ", ".join(report.to_revisions) or "base"
    verb = "would be stamped" if dry_run else "stamped"
    echo(f"{report.store}: {verb} {now} (was {', '.join(report.from_revisions) or 'base'})")


def _print_unrecorded(report: Any) -> None:
    if report.unrecorded_private:
        echo(
            f"note: {', '.join(report.unrecorded_private)}: named like an upgrade's private "
            "tables (__sm_tmp__), but no upgrade recorded them; left alone as your data"
        )


def _print_current(report: Any) -> None:
    at = ", ".join(report.current) or "base (no revision)"
    if report.heads is not None:  # --schema: whether it is at head, as `alembic current` says
        head = ", ".join(report.heads) or "base"
        at += " (head)" if report.at_head else f"; the schema's head is {head}"
    echo(f"{report.store}: at {at}{' (interrupted)' if report.interrupted else ''}")
    if report.interrupted:
        echo(f"interrupted: {report.interrupted['message']}")
    _print_unrecorded(report)


@click.command()
@click.argument("store")
@schema_option(required=False, help="Also say whether it is at head: 0005 (head).")
@json_option()
@_layout_option()
@verbosity_options()
def current(store: str, schema: str | None, as_json: bool, layout: str | None) -> None:
    """Print STORE's stamped schema revision(s). Read only: it never changes the store.

    With --schema, "(head)" follows a revision that is the schema's head. An upgrade
    interrupted by a crash is reported ("interrupted"), not finished:
    `statemigrate upgrade` (or `downgrade`) finishes it.

    \b
    Examples:
      statemigrate current state.sqlite
      statemigrate current state.sqlite --schema schemas/example
    """
    report = _call(
        as_json, store, lambda: api.current(store, schema=schema, options=_layout(layout))
    )
    if as_json:
        emit_report("current", "ok", 0, report.to_json())  # docs/schemas/current.schema.json
    else:
        _print_current(report)


def _print_check(report: Any) -> None:
    at = ", ".join(report.current) or "base"
    head = ", ".join(report.heads or []) or "base"
    if report.interrupted:
        echo(f"{report.store}: at {at}, but {report.interrupted['message']}")
    elif report.unknown:
        echo(f"{report.store}: at {at}, unknown to this schema (head {head}): a newer app wrote it")
    elif report.at_head:
        echo(f"{report.store}: at head {head}")
    else:
        echo(f"{report.store}: at {at}, schema head is {head}: run `statemigrate upgrade`")
    for f in report.changed_files:
        echo(f"revision {f['revision']} changed after it was applied: {f['path']}")
    _print_unrecorded(report)


@click.command()
@click.argument("store")
@schema_option()
@json_option()
@_layout_option()
@verbosity_options()
def check(store: str, schema: str, as_json: bool, layout: str | None) -> None:
    """Exit 0 when STORE is at the schema's head, 1 otherwise (naming both revisions).

    Also exit 1 when a revision file changed after it was applied (its checksum,
    recorded beside the stamp, differs), the store's revision is unknown, or an
    upgrade was interrupted (reported, not finished: check never changes the store).

    \b
    Example:
      statemigrate check state.sqlite --schema schemas/example || echo "needs an upgrade"
    """
    report = _call(as_json, store, lambda: api.check(store, schema, options=_layout(layout)))
    code = 0 if report.ok else 1
    if as_json:
        emit_report("check", _check_status(report), code, report.to_json())
    else:
        _print_check(report)
    sys.exit(code)


def _check_status(report: Any) -> str:
    """``check --json``'s status (docs/schemas/check.schema.json), in _print_check's order."""
    if report.interrupted:
        return "unfinished"  # an upgrade was interrupted; upgrade finishes it
    if report.unknown:
        return "too_new"  # as upgrade says of a store a newer app wrote
    if not report.at_head:
        return "behind"
    return "changed" if report.changed_files else "at_head"


@click.command()
@schema_option()
@json_option("Print the revisions as JSON.")
@verbosity_options()
def history(schema: str, as_json: bool) -> None:
    """List the schema's revisions, newest first (like `alembic history`).

    \b
    Example:
      statemigrate history --schema schemas/example
    """
    rows = _call(as_json, None, lambda: api.history(schema))
    if as_json:
        emit_report("history", "ok", 0, {"schema": schema, "revisions": rows})
        return
    for r in rows:
        down = ", ".join(r["down_revision"]) or "<base>"
        flags = (
            ("head", r["is_head"]),
            ("merge", r["is_merge"]),
            ("branchpoint", r["is_branch_point"]),
        )
        tags = [t for t, on in flags if on]
        tag = f" ({', '.join(tags)})" if tags else ""
        first = r["message"].splitlines()[0] if r["message"] else ""
        echo(f"{down} -> {r['revision']}{tag}, {first}")


@click.command()
@schema_option()
@click.option("-m", "--message", required=True, help="What the revision does.")
@click.option("--head", default="head", show_default=True, help="The revision it follows.")
@click.option("--rev-id", help="The revision id (default: random, as Alembic makes them).")
@click.option("--dry-run", is_flag=True, help="Say what would be written; write nothing.")
@json_option("Print the new file's path as JSON.")
@verbosity_options()
def revision(
    schema: str, message: str, head: str, rev_id: str | None, dry_run: bool, as_json: bool
) -> None:
    """Write a new revision file into the schema from its script.py.mako template.

    \b
    Example:
      statemigrate revision --schema schemas/example -m "add a drafts table"
    """
    if dry_run:
        _call(as_json, None, lambda: None)  # the schema directory is checked all the same
        out = {"schema": schema, "message": message, "head": head, "path": None, "dry_run": True}
        if as_json:
            emit_report("revision", "dry_run", 0, out)  # docs/schemas/revision.schema.json
        else:
            echo(f"would write a revision after {head}: {message}")
        return
    path = _call(as_json, None, lambda: api.revision(schema, message, head=head, rev_id=rev_id))
    if as_json:
        out = {"schema": schema, "message": message, "head": head, "path": path, "dry_run": False}
        emit_report("revision", "written", 0, out)
    else:
        echo(f"wrote {path}")


@click.command()
@click.argument("directory", metavar="DIR", type=click.Path(file_okay=False))
@verbosity_options()
def init(directory: str) -> None:
    """Start a schema directory in DIR, with a first revision to edit.

    DIR gets the template revisions are made from (script.py.mako), an alembic.ini,
    versions/ and revision 0001, which does nothing until you edit its upgrade()
    (op.create_table …); the revisions after it come from `statemigrate revision`.
    DIR must be new or empty (else exit 5).

    \b
    Example:
      statemigrate init schema
      statemigrate upgrade sqlite:state --create --schema schema
    """
    first = reported("init", False, {"directory": directory}, lambda: api.init(directory))
    echo(f"made {directory}: script.py.mako, alembic.ini, versions/")
    echo(f"first revision: {first}")
    echo(f"next: edit it, then `statemigrate upgrade STORE --create --schema {directory}`")


COMMANDS = (upgrade, downgrade, stamp, current, check, history, revision, init)
