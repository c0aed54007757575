"""`MatMulOp`: numpy `matmul` semantics on the GPU.

1-D operands are promoted (a leading 1 for `a`, a trailing 1 for `b`) and the added dim is dropped
from the result; batch dims broadcast. When `b` has no batch (the usual activation @ weight), `a`'s
batch is folded into M so the whole product is one big GEMM rather than many small ones.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, PlanCtx, SymbolicDim, TensorType, ceil_div, load_wgsl
from onyxia.core.shapes import dims_product, shape_of
from onyxia.operators.family import named_rows
from onyxia.operators.layout import broadcast_strides, type_defs
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["MATMUL", "MatMulOp"]

_SOURCE = load_wgsl(__package__, "matmul.wgsl")

# Block shapes measured on lavapipe: tall 8-row blocks in 16x4 workgroups for many rows; for few
# rows (decode steps, M = 1) one 64-wide row of invocations, so no invocation computes only padding.
# A symbolic M gets the few-rows shape: it is usually the sequence length, 1 on every decode step.
_MANY_ROWS = {"ROWS": 8, "WG_X": 16, "WG_Y": 4}
_FEW_ROWS = {"ROWS": 4, "WG_X": 64, "WG_Y": 1}
_FEW_ROWS_LIMIT = 16
_INT_TYPES = frozenset({DataType.INT32, DataType.INT64, DataType.UINT32})


@dataclass(frozen=True)
class _Operands:
    """The product as the shader sees it: batch dims with per-operand strides, then M x K @ K x N."""

    batch: list[SymbolicDim]
    a_strides: list[SymbolicDim]
    b_strides: list[SymbolicDim]
    m: SymbolicDim
    k: SymbolicDim
    n: SymbolicDim


@dataclass(frozen=True)
class MatMulOp:
    dtypes: frozenset[DataType] = FLOATS | _INT_TYPES
    name: str = "matmul"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        a, b = ctx.input_dtype(0), ctx.input_dtype(1)
        if a != b:
            raise ctx.error(f"inputs must share a dtype, found {a.name.lower()} and {b.name.lower()}")
        return [TensorType(a, shape_of(_output_dims(ctx)))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        a, b = ctx.input_value(0), ctx.input_value(1)
        if a is None or b is None or a.dtype == object or b.dtype == object:
            return None
        if a.dtype == np.float16:  # accumulate in f32 like the shader (numpy's f16 matmul sums in f16)
            return [np.matmul(a.astype(np.float32), b.astype(np.float32)).astype(np.float16)]
        return [np.matmul(a, b)]

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(0)
        require_dtype(ctx, dtype, self.dtypes)
        ops = _operands(ctx)
        acc = "f32" if dtype in FLOATS else dtype.wgsl
        block = _MANY_ROWS if isinstance(ops.m, int) and ops.m > _FEW_ROWS_LIMIT else _FEW_ROWS
        defs = {**type_defs(A_T=dtype, B_T=dtype, Y_T=dtype), **block, "ACC_T": acc, "BATCH_RANK": len(ops.batch)}
        dims = {
            "M": ops.m,
            "N": ops.n,
            "K": ops.k,
            "BATCH_DIMS": ops.batch,
            "A_BATCH_STRIDES": ops.a_strides,
            "B_BATCH_STRIDES": ops.b_strides,
        }
        shader = ctx.compile_shader("matmul/matmul", _SOURCE, defs, dims)
        groups = (
            ceil_div(ops.n, 4 * block["WG_X"]),
            ceil_div(ops.m, block["ROWS"] * block["WG_Y"]),
            dims_product(ops.batch),
        )
        if 0 in groups:
            return  # an empty output (a zero K still writes zeros, so only M, N or batch count)
        ctx.dispatch(shader, [ctx.input(0), ctx.input(1)], [ctx.output(0)], groups)


def _promoted(ctx: InferenceCtx) -> tuple[list[SymbolicDim], list[SymbolicDim]]:
    a, b = list(ctx.input_dims(0)), list(ctx.input_dims(1))
    if not a or not b:
        raise ctx.error("MatMul operands must have rank >= 1 (a scalar operand is Mul, not MatMul)")
    return ([1, *a] if len(a) == 1 else a), ([*b, 1] if len(b) == 1 else b)


def _output_dims(ctx: InferenceCtx) -> list[SymbolicDim]:
    a, b = _promoted(ctx)
    ka, kb = a[-1], b[-2]
    if ka != kb:
        if isinstance(ka, int) and isinstance(kb, int):
            raise ctx.error(f"input 1 dim -2 ({kb}) must equal input 0 dim -1 ({ka})")
        ctx.constraints.append((ka, kb, f"node '{ctx.node.name}' (MatMul) inner dims"))
    batch = list(ctx.broadcast(a[:-2], b[:-2]).dims)
    rows = [a[-2]] if ctx.input_rank(0) > 1 else []
    cols = [b[-1]] if ctx.input_rank(1) > 1 else []
    return batch + rows + cols


def _operands(ctx: PlanCtx) -> _Operands:
    a, b = _promoted(ctx)
    m, k, n = a[-2], a[-1], b[-1]
    a_batch, b_batch = a[:-2], b[:-2]
    if all(d == 1 for d in b_batch):  # a weight-like `b`: a's batch rows are just more rows of M
        return _Operands([1], [0], [0], dims_product([*a_batch, m]), k, n)
    batch = list(ctx.broadcast(a_batch, b_batch).dims)
    a_strides = [s * m * k for s in broadcast_strides(a_batch, batch)]  # type: ignore[operator]
    b_strides = [s * k * n for s in broadcast_strides(b_batch, batch)]  # type: ignore[operator]
    return _Operands(batch, a_strides, b_strides, m, k, n)


MATMUL: dict[str, MatMulOp] = named_rows({"MatMul": MatMulOp()})
