"""The mutation check (``make mutants``): each curated mutation of ``mutations.toml``,
alone, on a copy of ``src/``, against the tests that guard it.

Usage:  python tests/mutants/run.py [--only ID,ID] [--list] [--verbose] [--no-baseline]

Each mutation names the guarantee it guards, a file under ``src/``, the exact text to
replace (or several texts), each of which must occur exactly once (a mutation whose
text is gone or ambiguous is reported as not applying and fails the run, never
silently skipped), the replacements, and the tests that must kill it (pytest node ids
or files, optionally a ``-k`` expression). ``src/`` (with the built ``_native.abi3.so``) is copied once to a
temporary directory; for each mutation the one file is changed there, the tests run
with ``PYTHONPATH=<copy>/src`` in one process (child processes the tests start, the
CLI included, inherit it and import the mutated copy too), and the file is restored.
The run first checks, in a child of the same environment, that ``statemigrate`` is
imported from the copy (by the child and by a CLI child of its own), and (unless ``--no-baseline``) that every mutation's tests pass
on the unmutated copy, so that a kill means the mutation and not a failing test.

A mutation is killed when its tests fail (pytest's exit code 1); any other outcome of
pytest (no test selected, a usage or collection error) is an error. The last line is
``mutants: K killed, S survived of N``; the exit code is non-zero when a mutation
survived, did not apply, or erred.

Why curated patches, not mutmut or cosmic-ray: those mutate every operator of every
function and run the suite per mutant (hours on this suite, most mutants equivalent or
guarded by tests unrelated to a guarantee), and neither makes the semantic mutations a
guarantee needs (a digest taken from the copy instead of the source spans lines). A
patch per guarantee runs in minutes, says which promise each mutant breaks, and
needs no dependency.
"""

from __future__ import annotations

import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import tomllib

ROOT = Path(__file__).resolve().parents[2]
LIST = Path(__file__).with_name("mutations.toml")
TEST_TIMEOUT = 1800  # seconds per pytest run: a hang guard only


@dataclass
class Mutation:
    """One mutation of ``mutations.toml``."""

    id: str
    guards: str
    file: str
    find: list[str]
    replace: list[str]
    tests: list[str]
    k: str | None = None
    outcome: str = ""
    detail: list[str] = field(default_factory=list)

    def pytest_args(self) -> list[str]:
        return [*self.tests, *(["-k", self.k] if self.k else [])]


def load(path: Path) -> list[Mutation]:
    """The mutations of the list, checked for the fields each needs."""
    data = tomllib.loads(path.read_text(encoding="utf-8"))
    out = []
    seen = set()
    for i, m in enumerate(data.get("mutation", [])):
        missing = [f for f in ("id", "guards", "file", "find", "replace", "tests") if f not in m]
        if missing:
            raise SystemExit(f"{path}: mutation #{i + 1} has no {', '.join(missing)}")
        if m["id"] in seen:
            raise SystemExit(f"{path}: mutation id {m['id']!r} is listed twice")
        if m["find"] == m["replace"]:
            raise SystemExit(f"{path}: mutation {m['id']!r} replaces its text by itself")
        seen.add(m["id"])
        finds, replaces = _edits(m["find"]), _edits(m["replace"])
        if len(finds) != len(replaces):
            raise SystemExit(
                f"{path}: mutation {m['id']!r} has {len(finds)} texts to find "
                f"and {len(replaces)} replacements"
            )
        out.append(
            Mutation(m["id"], m["guards"], m["file"], finds, replaces, list(m["tests"]), m.get("k"))
        )
    return out


def _edits(given: str | list[str]) -> list[str]:
    """One text, or several (one mutation changing several places of the file)."""
    return [given] if isinstance(given, str) else list(given)


