"""Matrix products: MatMul (numpy semantics, batched and broadcast) and com.onyxia MatMulTransB
(b stored transposed), with one tiled shader."""

from onyxia.operators.matmul.matmul import MATMUL, MATMUL_ONYXIA, MatMulOp

__all__ = ["MATMUL", "MATMUL_ONYXIA", "MatMulOp"]
