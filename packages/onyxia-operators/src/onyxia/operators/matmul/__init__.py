"""Matrix products: MatMul (numpy semantics, batched and broadcast) with one tiled shader."""

from onyxia.operators.matmul.matmul import MATMUL, MatMulOp

__all__ = ["MATMUL", "MatMulOp"]
