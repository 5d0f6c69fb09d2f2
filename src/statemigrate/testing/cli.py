"""The real ``statemigrate`` command in a subprocess, for tests: run it, kill it, read its
one-line error.

A kill -9 must hit a real process, and a crash must not take the test runner down with
it: every helper here runs this interpreter's statemigrate as a child.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path


def cli_command() -> list[str]:
    """argv prefix that runs this interpreter's statemigrate."""
    return [
        sys.executable,
        "-c",
        "import sys; from statemigrate.cli import main; sys.argv[0] = 'statemigrate'; main()",
    ]


@dataclass
class Run:
    """One finished subprocess."""

    args: list[str]
    returncode: int
    stdout: str
    stderr: str
    seconds: float

    def lines(self) -> list[str]:
        """The non-empty lines of stderr."""
        return [line for line in self.stderr.splitlines() if line.strip()]

    def killed_by(self, sig: int = signal.SIGKILL) -> bool:
        """Whether the process died of ``sig`` (a kill that landed), not by exiting."""
        return self.returncode == -sig


# Root reads every file whatever its mode: without these capabilities the mode bits bind.
DROP_DAC = [
    "setpriv",
    "--bounding-set=-dac_override,-dac_read_search",
    "--inh-caps=-dac_override,-dac_read_search",
    "--",
]


def run_cli(
    args: Sequence[str],
    *,
    timeout: float = 60,
    env: Mapping[str, str] | None = None,
    honour_permissions: bool = False,
    cwd: Path | None = None,
) -> Run:
    """Run ``statemigrate ARGS`` to completion (killed and failed after ``timeout``).

    Args:
        args: the command line after ``statemigrate``.
        timeout: seconds before the test fails as a hang.
        env: extra environment variables.
        honour_permissions: run without CAP_DAC_OVERRIDE/CAP_DAC_READ_SEARCH (through
            ``setpriv``), so that a root test run meets "permission denied" like a user.
        cwd: working directory.
    """
    cmd = cli_command() + [str(a) for a in args]
    if honour_permissions:
        cmd = DROP_DAC + cmd
    full_env = dict(os.environ, **(env or {}))
    started = time.monotonic()
    try:
        proc = subprocess.run(
            cmd, capture_output=True, text=True, timeout=timeout, env=full_env, cwd=cwd, check=False
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(
            f"statemigrate {' '.join(map(str, args))} hung for more than {timeout}s"
        ) from exc
    return Run(
        list(map(str, args)), proc.returncode, proc.stdout, proc.stderr, time.monotonic() - started
    )


def run_and_kill(
    args: Sequence[str],
    delay: float,
    *,
    env: Mapping[str, str] | None = None,
    sig: int = signal.SIGKILL,
    timeout: float = 60,
) -> Run:
    """Start ``statemigrate ARGS``, send ``sig`` after ``delay`` seconds, wait for it.

    A run that ends before ``delay`` is not killed: check :meth:`Run.killed_by` and
    count such a run as not-a-kill (it still must have done its whole job).
    """
    cmd = cli_command() + [str(a) for a in args]
    started = time.monotonic()
    proc = subprocess.Popen(
        cmd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=dict(os.environ, **(env or {})),
    )
    try:
        proc.wait(timeout=delay)
    except subprocess.TimeoutExpired:
        proc.send_signal(sig)
    try:
        out, err = proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired as exc:
        proc.kill()
        proc.communicate()
        raise AssertionError(
            f"statemigrate {' '.join(map(str, args))} did not stop after signal {sig}"
        ) from exc
    return Run(list(map(str, args)), proc.returncode, out, err, time.monotonic() - started)


def one_line_error(run: Run) -> str:
    """The error line of a failed run; asserts there is no traceback and at most a hint."""
    lines = run.lines()
    assert "Traceback" not in run.stderr, run.stderr
    assert lines, f"exit {run.returncode} without a message"
    errors = [line for line in lines if line.startswith("statemigrate: error:")]
    assert len(errors) == 1, run.stderr
    others = [
        line
        for line in lines
        if not line.startswith(("statemigrate: error:", "hint:", "statemigrate: stop"))
    ]
    assert not others, run.stderr
    return errors[0]


def describe(run: Run) -> str:
    """A short account of a run for assertion messages."""
    return f"exit {run.returncode} after {run.seconds:.2f}s\nstdout: {run.stdout[-500:]}\nstderr: {run.stderr[-1500:]}"
