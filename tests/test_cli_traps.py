"""What a newcomer meets on the command line (issue 30): no trap in names, hints or help.

An engine prefix with a typo is refused, not made into a file name; a hint names an
option the failing command has (and takes what the hint says it takes); every
``--help`` says what the command does with an example; ``-q``/``-v`` on every
command; ``checksum`` and ``engines`` read in a terminal; ``init`` starts a schema.
"""

from __future__ import annotations

import json
import os
import pty
import re
import subprocess
import sys
from pathlib import Path

import click
import pytest
from click.testing import CliRunner

from statemigrate.cli import main
from statemigrate.engines.sqlite import SqliteEngine
from statemigrate.model import TableInfo, TableKind
from statemigrate.testing.example import EXAMPLE
from statemigrate.testing.stores import write_store

HANG_GUARD = 120  # seconds: a guard against a hung child, never a measurement


def run(*args: object, **kwargs: object):
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False, **kwargs)


def hint_of(output: str) -> str | None:
    """The text after ``hint:`` in a failure's output, or None."""
    found = re.search(r"^hint: (.*)$", output, re.MULTILINE)
    return found.group(1) if found else None


@pytest.fixture
def src(tmp_path: Path) -> Path:
    content = {
        TableInfo("events"): [(b"e%03d" % i, b"payload %d" % i) for i in range(50)],
        TableInfo("settings", TableKind.VERSIONED): [(b"s1", b"on", 3), (b"s2", b"off", 9)],
    }
    return write_store(SqliteEngine, tmp_path / "a.sqlite", content)


def every_command() -> list[tuple[str, click.Command]]:
    """Every command by its full name (``layout init`` too), groups left out."""
    found = []

    def walk(prefix: str, group: click.Group) -> None:
        for name, cmd in sorted(group.commands.items()):
            full = f"{prefix}{name}"
            if isinstance(cmd, click.Group):
                walk(f"{full} ", cmd)
            else:
                found.append((full, cmd))

    walk("", main)
    return found


COMMAND_NAMES = [name for name, _ in every_command()]


def command(name: str) -> click.Command:
    return dict(every_command())[name]


# --- 1. an unknown ENGINE: prefix -------------------------------------------------------

STORE_VERBS = [
    ["convert", "{src}", "rockdb:x.db"],
    ["convert", "rockdb:{src}", "out.sqlite"],
    ["verify", "{src}", "rockdb:x.db"],
    ["checksum", "rockdb:x.db"],
    ["inspect", "rockdb:x.db"],
    ["upgrade", "rockdb:x.db", "--create", "--schema", "{schema}"],
    ["downgrade", "rockdb:x.db", "--to", "base", "--schema", "{schema}"],
    ["stamp", "rockdb:x.db", "head", "--schema", "{schema}"],
    ["current", "rockdb:x.db"],
    ["check", "rockdb:x.db", "--schema", "{schema}"],
    ["layout", "init", "rockdb", "{src}"],
]


