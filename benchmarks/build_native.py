"""Build the native extension with the benchmarks' ceilings and install it in place.

Usage:  python benchmarks/build_native.py

The redb ceilings that `benchmarks/run.py` measures (`_native.redb_bulk_load`,
`_native.redb_full_scan`: redb's own fastest load and scan) are behind the cargo
feature `bench`, off in the wheel and in the default build. This builds `rust/` with
it (`cargo build --release --features bench`) and replaces the file that
`statemigrate._native` is loaded from by a rename, so that nothing ever loads a
half-written file. `make install` (or a build without the feature) brings back the
default extension.
"""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MANIFEST = ROOT / "rust" / "Cargo.toml"


def built_library() -> Path:
    """The cdylib cargo leaves in its release directory, named as the platform names it."""
    target = Path(os.environ.get("CARGO_TARGET_DIR") or ROOT / "rust" / "target")
    if sys.platform == "win32":
        name = "_native.dll"
    elif sys.platform == "darwin":
        name = "lib_native.dylib"
    else:
        name = "lib_native.so"
    return target / "release" / name


def main() -> int:
    spec = importlib.util.find_spec("statemigrate._native")
    if spec is None or spec.origin is None:
        print("statemigrate._native is not installed: run `make install` first", file=sys.stderr)
        return 1
    installed = Path(spec.origin)
    cmd = ["cargo", "build", "--release", "--features", "bench", "--manifest-path", str(MANIFEST)]
    subprocess.run(cmd, check=True)
    fd, tmp = tempfile.mkstemp(dir=installed.parent, prefix=".native-bench-")
    with os.fdopen(fd, "wb") as out:
        out.write(built_library().read_bytes())
    os.chmod(tmp, 0o755)
    os.replace(tmp, installed)
    print(f"installed {installed} (with the feature bench)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
