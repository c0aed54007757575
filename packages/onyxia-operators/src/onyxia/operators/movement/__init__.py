"""(placeholder, being written)"""

from onyxia.core import Operator

__all__ = ["MOVEMENT"]

MOVEMENT: dict[str, Operator] = {}
