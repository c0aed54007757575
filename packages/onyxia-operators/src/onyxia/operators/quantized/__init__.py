"""(placeholder, being written)"""

from onyxia.core import Operator

__all__ = ["QUANTIZED", "QUANTIZED_MS"]

QUANTIZED: dict[str, Operator] = {}  # default domain
QUANTIZED_MS: dict[str, Operator] = {}  # com.microsoft
