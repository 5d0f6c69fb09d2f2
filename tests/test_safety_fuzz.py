"""The readers under a fuzzer: hypothesis over mutated bytes of every engine's store.

Each engine is fuzzed in its own subprocess (a driver crash must fail the test, not
kill the runner), for a bounded number of examples in CI (``STATEMIGRATE_LONG=1``: many
more). A reader must read a mutated store or refuse it with a StateMigrateError (exit 4
on the command line); never another exception, never a hang, never a crash.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from statemigrate.registry import engine_names
from statemigrate.testing.safety import LONG, build_store, store_file

EXAMPLES = 2_000 if LONG else 200
# HelixDB gives up on a damaged store only after its 8 s read timeout: fewer examples.
SLOW_EXAMPLES = {"helixdb": 200 if LONG else 8}

BUGS: dict[str, str] = {}  # none open: the helixdb hang and the libsql panic were fixed


@pytest.mark.parametrize(
    "engine",
    [
        pytest.param(
            n, id=n, marks=[pytest.mark.xfail(strict=True, reason=BUGS[n])] if n in BUGS else []
        )
        for n in engine_names()
    ],
)
def test_reader_under_fuzzer(engine: str, tmp_path: Path) -> None:
    path = store_file(engine, tmp_path, "fuzzed")
    build_store(engine, path, 300, seed=31)
    code = (
        "import sys; from pathlib import Path; from statemigrate.testing.safety import fuzz_readers; "
        "fuzz_readers(sys.argv[1], Path(sys.argv[2]), int(sys.argv[3]))"
    )
    try:
        proc = subprocess.run(
            [
                sys.executable,
                "-c",
                code,
                engine,
                str(path),
                str(SLOW_EXAMPLES.get(engine, EXAMPLES)),
            ],
            capture_output=True,
            text=True,
            timeout=(EXAMPLES if LONG else 45) + 10 * SLOW_EXAMPLES.get(engine, 0),
            check=False,
        )
    except subprocess.TimeoutExpired as exc:
        raise AssertionError(f"the {engine} reader hung under the fuzzer") from exc
    assert proc.returncode == 0, (
        f"exit {proc.returncode}\n{proc.stdout[-3000:]}\n{proc.stderr[-5000:]}"
    )
