"""`TopKOp`: ONNX TopK (k as an attribute before opset 10, as input 1 from 10; `largest` and `sorted`
from 11), in onnxruntime's order: the better value first and, among equal values, the lower index.

`k` sizes both outputs along the axis. A constant or a shape-derived value (a dim symbol) sizes them
at compile time. A `k` computed from tensor data (SSD's ``min(300, number of scores above a
threshold)``) is neither: the output dim is then a fresh symbol ``TopK(<X>, <K>):k`` and the plan reads
the k tensor back mid-run (`ReadValues`, as NonZero reads its count), so one plan serves every k.
The output is always sorted: ``sorted=0`` leaves the order to the implementation, and sorted is
one of the orders it allows. The kernel ranks each element against its line (O(axis) per element),
which suits the short lines detection heads sort (a few thousand scores), not a sort of millions.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    DataType,
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
from onyxia.core.plan import ReadValues
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.typesets import NUMERIC, require_dtype

__all__ = ["TOP_K", "TopKOp"]

_SOURCE = load_wgsl(__package__, "top_k.wgsl")
_ONE_WORKGROUP_OR_NONE = 1 << 30  # ceil_div(k, this) is 0 for k == 0, else 1


@dataclass(frozen=True)
class TopKOp:
    name: str = "TopK"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dims, axis = ctx.input_dims(0), _axis(ctx)
        k, size = _k(ctx), dims[axis]
        if isinstance(k, int) and (k < 0 or (isinstance(size, int) and k > size)):
            raise ctx.error(f"k = {k} is outside [0, {dims[axis]}] (the size of axis {axis})")
        out = shape_of([k if a == axis else d for a, d in enumerate(dims)])
        return [TensorType(ctx.input_dtype(0), out), TensorType(DataType.INT64, out)]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        x, k = ctx.input_value(0), _k(ctx)
        if x is None or x.dtype == object or not isinstance(k, int):
            return None
        axis = _axis(ctx)
        lines = np.moveaxis(x, axis, -1)
        n = lines.shape[-1]
        if ctx.attr_int("largest", 1):  # stable descending: ties keep the lower index first
            order = n - 1 - np.flip(np.argsort(np.flip(lines, -1), axis=-1, kind="stable"), -1)
        else:
            order = np.argsort(lines, axis=-1, kind="stable")
        order = order[..., :k]
        values = np.take_along_axis(lines, order, -1)
        return [np.moveaxis(values, -1, axis).copy(), np.moveaxis(order, -1, axis).astype(np.int64)]

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(0)
        require_dtype(ctx, dtype, NUMERIC)
        dims, axis = ctx.input_dims(0), _axis(ctx)
        k = ctx.output_dims(0)[axis]
        if ctx.has_input(1) and k == _read_back_symbol(
            ctx
        ):  # k comes from tensor data: read it back before sizing anything
            ctx.op.steps.append(ReadValues(ctx.input(1), (str(k),)))
        n = dims_product(dims)
        if n == 0 or k == 0:
            return  # both outputs are empty
        errors = ctx.error_slot(f"k against axis {axis} of size {dims[axis]}")
        defs = {
            **type_defs(T=dtype),
            "BETTER": ">" if ctx.attr_int("largest", 1) else "<",
            "WORKGROUP_SIZE": WORKGROUP_SIZE,
            "ERRORS_BINDING": 3,
        }
        sizes = {"N": n, "AXIS_DIM": dims[axis], "INNER": dims_product(dims[axis + 1 :]), "K": k}
        shader = ctx.compile_shader("reduction/top_k", _SOURCE, defs, sizes, errors.immediates)
        workgroups = ceil_div(n, WORKGROUP_SIZE)
        if isinstance(k, SymbolicExpr):  # no dispatch when the run's k is 0 (empty outputs bind nothing)
            workgroups = workgroups * ceil_div(k, _ONE_WORKGROUP_OR_NONE)
        ctx.dispatch(shader, [ctx.input(0)], [ctx.output(0), ctx.output(1), errors.ref], workgroups)


def _axis(ctx: NodeCtx) -> int:
    rank = ctx.input_rank(0)
    if rank == 0:
        raise ctx.error("input 0 (X) must have rank >= 1")
    return ctx.normalize_axis(ctx.attr_int("axis", -1), rank)


def _k(ctx: NodeCtx) -> SymbolicDim:
    """k: the attribute (opset 1), input 1's value (an int or a dim symbol), or, when input 1 is
    computed from data, the symbol its read-back binds."""
    if not ctx.has_input(1):
        if ctx.attr("k") is None:
            raise ctx.error("needs k: input 1 (K, opset 10+) or attribute 'k' (opset 1)")
        return ctx.attr_int("k")
    shape = ctx.input_shape(1)
    if len(ctx.input_dims(1)) != 1 or ctx.input_dims(1)[0] != 1:
        raise ctx.error(f"input 1 (K) must be a 1-D tensor of one element, found shape {shape}")
    if ctx.input_dtype(1) != DataType.INT64:
        raise ctx.error(f"input 1 (K) must be int64, found {ctx.input_dtype(1).name.lower()}")
    value = ctx.input_value(1)
    if value is None:
        return _read_back_symbol(ctx)
    k = value.reshape(-1)[0]
    return k if isinstance(k, SymbolicExpr) else int(k)


def _read_back_symbol(ctx: NodeCtx) -> SymbolicExpr:
    """The dim a read-back k binds, the same at every inference round (so the fixed point settles).
    Named after the inputs rather than an output: TopKs of the same X and K that common-subexpression
    elimination merges after inference must leave the one name the surviving read-back binds."""
    return SymbolicExpr.name(f"TopK({ctx.input_tensor(0).name}, {ctx.input_tensor(1).name}):k")


TOP_K: dict[str, TopKOp] = {"TopK": TopKOp()}
