"""Moved to :mod:`statemigrate.schema.scripts`; this name stays for old imports."""

import sys
from typing import TYPE_CHECKING, Any

from ..schema import scripts as _moved

if TYPE_CHECKING:  # what type checkers see under the old name: the module's names
    from ..schema.scripts import *

    def __getattr__(name: str) -> Any: ...


# The same module object under both names (monkeypatching either patches both).
sys.modules[__name__] = _moved
