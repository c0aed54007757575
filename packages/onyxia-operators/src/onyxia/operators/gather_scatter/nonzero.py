"""`NonZeroOp`: ONNX NonZero, the first operator whose output shape depends on tensor data.

Its output is ``[rank, count]`` where ``count`` is only known once the input's values are: a
constant input folds on the host (count known); otherwise the count is a fresh dim symbol
(``NonZero(<input>):count``) bound at run time. The symbol is named after the input, not the output:
two NonZeros of one tensor (SSD repeats the score mask's per box and per score) count the same, and
common-subexpression elimination merges them after inference has put the count into downstream
shapes, so both names must be the one the surviving node's read-back binds. The plan counts on the GPU, then a `ReadValues` step has
the runtime read those 4 bytes back and bind the symbol (one extra submit, no recompilation:
every consumer sized by the count is patched like a sequence length), then a second dispatch
writes the coordinates into a buffer sized for that count.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    PlanCtx,
    SymbolicDim,
    SymbolicExpr,
    TensorType,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.core.plan import ReadValues
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import type_defs
from onyxia.operators.typesets import ALL_GPU, require_dtype

__all__ = ["NONZERO", "NonZeroOp", "count_symbol"]

_SOURCE = load_wgsl(__package__, "nonzero.wgsl")


def count_symbol(ctx: InferenceCtx | PlanCtx) -> SymbolicExpr:
    """The dim that counts the non-zeros: named after the input tensor (unique in the graph; equal
    NonZeros share it, so merging them keeps every shape bound) and the same at every inference
    round, so the fixed point settles."""
    return SymbolicExpr.name(f"NonZero({ctx.input_tensor(0).name}):count")


@dataclass(frozen=True)
class NonZeroOp:
    name: str = "NonZero"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        rank = ctx.input_rank(0)
        if rank == 0:
            raise ctx.error("NonZero of a scalar is not supported (numpy deprecates it); expected rank >= 1")
        value = ctx.input_value(0)
        count: SymbolicDim = count_symbol(ctx)
        if value is not None and value.dtype != object:
            count = int(np.count_nonzero(value))
        return [TensorType(DataType.INT64, shape_of([rank, count]))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        value = ctx.input_value(0)
        if value is None or value.dtype == object:
            return None
        return [np.array(np.nonzero(value), dtype=np.int64).reshape(value.ndim, -1)]

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(0)
        require_dtype(ctx, dtype, ALL_GPU)
        dims = list(ctx.input_dims(0))
        count = ctx.output_dims(0)[1]
        n = dims_product(dims)
        if n == 0:
            return  # nothing is non-zero: the output is empty and never read
        base = {**type_defs(X_T=dtype), "RANK": len(dims)}
        sizes: dict[str, SymbolicDim | list[SymbolicDim]] = {"N": n, "DIMS": dims}
        counted = ctx.alloc_scratch(4, "count")
        shader = ctx.compile_shader("gather_scatter/nonzero", _SOURCE, {**base, "COUNT_ONLY": True}, sizes)
        ctx.dispatch(shader, [ctx.input(0)], [counted], 1)
        if isinstance(count, SymbolicExpr):
            ctx.op.steps.append(ReadValues(counted, (str(count),)))
        shader = ctx.compile_shader("gather_scatter/nonzero", _SOURCE, base, {**sizes, "COUNT": count})
        ctx.dispatch(shader, [ctx.input(0)], [ctx.output(0)], ceil_div(count, 1 << 30))  # one workgroup, or none


NONZERO: dict[str, NonZeroOp] = {"NonZero": NonZeroOp()}
