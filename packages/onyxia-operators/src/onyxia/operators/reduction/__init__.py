"""(placeholder, being written)"""

from onyxia.core import Operator

__all__ = ["REDUCTION"]

REDUCTION: dict[str, Operator] = {}
