"""(placeholder, being written)"""

from onyxia.core import Operator

__all__ = ["MICROSOFT"]

MICROSOFT: dict[str, Operator] = {}
