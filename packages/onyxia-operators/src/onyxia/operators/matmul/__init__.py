"""(placeholder, being written)"""

from onyxia.core import Operator

__all__ = ["MATMUL"]

MATMUL: dict[str, Operator] = {}
