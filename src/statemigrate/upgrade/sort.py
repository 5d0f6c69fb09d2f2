"""Moved to :mod:`statemigrate.schema.sort`; this name stays for old imports."""

import sys
from typing import TYPE_CHECKING, Any

from ..schema import sort as _moved

if TYPE_CHECKING:  # what type checkers see under the old name: the module's names
    from ..schema.sort import *

    def __getattr__(name: str) -> Any: ...


# The same module object under both names (monkeypatching either patches both).
sys.modules[__name__] = _moved