def child_env(src: Path) -> dict[str, str]:
    """The environment of every pytest run: the copy first on the path, no bytecode
    written (a restored file must never be shadowed by a mutant's cached bytecode)."""
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(src), *filter(None, [env.get("PYTHONPATH")])])
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def check_imported_from(src: Path, env: dict[str, str]) -> None:
    """Fail loudly unless ``statemigrate`` (and a CLI child's) comes from the copy."""
    probe = (
        "import subprocess, sys, statemigrate; print(statemigrate.__file__); "
        "print(subprocess.run([sys.executable, '-m', 'statemigrate', '--version'], "
        "capture_output=True, text=True, check=True).stdout.strip()); "
        "print(subprocess.run([sys.executable, '-c', 'import statemigrate; "
        "print(statemigrate.__file__)'], capture_output=True, text=True, check=True)"
        ".stdout.strip())"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    lines = done.stdout.splitlines()
    if done.returncode != 0 or len(lines) != 3:
        raise SystemExit(f"mutants: cannot import the copy of src/: {done.stderr.strip()}")
    for where in (lines[0], lines[2]):
        if not Path(where).resolve().is_relative_to(src.resolve()):
            raise SystemExit(
                f"mutants: statemigrate is imported from {where}, not from the copy {src}: "
                "a mutation there would change nothing"
            )


def run_tests(m: Mutation, env: dict[str, str], stop_first: bool) -> tuple[int, str]:
    """pytest over the mutation's tests, in one process; (exit code, its output)."""
    args = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-p",
        "no:cacheprovider",
        "-n",
        "0",
        "-o",
        "addopts=",
        "--no-header",
        "-rfE",
        *(["-x"] if stop_first else []),
        *m.pytest_args(),
    ]
    try:
        done = subprocess.run(
            args,
            cwd=ROOT,
            env=env,
            capture_output=True,
            text=True,
            timeout=TEST_TIMEOUT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        return -1, f"pytest did not finish in {TEST_TIMEOUT} s"
    return done.returncode, done.stdout + done.stderr


def tail(output: str, n: int = 12) -> list[str]:
    return [line for line in output.strip().splitlines() if line.strip()][-n:]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", help="comma-separated mutation ids")
    parser.add_argument("--list", action="store_true", help="list the mutations and exit")
    parser.add_argument("--verbose", action="store_true", help="show pytest's output of each")
    parser.add_argument(
        "--no-baseline",
        action="store_true",
        help="skip the run of each mutation's tests on the unmutated copy",
    )
    parser.add_argument("--file", type=Path, default=LIST, help="the list (mutations.toml)")
    opts = parser.parse_args()
    mutations = load(opts.file)
    if opts.only:
        wanted = opts.only.split(",")
        unknown = sorted(set(wanted) - {m.id for m in mutations})
        if unknown:
            raise SystemExit(f"mutants: no mutation {', '.join(unknown)} in {opts.file}")
        mutations = [m for m in mutations if m.id in wanted]
    if opts.list:
        for m in mutations:
            print(f"{m.id}: {m.guards}\n    {m.file}; tests {' '.join(m.pytest_args())}")
        return 0

    with tempfile.TemporaryDirectory(prefix="sm-mutants-") as tmp:
        os.chmod(tmp, 0o755)  # a test's child run as another account imports the copy too
        src = Path(tmp) / "src"
        shutil.copytree(ROOT / "src", src, ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
        env = child_env(src)
        check_imported_from(src, env)
        print(f"mutants: {len(mutations)} mutations of a copy of src/ at {src}", flush=True)

        for m in mutations:
            target = src / m.file
            if not target.is_file():
                m.outcome, m.detail = "does not apply", [f"no file src/{m.file}"]
                continue
            original = target.read_text(encoding="utf-8")
            mutated = original
            for i, (find, replace) in enumerate(zip(m.find, m.replace, strict=True)):
                found = mutated.count(find)
                if found != 1:
                    m.outcome = "does not apply"
                    m.detail = [
                        f"its text #{i + 1} occurs {found} times in src/{m.file} (once is needed)"
                    ]
                    break
                mutated = mutated.replace(find, replace)
            if m.outcome:
                continue
            if not opts.no_baseline:
                rc, out = run_tests(m, env, stop_first=False)
                if rc != 0:
                    m.outcome = "error"
                    m.detail = [
                        f"its tests do not pass on the unmutated copy (exit {rc})",
                        *tail(out),
                    ]
                    print(f"ERROR     {m.id}: {m.detail[0]}", flush=True)
                    continue
            started = time.monotonic()
            target.write_text(mutated, encoding="utf-8")
            try:
                rc, out = run_tests(m, env, stop_first=True)
            finally:
                target.write_text(original, encoding="utf-8")
            took = time.monotonic() - started
            if rc == 1:
                m.outcome = "killed"
                m.detail = [line for line in out.splitlines() if line.startswith("FAILED")][:3]
            elif rc == 0:
                m.outcome = "survived"
                m.detail = tail(out, 3)
            else:
                m.outcome = "error"
                m.detail = [f"pytest exit {rc} on the mutant", *tail(out)]
            print(f"{m.outcome.upper():9} {m.id} ({took:.0f} s): {m.guards}", flush=True)
            for line in m.detail if (m.outcome != "killed" or opts.verbose) else m.detail[:1]:
                print(f"          {line}", flush=True)
            if opts.verbose:
                print(out, flush=True)

    for m in mutations:
        if m.outcome == "does not apply":
            print(f"DOES NOT APPLY {m.id}: {m.detail[0]}")
    count = {
        o: sum(m.outcome == o for m in mutations)
        for o in ("killed", "survived", "does not apply", "error")
    }
    extra = ""
    if count["does not apply"] or count["error"]:
        extra = f" ({count['does not apply']} did not apply, {count['error']} erred)"
    print(
        f"mutants: {count['killed']} killed, {count['survived']} survived "
        f"of {len(mutations)}{extra}"
    )
    return 0 if count["killed"] == len(mutations) else 1


if __name__ == "__main__":
    sys.exit(main())
