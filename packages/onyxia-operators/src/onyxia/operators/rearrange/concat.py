"""`ConcatOp`: ONNX Concat, on the GPU one dispatch per non-empty input.

Row-major, input k occupies a slab of ``dim_k * inner`` elements at offset ``sum(dim_j * inner, j<k)``
within every ``outer`` block of the output, so each dispatch is a strided copy with three
numbers (`IN_SLAB`, `OUT_SLAB`, `OFFSET`) that are literals when static and immediates when
symbolic. The axis dim of the output is the (possibly symbolic) sum of the inputs' axis dims.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    SymbolicDim,
    SymbolicExpr,
    TensorType,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.typesets import ALL_GPU, require_dtype

__all__ = ["CONCAT", "ConcatOp"]

_SOURCE = load_wgsl(__package__, "concat.wgsl")


@dataclass(frozen=True)
class ConcatOp:
    name: str = "Concat"
    appends_in_place = True  # when output 0 aliases input 0 (a KV cache), input 0 is not rewritten

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dtype, first = ctx.input_dtype(0), ctx.input_dims(0)
        axis = _axis(ctx)
        out = list(first)
        for i in range(1, ctx.num_inputs):
            dims = ctx.input_dims(i)
            if ctx.input_dtype(i) != dtype:
                raise ctx.error(f"input {i} has dtype {ctx.input_dtype(i).name.lower()}, expected {dtype.name.lower()}")
            if len(dims) != len(first):
                raise ctx.error(f"input {i} has rank {len(dims)}, expected {len(first)} like input 0")
            for a, dim in enumerate(dims):
                out[a] = SymbolicExpr.binary("+", out[a], dim) if a == axis else _same_dim(ctx, out[a], dim, i, a)
        return [TensorType(dtype, shape_of(out))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = ctx.known_values()
        if values is None:
            return None
        # object arrays (symbolic values) concatenate like any other; ints among them stay ints
        return [np.concatenate(values, axis=_axis(ctx))]

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(0)
        require_dtype(ctx, dtype, ALL_GPU)
        out_dims, axis = ctx.output_dims(0), _axis(ctx)
        inner = dims_product(out_dims[axis + 1 :])
        out_slab = SymbolicExpr.binary("*", out_dims[axis], inner)
        defs = {**type_defs(T=dtype), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        offset: SymbolicDim = 0
        for i in range(ctx.num_inputs):
            dims = ctx.input_dims(i)
            slab, n = SymbolicExpr.binary("*", dims[axis], inner), dims_product(dims)
            in_place = i == 0 and ctx.shares_storage(0, 0)  # a KV cache: the past is already there
            if n != 0 and not in_place:  # an empty input writes nothing (its zero slab would be a divisor)
                sizes = {"N": n, "IN_SLAB": slab, "OUT_SLAB": out_slab, "OFFSET": offset}
                shader = ctx.compile_shader("rearrange/concat", _SOURCE, defs, sizes)
                ctx.dispatch(shader, [ctx.input(i)], [ctx.output(0)], ceil_div(n, WORKGROUP_SIZE))
            offset = SymbolicExpr.binary("+", offset, slab)


def _axis(ctx: NodeCtx) -> int:
    rank = ctx.input_rank(0)
    if rank == 0:
        raise ctx.error("inputs must have rank >= 1 (Concat has no axis to join scalars along)")
    return ctx.normalize_axis(ctx.attr_int("axis"), rank)


def _same_dim(ctx: NodeCtx, a: SymbolicDim, b: SymbolicDim, i: int, axis: int) -> SymbolicDim:
    """Dims off the concat axis must agree; a symbolic one facing another is assumed equal to it."""
    if a == b:
        return a
    if isinstance(a, int) and isinstance(b, int):
        raise ctx.error(f"input {i} has dim {b} on axis {axis}, expected {a} (only the concat axis may differ)")
    ctx.constraints.append((a, b, f"node '{ctx.node.name}' (Concat) input {i} axis {axis}"))
    return a if isinstance(a, int) else b


CONCAT: dict[str, ConcatOp] = {"Concat": ConcatOp()}
