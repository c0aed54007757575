"""MatMulNBits' int8 activations (accuracy_level 4): when a product runs them, and how a quantized A is laid out.

onnxruntime's CPU kernel quantizes each row of A to int8 per block (MLAS CompInt8; the math is onyxia::quant)
and multiplies in integers. Onyxia quantizes A where it is cheapest: in the decode workgroup itself (one row),
in a quantize dispatch before the product, or in the kernel that produces A — a com.onyxia ``<norm>Int8A``
(`normalization.layer_norm`), which writes the quantized rows beside y, so the product that reads them
(``quantized_a`` = 1) needs no dispatch of its own. Every way stores the same values in one layout:

- ``qa``: int8 [rows, NB * block_size], the padded tail of each row past K zero (4 bytes to a u32 word);
- ``sa``: float [NB, MP], each block's scale, block-major so the product reads 4 rows' scales as one vec4;
  MP is the row count rounded up to 4 (the padding rows are never read).
"""

from __future__ import annotations

from onyxia.core import DataType, SymbolicDim, TensorType, ceil_div, shape_of
from onyxia.core.shapes import dims_product

__all__ = ["INT8_MAX_BLOCK_SIZE", "int8_activations", "quantized_a_types", "rows_padded"]

INT8_MAX_BLOCK_SIZE = 256  # MLAS has CompInt8 kernels for block sizes 16 .. 256


def int8_activations(accuracy_level: int, block_size: int, zero_points: str, weights_known: bool) -> bool:
    """Whether onnxruntime's CPU kernel runs a MatMulNBits with int8 activations (MLAS CompInt8).

    It asks for CompInt8 at accuracy_level 4 when MLAS has the kernel (block sizes 16 .. 256), but
    only a prepacked B runs it: B must be a constant initializer, and float zero points ("float") or g_idx
    skip prepacking; all of those dequantize B and compute in f32 instead. (With runtime uint8 zero
    points onnxruntime 1.31 ignores them at level 4, using 8; that is a bug, not reproduced.)
    """
    return accuracy_level == 4 and block_size <= INT8_MAX_BLOCK_SIZE and zero_points != "float" and weights_known


def rows_padded(m: SymbolicDim) -> SymbolicDim:
    """M rounded up to 4: the int8 path stores A's scales block-major, 4 rows to a vec4."""
    return ceil_div(m, 4) * 4


def quantized_a_types(row_dims: tuple[SymbolicDim, ...], k: int, block_size: int) -> tuple[TensorType, TensorType]:
    """The tensor types of ``qa`` and ``sa`` for rows `row_dims` (A's leading dims) of K elements."""
    n_blocks = -(-k // block_size)
    qa = TensorType(DataType.INT8, shape_of([*row_dims, n_blocks * block_size]))
    sa = TensorType(DataType.FLOAT, shape_of([n_blocks, rows_padded(dims_product(row_dims))]))
    return qa, sa