@pytest.mark.parametrize("args", STORE_VERBS, ids=[" ".join(a[:2]) for a in STORE_VERBS])
def test_a_typo_in_the_engine_prefix_is_exit_2_with_did_you_mean(
    args: list[str], src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    res = run(*(a.format(src=src, schema=EXAMPLE) for a in args))
    assert res.exit_code == 2, res.output
    assert "unknown engine 'rockdb'; did you mean 'rocksdb'?" in res.output
    assert sorted(os.listdir(tmp_path)) == ["a.sqlite"], "nothing is made of the typo"


@pytest.mark.parametrize("flag", ["--to", "--from"])
def test_a_typo_in_from_or_to_says_did_you_mean(flag: str, src: Path, tmp_path: Path) -> None:
    res = run("convert", src, tmp_path / "b.db", flag, "rocks")
    assert res.exit_code == 2 and "unknown engine 'rocks'; did you mean 'rocksdb'?" in res.output


def test_an_unknown_prefix_far_from_every_name_lists_the_known_ones(src: Path) -> None:
    res = run("checksum", "zzzzqq:x.db")
    assert res.exit_code == 2 and "unknown engine 'zzzzqq'" in res.output
    assert "known engines:" in res.output and "sqlite" in res.output and "rocksdb" in res.output


def test_an_existing_path_with_a_colon_and_a_drive_letter_are_paths(
    src: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    colon = tmp_path / "snap:1.sqlite"
    colon.write_bytes(src.read_bytes())
    assert run("checksum", "snap:1.sqlite").exit_code == 0
    res = run("convert", src, "C:x.sqlite", "-q")  # one letter: a Windows drive, not an engine
    assert res.exit_code == 0, res.output
    assert (tmp_path / "C:x.sqlite").is_file()


# --- 2. every hint names an option of its command ----------------------------------------

_HINT_OPTION = re.compile(r"(?<![\w-])(--[a-z][a-z0-9-]*)(?: ([A-Z][A-Z_]*)\b(?!:))?")


def assert_hint_options_exist(name: str, hint: str) -> None:
    """Every ``--opt`` (``--opt WHAT``) a hint names is an option of command ``name``
    (taking WHAT); an other command quoted whole (`statemigrate x ...`) is that one's."""
    cmd = command(name)
    own = re.sub(r"`statemigrate [^`]*`", "", hint)
    for opt, what in _HINT_OPTION.findall(own):
        params = [p for p in cmd.params if opt in (*p.opts, *p.secondary_opts)]
        assert params, f"`{name}`: the hint {hint!r} names {opt}, which `{name}` lacks"
        if what:
            metavar = params[0].metavar or params[0].type.name.upper()
            assert metavar == what, (
                f"`{name}`: the hint {hint!r} says {opt} {what}, but `{name}`'s {opt} takes {metavar}"
            )


NO_ENGINE_FROM_PATH = [
    ["convert", "{src}", "{tmp}/noext"],
    ["upgrade", "{tmp}/noext", "--create", "--schema", "{schema}"],
    ["convert", "{junk}", "{tmp}/out.sqlite"],
    ["verify", "{junk}", "{src}"],
    ["checksum", "{junk}"],
    ["inspect", "{junk}"],
    ["current", "{junk}"],
    ["check", "{junk}", "--schema", "{schema}"],
    ["stamp", "{junk}", "head", "--schema", "{schema}"],
    ["upgrade", "{junk}", "--schema", "{schema}"],
    ["downgrade", "{junk}", "--to", "base", "--schema", "{schema}"],
]


@pytest.mark.parametrize(
    "args",
    NO_ENGINE_FROM_PATH,
    ids=[f"{a[0]}-{'no-suffix' if '{tmp}/noext' in a else 'junk'}" for a in NO_ENGINE_FROM_PATH],
)
def test_every_hint_for_an_engine_not_known_from_the_path_names_an_option_it_has(
    args: list[str], src: Path, tmp_path: Path
) -> None:
    junk = tmp_path / "junk.bin"
    junk.write_bytes(b"no engine's signature " * 100)
    argv = [a.format(src=src, tmp=tmp_path, junk=junk, schema=EXAMPLE) for a in args]
    res = run(*argv)
    assert res.exit_code in (2, 4), res.output
    hint = hint_of(res.output)
    assert hint and "ENGINE:PATH" in hint, res.output  # the one way every command has
    assert_hint_options_exist(args[0], hint)


# --- 3. every --help says what the command does, with an example -------------------------


@pytest.mark.parametrize("name", COMMAND_NAMES)
def test_every_help_has_an_example_naming_the_command(name: str) -> None:
    res = run(*name.split(), "--help")
    assert res.exit_code == 0
    lines = res.output.splitlines()
    assert any(x.strip() == "Example:" or x.strip() == "Examples:" for x in lines), res.output
    at = next(i for i, x in enumerate(lines) if x.strip() in ("Example:", "Examples:"))
    examples = [x.strip() for x in lines[at + 1 :] if x.startswith("  ")]
    assert any(x.startswith(f"statemigrate {name} ") for x in examples), res.output


@pytest.mark.parametrize("name", COMMAND_NAMES)
def test_every_option_a_help_text_names_is_the_commands_own(name: str) -> None:
    cmd = command(name)
    text = re.sub(r"`statemigrate [^`]*`", "", f"{cmd.help or ''}\n{cmd.epilog or ''}")
    text = re.sub(r"(?m)^\s*statemigrate .*$", "", text)  # an example may run other commands
    for opt in set(re.findall(r"(?<![\w-])--[a-z][a-z0-9-]*", text)):
        assert any(opt in (*p.opts, *p.secondary_opts) for p in cmd.params), (
            f"`{name} --help` speaks of {opt}, which `{name}` does not take"
        )


def test_verify_prints_the_per_table_digests_its_help_promises(src: Path, tmp_path: Path) -> None:
    help = " ".join(run("verify", "--help").output.split())
    assert "-v adds each table's counts and digests" in help, help
    manifest = json.loads(run("checksum", src, "--json").output)  # checksum's own scan
    res = run("verify", src, src, "-v")
    assert res.exit_code == 0, res.output
    for t in manifest["tables"]:
        # stdout: the report (the end summary of the run is on stderr, and also starts
        # each row with the table's name)
        row = next(x for x in res.stdout.splitlines() if x.split()[:1] == [t["table"]])
        assert t["sum"] in row and f"{t['count']:,}" in row, res.stdout


def test_current_with_schema_says_head_as_alembic_does(tmp_path: Path) -> None:
    from alembic.script import ScriptDirectory

    heads = ScriptDirectory(str(EXAMPLE)).get_heads()  # Alembic's own reading of the graph
    assert len(heads) == 1
    store = f"sqlite:{tmp_path / 's.sqlite'}"
    assert run("upgrade", store, "--create", "--schema", EXAMPLE, "-q").exit_code == 0
    at_head = run("current", store, "--schema", EXAMPLE)
    assert at_head.exit_code == 0 and f"{heads[0]} (head)" in at_head.output, at_head.output
    assert run("downgrade", store, "--to", "-1", "--schema", EXAMPLE, "-q").exit_code == 0
    behind = run("current", store, "--schema", EXAMPLE)
    assert "(head)" not in behind.output and "head" in behind.output, behind.output
    assert "(head)" not in run("current", store).output  # no schema: nothing to say of head


# --- 4. no ignored option; -q and -v everywhere ------------------------------------------


@pytest.mark.parametrize("name", COMMAND_NAMES)
def test_every_command_takes_quiet_and_verbose(name: str) -> None:
    opts = {o for p in command(name).params for o in (*p.opts, *p.secondary_opts)}
    assert {"-q", "--quiet", "-v", "--verbose"} <= opts, name


@pytest.mark.parametrize("args", [["history"], ["current", "x"], ["check", "x"]])
def test_a_read_only_command_refuses_dry_run_instead_of_ignoring_it(args: list[str]) -> None:
    res = run(*args, "--schema", EXAMPLE, "--dry-run")
    assert res.exit_code == 2 and "No such option" in res.output and "--dry-run" in res.output


@pytest.mark.parametrize("flag", ["-v", "--verbose", "--traceback"])
def test_verbose_shows_the_traceback_of_an_error(
    flag: str, src: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_a: object, **_kw: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr("statemigrate.api.checksum", boom)
    quiet = run("checksum", src)
    assert quiet.exit_code == 70 and "Traceback" not in quiet.output
    res = run("checksum", src, flag)
    assert res.exit_code == 70 and "Traceback" in res.output and "kaboom" in res.output


def test_quiet_leaves_only_errors_on_stderr(src: Path, tmp_path: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "statemigrate.cli", "convert", str(src), str(tmp_path / "b.db"),
         "--to", "sqlite", "-q"],
        check=False, capture_output=True, text=True, timeout=HANG_GUARD,
    )  # fmt: skip
    assert res.returncode == 0 and res.stderr == "" and res.stdout == "", res


def test_convert_verbose_lists_each_table(src: Path, tmp_path: Path) -> None:
    res = run("convert", src, tmp_path / "b.sqlite", "-v")
    assert res.exit_code == 0, res.output
    rows = {x.split()[0]: x for x in res.output.splitlines() if x.split()}
    assert re.search(r"\b50\b", rows["events"]) and re.search(r"\b2\b", rows["settings"]), rows


# --- 5. checksum and engines in a terminal ----------------------------------------------


def in_a_terminal(*args: str) -> list[str]:
    """The command's stdout when stdout is a terminal (a pseudo-terminal), as lines."""
    leader, follower = pty.openpty()
    proc = subprocess.Popen(
        [sys.executable, "-m", "statemigrate.cli", *args],
        stdout=follower, stderr=subprocess.DEVNULL, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    os.close(follower)
    out = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # EIO: the child closed its end
            break
        if not chunk:
            break
        out += chunk
    os.close(leader)
    assert proc.wait(timeout=HANG_GUARD) == 0
    return out.decode().replace("\r\n", "\n").splitlines()


def test_checksum_in_a_terminal_is_an_aligned_table_with_a_header(src: Path) -> None:
    lines = in_a_terminal("checksum", str(src))
    assert lines[0].split() == ["table", "kind", "records", "digest"], lines
    rows = lines[1:3]
    digest_at = lines[0].index("digest")
    for row in rows:
        assert re.fullmatch(r"[0-9a-f]{32}", row[digest_at:]), lines
    assert any(x.startswith("store digest ") for x in lines)


def test_checksum_piped_stays_tab_separated(src: Path) -> None:
    res = subprocess.run(
        [sys.executable, "-m", "statemigrate.cli", "checksum", str(src)],
        capture_output=True, text=True, timeout=HANG_GUARD, check=True,
    )  # fmt: skip
    lines = res.stdout.splitlines()
    assert [x.split("\t")[:3] for x in lines[:2]] == [
        ["events", "plain", "50"],
        ["settings", "versioned", "2"],
    ]
    assert lines[-1].startswith("store digest ")


@pytest.mark.parametrize("tty", [False, True], ids=["piped", "terminal"])
def test_engines_fits_80_columns(tty: bool) -> None:
    lines = in_a_terminal("engines") if tty else run("engines").output.splitlines()
    wide = [x for x in lines if len(x) > 80]
    assert not wide, f"{len(wide)} lines over 80 columns, the widest {max(map(len, wide))}"
    for name in ("sqlite", "rocksdb", "lmdb"):
        assert any(x.startswith(name) for x in lines)


def test_checksum_and_engines_have_json(src: Path) -> None:
    assert json.loads(run("checksum", src, "--json").output)["command"] == "checksum"
    assert json.loads(run("engines", "--json").output)["command"] == "engines"


# --- 6. starting a schema ---------------------------------------------------------------


def test_init_makes_a_schema_directory_that_upgrades_a_new_store(tmp_path: Path) -> None:
    from alembic.script import ScriptDirectory

    schema = tmp_path / "schema"
    res = run("init", schema)
    assert res.exit_code == 0, res.output
    assert (schema / "script.py.mako").read_bytes() == (EXAMPLE / "script.py.mako").read_bytes()
    assert (schema / "alembic.ini").is_file()
    heads = ScriptDirectory(str(schema)).get_heads()  # Alembic reads the new graph
    assert len(heads) == 1
    res = run("upgrade", "--create", f"sqlite:{tmp_path / 's'}", "--schema", schema, "--json")
    assert res.exit_code == 0, res.output
    out = json.loads(res.output)
    assert out["status"] == "upgraded" and out["to"] == heads, out
    res = run("revision", "--schema", schema, "-m", "second", "--rev-id", "0002")
    assert res.exit_code == 0 and ScriptDirectory(str(schema)).get_heads() == ["0002"]


def test_init_refuses_a_directory_that_holds_anything(tmp_path: Path) -> None:
    taken = tmp_path / "taken"
    taken.mkdir()
    (taken / "notes.txt").write_text("mine")
    res = run("init", taken)
    assert res.exit_code == 5, res.output
    assert sorted(os.listdir(taken)) == ["notes.txt"]
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run("init", empty).exit_code == 0


@pytest.mark.parametrize(
    "verb", [["revision", "-m", "x"], ["revision", "-m", "x", "--dry-run"], ["history"]]
)
def test_a_missing_schema_directory_hints_at_init(verb: list[str], tmp_path: Path) -> None:
    res = run(*verb, "--schema", tmp_path / "newdir")
    assert res.exit_code == 2, res.output
    assert "statemigrate init" in (hint_of(res.output) or ""), res.output


def test_an_alembic_init_directory_is_recognised_with_what_to_change(tmp_path: Path) -> None:
    from alembic import command
    from alembic.config import Config

    made = tmp_path / "alembic_made"
    config = Config(str(tmp_path / "alembic.ini"))
    config.set_main_option("script_location", str(made))
    command.init(config, str(made))  # Alembic's own template
    command.revision(config, "first", rev_id="0001")
    revision = next((made / "versions").glob("0001*.py"))
    text = revision.read_text()
    assert "from alembic import op" in text
    revision.write_text(text.replace("    pass", "    op.create_table('t')", 1))
    res = run("upgrade", "--create", f"sqlite:{tmp_path / 's'}", "--schema", made)
    assert res.exit_code == 2, res.output
    hint = hint_of(res.output) or ""
    assert "from statemigrate import op" in hint and "from alembic import op" in hint, res.output
    assert not (tmp_path / "s").exists()


def test_the_empty_key_refusal_names_tables(tmp_path: Path) -> None:
    """The bundled example store holds an empty key (table ``odd``), which LMDB refuses:
    the hint names ``--tables``, the way to leave that table out."""
    example = Path(__file__).resolve().parents[1] / "examples" / "app-state.sqlite"
    r = run("convert", example, tmp_path / "out.lmdb")
    assert r.exit_code == 5, r.output
    assert "cannot store key (empty) of table 'odd'" in r.stderr
    hint = hint_of(r.stderr)
    assert hint is not None and "--tables" in hint and "'odd'" in hint, r.stderr
    tables = "events,settings"
    r = run("convert", "-q", "--tables", tables, example, tmp_path / "out.lmdb")
    assert r.exit_code == 0, r.output


def test_a_foreign_table_refusal_points_at_layout_init(tmp_path: Path) -> None:
    """A SQL file whose tables are not in statemigrate's layout: the way out the hint
    names is ``layout init`` (and the flag that leaves them out)."""
    import apsw

    store = tmp_path / "app.sqlite"
    conn = apsw.Connection(str(store))
    conn.execute(
        "CREATE TABLE mail (key TEXT PRIMARY KEY, value BLOB); INSERT INTO mail VALUES ('a', x'00')"
    )
    conn.close()
    r = run("convert", store, tmp_path / "out.lmdb")
    assert r.exit_code == 4, r.output
    hint = hint_of(r.stderr)
    assert hint is not None and "layout init" in hint and "--skip-foreign-tables" in hint, r.stderr


# --- 7. verify's report reads at a glance ---------------------------------------------


def test_verify_counts_a_missing_table_as_one_difference(src: Path, tmp_path: Path) -> None:
    """A table B lacks is one difference (saying how many records A holds in it), not one
    per record."""
    b = tmp_path / "b.sqlite"
    assert run("convert", "-q", "--tables", "settings", src, b).exit_code == 0
    res = run("verify", src, b)
    assert res.exit_code == 1, res.output
    assert "events: table missing in B (50 records in A)" in res.stdout, res.stdout
    assert "DIFFERENT (1 difference)" in res.stdout, res.stdout
    assert "missing in B\n" not in res.stdout  # no line per record
    data = json.loads(run("verify", src, b, "--json").output)
    assert data["difference_count"] == 1 and len(data["differences"]) == 1, data
    back = run("verify", b, src, "--json")  # the other way round: missing in A
    assert json.loads(back.output)["difference_count"] == 1, back.output


def test_verify_shows_a_long_key_by_its_first_bytes_and_its_length(tmp_path: Path) -> None:
    key = b"k" * 800
    a = write_store(SqliteEngine, tmp_path / "a.sqlite", {TableInfo("t"): [(key, b"1")]})
    b = write_store(SqliteEngine, tmp_path / "b.sqlite", {TableInfo("t"): [(key, b"2")]})
    res = run("verify", a, b)
    assert res.exit_code == 1, res.output
    line = next(x for x in res.stdout.splitlines() if "value differs" in x)
    assert line == f"t: key {key[:32].hex()}… (800 bytes): value differs", line
    data = json.loads(run("verify", a, b, "--json").output)
    assert data["differences"][0]["key"] == key.hex()  # the JSON keeps every key whole


def test_verify_says_how_many_records_were_the_same(src: Path, tmp_path: Path) -> None:
    same = run("verify", src, src)
    assert same.exit_code == 0, same.output
    assert "52 records the same in A and B (2 tables)" in same.stdout, same.stdout
    assert same.stdout.splitlines()[-1] == "equal"
    content = {
        TableInfo("events"): [(b"e%03d" % i, b"payload %d" % i) for i in range(1, 50)],
        TableInfo("settings", TableKind.VERSIONED): [(b"s1", b"on", 4), (b"s2", b"off", 9)],
    }
    b = write_store(SqliteEngine, tmp_path / "b.sqlite", content)
    res = run("verify", src, b)
    assert res.exit_code == 1, res.output
    assert "50 records the same in A and B (A holds 52, B 51)" in res.stdout, res.stdout
    assert json.loads(run("verify", src, b, "--json").output)["equal_records"] == 50
    manifest = tmp_path / "m.json"
    manifest.write_text(run("checksum", b, "--json").output)
    against = run("verify", src, "--manifest", manifest, "--json")
    assert json.loads(against.output)["equal_records"] == 0  # both tables' digests differ
    manifest.write_text(run("checksum", src, "--json").output)
    assert (
        json.loads(run("verify", src, "--manifest", manifest, "--json").output)["equal_records"]
        == 52
    )


# --- 8. layout init on a store that needs no layout -----------------------------------


@pytest.mark.parametrize("engine", ["sqlite", "rocksdb", "lmdb"])
def test_layout_init_on_the_default_layout_says_no_layout_file_is_needed(
    engine: str, src: Path, tmp_path: Path
) -> None:
    """Exit 0, one line on stderr saying why, nothing on stdout (a `> file` gets no
    layout that would mislead). RocksDB's own layout was refused (exit 4), or guessed as
    a prefix layout where the keys hold a '/' (the bundled example's)."""
    store = tmp_path / f"state.{engine}"
    assert run("convert", "-q", src, f"{engine}:{store}").exit_code == 0
    res = run("layout", "init", engine, store)
    assert res.exit_code == 0, res.output
    assert res.stdout == "", res.stdout
    lines = res.stderr.splitlines()
    assert len(lines) == 1 and "own" in lines[0] and "no layout file is needed" in lines[0], lines
    assert run("layout", "init", "-q", engine, store).output == ""


def test_layout_init_still_guesses_a_store_written_through_a_prefix_layout(
    src: Path, tmp_path: Path
) -> None:
    """statemigrate's metadata family beside one family of prefixed keys: the layout the
    store was written through, guessed again."""
    layout = Path(__file__).resolve().parents[1] / "schemas" / "layouts" / "prefix.rocksdb.toml"
    store = tmp_path / "pre.rocksdb"
    assert run("convert", "-q", "--dest-layout", layout, src, f"rocksdb:{store}").exit_code == 0
    res = run("layout", "init", "rocksdb", store)
    assert res.exit_code == 0, res.output
    assert 'mode = "prefix"' in res.stdout and "Tables found: events, settings" in res.stdout
