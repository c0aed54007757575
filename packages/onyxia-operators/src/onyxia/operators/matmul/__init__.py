"""Matrix products: MatMul (numpy semantics, batched and broadcast), Einsum (lowered to MatMul and its
reshapes), com.onyxia MatMulTransB (b stored transposed), and the com.onyxia groups MatMulGroup / GatedMatMul (several weights of one activation per
dispatch), which also serve MatMul by a compile-time weight (`weights`: column panels)."""

from onyxia.operators.matmul.einsum import EINSUM
from onyxia.operators.matmul.gemm import GEMM
from onyxia.operators.matmul.matmul import MATMUL as _MATMUL
from onyxia.operators.matmul.matmul import MATMUL_ONYXIA as _TRANS_B
from onyxia.operators.matmul.matmul import MatMulOp
from onyxia.operators.matmul.matmul_group import MATMUL_GROUP, MAX_SLOTS, MatMulGroupOp

__all__ = ["MATMUL", "MATMUL_GROUP", "MATMUL_ONYXIA", "MAX_SLOTS", "MatMulGroupOp", "MatMulOp"]

MATMUL = {**_MATMUL, **GEMM, **EINSUM}  # default domain
MATMUL_ONYXIA = {**_TRANS_B, **MATMUL_GROUP}  # com.onyxia
