"""`ArgReduceOp`: ArgMax and ArgMin (axis, keepdims, select_last_index), one row each.

A row is the comparison that makes a candidate better (``>`` or ``<``) and numpy's function.
Ties go to the first index unless ``select_last_index=1``, where the comparison gains ``=`` on
the GPU and numpy runs on the flipped axis. The output is int64 (i32 on the GPU).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, TensorType, ceil_div, load_wgsl, shape_of
from onyxia.core.shapes import dims_product
from onyxia.operators.family import named_rows
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.typesets import NUMERIC, require_dtype

__all__ = ["ARG_REDUCE", "ArgReduceOp"]

_SOURCE = load_wgsl(__package__, "arg_reduce.wgsl")


@dataclass(frozen=True)
class ArgReduceOp:
    better: str  # WGSL comparison: candidate `v` replaces `best` when `v <better> best`
    fold: Callable[..., np.ndarray]  # np.argmax / np.argmin (first index on ties)
    name: str = "arg_reduce"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dims, axis = ctx.input_dims(0), _axis(ctx)
        if dims[axis] == 0:
            raise ctx.error(f"axis {axis} is empty: there is no extreme element to index")
        keep = ctx.attr_int("keepdims", 1)
        out = [1 if a == axis else d for a, d in enumerate(dims) if keep or a != axis]
        return [TensorType(DataType.INT64, shape_of(out))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        x = ctx.input_value(0)
        if x is None or x.dtype == object:
            return None
        axis = _axis(ctx)
        if ctx.attr_int("select_last_index", 0):
            result = x.shape[axis] - 1 - self.fold(np.flip(x, axis), axis=axis)
        else:
            result = self.fold(x, axis=axis)
        return [np.asarray(result, np.int64).reshape(ctx.require_static_output(0))]

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(0)
        require_dtype(ctx, dtype, NUMERIC)
        dims, axis = ctx.input_dims(0), _axis(ctx)
        n_out = dims_product(ctx.output_dims(0))
        if n_out == 0:
            return
        better = self.better + ("=" if ctx.attr_int("select_last_index", 0) else "")
        defs = {**type_defs(T=dtype), "BETTER": better, "WORKGROUP_SIZE": WORKGROUP_SIZE}
        sizes = {"N_OUT": n_out, "AXIS_DIM": dims[axis], "INNER": dims_product(dims[axis + 1 :])}
        shader = ctx.compile_shader("reduction/arg_reduce", _SOURCE, defs, sizes)
        ctx.dispatch(shader, [ctx.input(0)], [ctx.output(0)], ceil_div(n_out, WORKGROUP_SIZE))


def _axis(ctx: NodeCtx) -> int:
    rank = ctx.input_rank(0)
    if rank == 0:
        raise ctx.error("data (input 0) must have rank >= 1")
    return ctx.normalize_axis(ctx.attr_int("axis", 0), rank)


ARG_REDUCE: dict[str, ArgReduceOp] = named_rows(
    {
        "ArgMax": ArgReduceOp(">", np.argmax),
        "ArgMin": ArgReduceOp("<", np.argmin),
    }
)
