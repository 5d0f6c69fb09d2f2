"""fjall 2.x (on-disk format 2): one partition per table (see :mod:`._fjall`).

fjall 2 names each partition's directory after it and accepts only 1-255 characters of
``[A-Za-z0-9_.#$-]`` (it panics on others). A table name made of those characters is its
partition name unchanged (an app opening ``events`` finds it). Any other name is escaped:
every UTF-8 byte outside the set, ``$`` and a name's dots when the name is ``.`` or ``..``
become ``$`` and two lowercase hex digits (``a b`` is stored as ``a$20b``, ``é`` as
``$c3$a9``). A partition name reads back escaped only when escaping the result gives it
back, so every name this engine writes reads back exactly; a safe name that would read
back as another one (``x$20``), and a name whose escaped form is over 255 bytes, are
refused before writing.

fjall 2 has no lock file: an app holding the store cannot be seen (see the README).
"""

from __future__ import annotations

import re
import string
from collections.abc import Iterable, Mapping
from typing import ClassVar

from ...locks import SideFile
from .._fjall import FjallEngine, fjall_app_code, fjall_description
from ..base import AppHolder

SAFE = frozenset(string.ascii_letters + string.digits + "_.#$-")
MAX_NAME = 255
_ESCAPE = re.compile(r"\$([0-9a-f]{2})")


def _plain(name: str) -> bool:
    return 0 < len(name) <= MAX_NAME and name not in (".", "..") and all(c in SAFE for c in name)


def escape(name: str) -> str:
    """The fjall 2 partition name of table ``name`` (see the module)."""
    if _plain(name):
        return name
    dots = name in (".", "..")
    out = []
    for b in name.encode("utf-8"):
        c = chr(b)
        if b < 0x80 and c in SAFE and c != "$" and not (dots and c == "."):
            out.append(c)
        else:
            out.append(f"${b:02x}")
    return "".join(out)


def unescape(stored: str) -> str:
    """The table name of fjall 2 partition ``stored`` (the inverse of :func:`escape`)."""
    if "$" not in stored and stored not in (".", ".."):
        return stored
    try:
        raw = _ESCAPE.sub(lambda m: chr(int(m.group(1), 16)), stored).encode("latin-1")
        name = raw.decode("utf-8")
    except (UnicodeEncodeError, UnicodeDecodeError):
        return stored
    return name if escape(name) == stored else stored


class Fjall2Engine(FjallEngine):
    """fjall 2.x stores through the bundled native binding."""

    name: ClassVar[str] = "fjall2"
    description: ClassVar[str] = fjall_description(2, "partition")
    major: ClassVar[int] = 2
    suffixes: ClassVar[tuple[str, ...]] = (".fjall2",)
    # Journals are opened read-write and truncated where recovery ends.
    side_files: ClassVar[tuple[SideFile, ...]] = (SideFile("journals/*", "a fjall journal"),)
    app_holder = AppHolder(
        fjall_app_code(2),
        unseen="fjall 2 has no lock file: an app holding the store cannot be seen",
    )
    known_limits: ClassVar[Mapping[str, str]] = {
        "odd_table_names": "fjall 2 partition names are at most 255 characters of "
        "[A-Za-z0-9_.#$-]: a 255-byte non-ASCII name has no reversible escaped form that fits",
        "full_disk_one_line": "fjall 2's background flusher prints its own failure to stderr "
        "(eprintln! in fjall-2.11.2 background_worker.rs) beside the tool's one line; the "
        "store is safe and the upgrade finishes once there is room",
    }
    table_name_folding: ClassVar[str] = "(one fjall 2 partition name)"

    @classmethod
    def stored_name(cls, name: str) -> str:
        """The partition name of table ``name``: itself when fjall 2 accepts it, else escaped."""
        return escape(name)

    @classmethod
    def table_name(cls, stored: str) -> str:
        """The table name of partition ``stored``."""
        return unescape(stored)

    @classmethod
    def fold_table_name(cls, name: str) -> str:
        """Names with one partition name are one table here."""
        return escape(name)

    @classmethod
    def table_name_problems(cls, names: Iterable[str]) -> dict[str, str]:
        """The model's and the base's rules, then the escaping's (see the module)."""
        names = list(names)
        found = super().table_name_problems(names)
        for name in names:
            if name in found:
                continue
            stored = escape(name)
            size = len(stored.encode("utf-8"))
            if size > MAX_NAME:
                found[name] = f"its escaped partition name is {size} bytes, over 255"
            elif unescape(stored) != name:
                found[name] = f"its partition name would read back as {unescape(stored)!r}"
        return {n: found[n] for n in names if n in found}
