"""Conversion: the plumbing every engine plugs into, written once.

Records stream from one consistent snapshot of the source, in key order, in batches
bounded by count and bytes; each batch is digested (natively) and committed to
``DST.partial`` together with a checkpoint. The destination is then read back and its
digests compared with the source's, synced, and only then renamed into place.

The verb is :func:`statemigrate.api.convert`; it makes a :class:`~.job.Job` and calls
:func:`run`. The modules, by job: :mod:`.conversion` (:func:`run`, its steps in order),
:mod:`.job` (what one convert was asked to do), :mod:`.destination` (the
destination's engine and path, what may be replaced, the lock, placing),
:mod:`.sidefiles` (what a side file beside the destination holds), :mod:`.resume`
(what an interrupted run left and where this one starts), :mod:`.source`,
:mod:`.copy` (the batch loop, digests, key limits), :mod:`.native` (a same-engine
convert by the engine's own copy), :mod:`.readback` (the built store read back) and
:mod:`.report`. No module looks at an engine's name: engines declare
their facts (suffixes, side files, capabilities, limits).
"""

from __future__ import annotations

from ..model import TableKind
from ..stores.walk import digest_checked, digest_store
from .conversion import run
from .copy import check_keys
from .destination import (
    check_destination,
    owned_paths,
    partial_path,
    refuse_in_place,
)
from .job import Job
from .report import ConvertReport, TableReport

__all__ = [
    "ConvertReport",
    "Job",
    "TableKind",
    "TableReport",
    "check_destination",
    "check_keys",
    "digest_checked",
    "digest_store",
    "owned_paths",
    "partial_path",
    "refuse_in_place",
    "run",
]
