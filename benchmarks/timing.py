"""How every timed job starts: with the page cache's dirty pages written back.

A job that writes a store leaves its pages dirty in the page cache, and so does the
writing of a source. Without :func:`settle` the kernel writes them back while the next
jobs run: at 4M records (1.5 GB a store) the first SQLite → SQLite convert after a
fresh source took 9.4 s and 5.3 s of system CPU, against 7.0 s and 1.9 s with the
source written back first. A job's own writes and fsyncs still count in its time; only
an earlier job's are taken out of it.

What :func:`settle` cannot take out, on the virtual machines these figures come from:
the guest hands the pages it frees back to its host (virtio-balloon free page
reporting), so a job that fills the page cache with pages freed a few seconds before
pays the host's faults in system time. ``dd`` of 1.3 GB into the page cache took 3.6 s
of system CPU, and 0.25 s when run again at once; with ``O_DIRECT``, which bypasses the
cache, 0.1 s. A 4M-record LMDB → LMDB convert took 5.8 s (4.8 s system) and then
1.9-2.1 s. Touching the memory once beforehand does not last: the pages go back to the
host as soon as they are freed.
"""

from __future__ import annotations

import os


def settle() -> None:
    """Write back every dirty page (``sync``), where the system has it (not Windows)."""
    sync = getattr(os, "sync", None)
    if sync is not None:
        sync()
