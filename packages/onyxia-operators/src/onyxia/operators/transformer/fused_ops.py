"""com.microsoft FusedMatMul, GemmFastGelu and BiasSplitGelu: a MatMul or an activation with the
reshuffles onnxruntime's optimizer folded into it, spelled back as those ops.

- ``FusedMatMul(A, B; alpha, transA, transB, transBatchA, transBatchB)`` is ``alpha * A' @ B'``: X'
  is X permuted by ``[1, .., r-2, 0, r-1]`` when transBatchX (the first axis moves behind the other
  batch axes), then with its last two axes swapped when transX (checked against onnxruntime for
  every flag combination). FoldTransposeIntoMatMul folds the Transposes where it can.
- ``GemmFastGelu(X, W, bias?)`` is ``FastGelu(X @ W, bias)`` (the tanh Gelu of the biased product).
- ``BiasSplitGelu(X, bias)`` is ``left * Gelu(right)`` with ``left, right`` the halves of
  ``X + bias`` along the last axis (the diffusion UNet's GEGLU), erf Gelu.
"""

from __future__ import annotations

import numpy as np

from onyxia.core import DataType, InferenceCtx, SymbolicDim, TensorType
from onyxia.core.context import NodeCtx
from onyxia.core.shapes import shape_of
from onyxia.operators.lowering import Body, LoweredOp

__all__ = ["FUSED_OPS"]

MS = "com.microsoft"


def _float_inputs(ctx: NodeCtx, count: int) -> DataType:
    """onnxruntime's CPU kernels of these ops are float32 only."""
    dtypes = {ctx.input_dtype(i) for i in range(count) if ctx.has_input(i)}
    if dtypes != {DataType.FLOAT}:
        raise ctx.error(f"inputs must be f32 (onnxruntime's CPU kernels); found {ctx.describe_inputs()}")
    return DataType.FLOAT


# ----- FusedMatMul ------------------------------------------------------------------------------
def _perm(ctx: NodeCtx, i: int, side: str) -> list[int] | None:
    """The Transpose that makes input `i` a plain MatMul operand (None when it already is)."""
    trans, batch = ctx.attr_int(f"trans{side}", 0), ctx.attr_int(f"transBatch{side}", 0)
    rank = len(ctx.input_dims(i))
    if (trans or batch) and rank < 2:
        raise ctx.error(f"trans{side}/transBatch{side} need {side} of rank 2 or more; found {list(ctx.input_dims(i))}")
    perm = list(range(1, rank - 1)) + [0, rank - 1] if batch else list(range(rank))
    if trans:
        perm[-2], perm[-1] = perm[-1], perm[-2]
    return None if perm == list(range(rank)) else perm


def _matmul_dims(ctx: NodeCtx) -> list[SymbolicDim]:
    """The output dims by MatMul's rule over the permuted operands (checking K and the batch axes)."""
    a, b = (list(ctx.input_dims(i)) for i in (0, 1))
    pa, pb = _perm(ctx, 0, "A"), _perm(ctx, 1, "B")
    a = a if pa is None else [a[p] for p in pa]
    b = b if pb is None else [b[p] for p in pb]
    vector_a, vector_b = len(a) == 1, len(b) == 1
    a, b = ([1, *a] if vector_a else a), ([*b, 1] if vector_b else b)
    if a[-1] != b[-2]:
        raise ctx.error(f"A' [.., M, K] and B' [.., K, N] disagree on K: {a} and {b} after the transposes")
    batch = list(ctx.broadcast(a[:-2], b[:-2]).dims)
    return [*batch, *([] if vector_a else [a[-2]]), *([] if vector_b else [b[-1]])]


def _fused_matmul_infer(ctx: InferenceCtx) -> list[TensorType]:
    dtype = _float_inputs(ctx, 2)
    return [TensorType(dtype, shape_of(_matmul_dims(ctx)))]


def _fused_matmul_lower(body: Body) -> list[int | None]:
    operands = []
    for i, side in ((0, "A"), (1, "B")):
        perm = _perm(body.ctx, i, side)
        x = body.required(i)
        operands.append(x if perm is None else body.op("Transpose", x, perm=perm))
    y = body.op("MatMul", *operands)
    alpha = body.ctx.attr_float("alpha", 1.0)
    if alpha != 1.0:
        y = body.op("Mul", y, body.const(np.float32(alpha), "alpha"))
    return [y]


# ----- GemmFastGelu -----------------------------------------------------------------------------
def _gemm_fast_gelu_infer(ctx: InferenceCtx) -> list[TensorType]:
    dtype = _float_inputs(ctx, 3)
    x, w = ctx.input_dims(0), ctx.input_dims(1)
    if len(x) < 2 or len(w) != 2 or x[-1] != w[0]:
        raise ctx.error(f"X must be [.., K] and W [K, N]; found {ctx.describe_inputs()}")
    if ctx.has_input(2) and list(ctx.input_dims(2)) != [w[1]]:
        raise ctx.error(f"bias must be [{w[1]}]; found {list(ctx.input_dims(2))}")
    return [TensorType(dtype, shape_of([*x[:-1], w[1]]))]


def _gemm_fast_gelu_lower(body: Body) -> list[int | None]:
    product = body.op("MatMul", body.required(0), body.required(1))
    return [body.op("FastGelu", product, body.input(2), domain=MS)]


# ----- BiasSplitGelu ----------------------------------------------------------------------------
def _split_size(ctx: NodeCtx) -> int:
    x, bias = ctx.input_dims(0), ctx.input_dims(1)
    if len(x) != 3 or not isinstance(x[2], int) or x[2] % 2 or list(bias) != [x[2]]:
        raise ctx.error(f"X must be [B, S, D] with an even static D and bias [D]; found {ctx.describe_inputs()}")
    return x[2] // 2


def _bias_split_gelu_infer(ctx: InferenceCtx) -> list[TensorType]:
    dtype = _float_inputs(ctx, 2)
    half = _split_size(ctx)
    return [TensorType(dtype, shape_of([*ctx.input_dims(0)[:2], half]))]


def _bias_split_gelu_lower(body: Body) -> list[int | None]:
    half = _split_size(body.ctx)
    biased = body.op("Add", body.required(0), body.required(1))
    left, right = body.ops("Split", biased, body.ints([half, half], "halves"), axis=-1, outputs=2)
    return [body.op("Mul", left, body.op("Gelu", right, domain=MS))]


FUSED_OPS: dict[str, LoweredOp] = {
    "FusedMatMul": LoweredOp("FusedMatMul", _fused_matmul_infer, _fused_matmul_lower),
    "GemmFastGelu": LoweredOp("GemmFastGelu", _gemm_fast_gelu_infer, _gemm_fast_gelu_lower),
    "BiasSplitGelu": LoweredOp("BiasSplitGelu", _bias_split_gelu_infer, _bias_split_gelu_lower),
}
