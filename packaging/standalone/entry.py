"""The standalone executable's entry point: the ``statemigrate`` command line.

PyInstaller freezes this script with the interpreter, statemigrate and its engine
drivers (``statemigrate.spec`` beside it), so the executable runs where no Python is
installed.
"""

from __future__ import annotations

import sys


def _run_child_code() -> None:
    """Run ``EXECUTABLE -c CODE ARGS…`` as ``python -c`` would.

    statemigrate opens some stores in a child of ``sys.executable`` first (the fjall
    probe: a damaged store can abort the process that opens it). Frozen, that is this
    executable, so it answers ``-c`` as the interpreter would, instead of parsing it as
    an option of the command line.
    """
    code = sys.argv[2]
    sys.argv = ["-c", *sys.argv[3:]]
    # No privilege added: whoever can start this executable can already run any code.
    namespace = {"__name__": "__main__", "__builtins__": __builtins__}
    exec(compile(code, "<string>", "exec"), namespace)  # noqa: S102


def main() -> None:
    """The command line, or a child's ``-c CODE`` when the executable is frozen."""
    if getattr(sys, "frozen", False) and len(sys.argv) >= 3 and sys.argv[1] == "-c":
        _run_child_code()
        return
    from statemigrate.cli import main as cli_main

    cli_main(prog_name="statemigrate")


if __name__ == "__main__":
    main()
