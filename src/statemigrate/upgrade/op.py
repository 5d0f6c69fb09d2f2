"""Moved to :mod:`statemigrate.schema.op`; this name stays for old imports."""

import sys
from typing import TYPE_CHECKING, Any

from ..schema import op as _moved

if TYPE_CHECKING:  # what type checkers see under the old name: the module's names
    from ..schema.op import *

    def __getattr__(name: str) -> Any: ...


# The same module object under both names (monkeypatching either patches both).
sys.modules[__name__] = _moved
