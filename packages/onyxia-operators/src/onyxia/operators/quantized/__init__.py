"""Quantized operators: com.microsoft MatMulNBits and GatherBlockQuantized (4-bit, block-wise).

Both read 4-bit data packed in u32 words (`packing`), so an int4 model's weights take on the
GPU the bytes they take on disk.
"""

from onyxia.core import Operator
from onyxia.operators.quantized.gather_block_quantized import GatherBlockQuantizedOp
from onyxia.operators.quantized.matmul_nbits import MatMulNBitsOp

__all__ = ["QUANTIZED", "QUANTIZED_MS"]

QUANTIZED: dict[str, Operator] = {}  # default domain
QUANTIZED_MS: dict[str, Operator] = {  # com.microsoft
    "MatMulNBits": MatMulNBitsOp(),
    "GatherBlockQuantized": GatherBlockQuantizedOp(),
}
