"""`OneHotOp`: ONNX OneHot (indices, depth, values = [off, on]; axis attribute, default -1).

The depth sets the output shape: a constant, or a graph input whose value the runtime binds as a
dim (`MarkValueInputsPass`); the values may come at run time (they are read from their buffer).
Indices outside ``[-depth, depth)`` give an all-off line, as the spec says, on the host and on the
GPU alike.
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
from onyxia.operators.typesets import ALL_GPU, NUMERIC, require_dtype

__all__ = ["ONE_HOT", "OneHotOp"]

_SOURCE = load_wgsl(__package__, "one_hot.wgsl")


@dataclass(frozen=True)
class OneHotOp:
    name: str = "OneHot"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dims, axis, depth = ctx.input_dims(0), _axis(ctx), _depth(ctx)
        values = ctx.input_dims(2)
        if len(values) != 1 or (isinstance(values[0], int) and values[0] != 2):
            raise ctx.error(f"values (input 2) must have shape [2] (off, on), found {list(values)}")
        return [TensorType(ctx.input_dtype(2), shape_of([*dims[:axis], depth, *dims[axis:]]))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        indices, values = ctx.input_value(0), ctx.input_value(2)
        if indices is None or values is None or indices.dtype == object:
            return None
        axis, depth = _axis(ctx), _depth(ctx)
        if isinstance(depth, SymbolicExpr):
            return None
        k = np.trunc(indices).astype(np.int64) if indices.dtype.kind == "f" else indices.astype(np.int64)
        k = np.where(k < 0, k + depth, k)
        positions = np.arange(depth).reshape([depth] + [1] * (indices.ndim - axis))
        hot = np.expand_dims(k, axis) == positions
        return [np.where(hot, values[1], values[0]).astype(ctx.output_numpy_dtype())]

    def plan(self, ctx: PlanCtx) -> None:
        require_dtype(ctx, ctx.input_dtype(0), NUMERIC, "indices")
        require_dtype(ctx, ctx.input_dtype(2), ALL_GPU, "values")
        n = dims_product(ctx.output_dims(0))
        if n == 0:
            return
        dims, axis = ctx.input_dims(0), _axis(ctx)
        defs = {**type_defs(I_T=ctx.input_dtype(0), T=ctx.input_dtype(2)), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        sizes = {"N": n, "DEPTH": _depth(ctx), "INNER": dims_product(dims[axis:])}
        shader = ctx.compile_shader("gather_scatter/one_hot", _SOURCE, defs, sizes)
        ctx.dispatch(shader, [ctx.input(0), ctx.input(2)], [ctx.output(0)], ceil_div(n, WORKGROUP_SIZE))


def _axis(ctx: NodeCtx) -> int:
    rank = ctx.input_rank(0) + 1  # the axis counts in the output, which gains the depth axis
    return ctx.normalize_axis(ctx.attr_int("axis", -1), rank)


def _depth(ctx: NodeCtx) -> SymbolicDim:
    value = ctx.require_value(1, "depth")
    element = value.reshape(-1)[0] if value.size == 1 else None
    if isinstance(element, SymbolicExpr):  # a graph input, bound at run time (and checked >= 1 then)
        return element
    if element is None or value.dtype == object:
        raise ctx.error(f"depth (input 1) must hold one number, found {value.tolist()}")
    depth = int(element)
    if depth < 1:
        raise ctx.error(f"depth (input 1) is {depth}; expected a positive number")
    return depth


ONE_HOT: dict[str, OneHotOp] = {"OneHot": OneHotOp()}
