"""PEP 517 hooks: maturin's, with a Linux wheel's platform tag chosen by an audit.

maturin's PEP 517 hooks pass ``--compatibility off`` unless told otherwise, so
``pip wheel .`` or ``pip install .`` from source tagged a Linux wheel plain
``linux_<arch>``, which no index or installer of another machine accepts. Here the
default is ``--compatibility pypi``: maturin audits the extension's symbols and tags
the wheel with the oldest manylinux (or musllinux) policy it satisfies, as
``make wheel`` and the release workflow do. ``MATURIN_PEP517_ARGS`` or
``--config-settings build-args=...`` still take precedence; on macOS and Windows
the option changes nothing.
"""

from __future__ import annotations

import os

from maturin import *  # noqa: F403 (every hook maturin defines, unchanged)

os.environ.setdefault("MATURIN_PEP517_ARGS", "--compatibility pypi")
