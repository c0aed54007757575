"""Quantized operators: com.microsoft MatMulNBits and GatherBlockQuantized (4-bit, block-wise), and the
com.onyxia MatMulNBitsGroup / GatedMatMulNBits (several MatMulNBits of one activation per dispatch).

Both read 4-bit data packed in u32 words (`packing`), so an int4 model's weights take on the
GPU the bytes they take on disk.
"""

from onyxia.core import Operator
from onyxia.operators.quantized.gather_block_quantized import GatherBlockQuantizedOp
from onyxia.operators.quantized.matmul_bnb4 import MatMulBnb4Op
from onyxia.operators.quantized.matmul_nbits import MatMulNBitsOp
from onyxia.operators.quantized.matmul_nbits_group import MATMUL_NBITS_GROUP

__all__ = ["QUANTIZED", "QUANTIZED_MS", "QUANTIZED_ONYXIA"]

QUANTIZED: dict[str, Operator] = {}  # default domain
QUANTIZED_MS: dict[str, Operator] = {  # com.microsoft
    "MatMulNBits": MatMulNBitsOp(),
    "GatherBlockQuantized": GatherBlockQuantizedOp(),
    "MatMulBnb4": MatMulBnb4Op(),  # bitsandbytes FP4/NF4 on MatMulNBits' kernel
}
QUANTIZED_ONYXIA: dict[str, Operator] = {**MATMUL_NBITS_GROUP}  # com.onyxia
