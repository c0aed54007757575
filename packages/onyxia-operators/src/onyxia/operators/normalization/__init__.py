"""(placeholder, being written)"""

from onyxia.core import Operator

__all__ = ["NORMALIZATION", "NORMALIZATION_MS"]

NORMALIZATION: dict[str, Operator] = {}  # default domain
NORMALIZATION_MS: dict[str, Operator] = {}  # com.microsoft
