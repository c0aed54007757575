"""`GatherOp`: ONNX Gather (axis attribute), the workhorse of shape chains and embedding lookups.

The output is ``data[outer, indices[j], inner]`` flattened as ``[outer, j, inner]``. Negative
indices wrap by adding the axis dim, on the host and on the GPU alike. Folding also runs on
symbolic values, so ``Gather(Shape(x), 1)`` yields the `SymbolicExpr` of x's dim 1.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, TensorType, ceil_div, load_wgsl, shape_of
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.typesets import ALL_GPU, require_dtype

__all__ = ["GATHER", "GatherOp"]

_SOURCE = load_wgsl(__package__, "gather.wgsl")
_INDEX_TYPES = frozenset({DataType.INT32, DataType.INT64})


@dataclass(frozen=True)
class GatherOp:
    name: str = "Gather"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        data, indices = ctx.input_dims(0), ctx.input_dims(1)
        if ctx.input_dtype(1) not in _INDEX_TYPES:
            raise ctx.error(f"indices (input 1) must be int32 or int64, found {ctx.input_dtype(1).name.lower()}")
        axis = _axis(ctx)
        return [TensorType(ctx.input_dtype(0), shape_of([*data[:axis], *indices, *data[axis + 1 :]]))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        data, indices = ctx.input_value(0), ctx.input_value(1)
        if data is None or indices is None or indices.dtype == object:
            return None
        axis = _axis(ctx)
        size = data.shape[axis]
        bad = indices[(indices < -size) | (indices >= size)]
        if bad.size:
            raise ctx.error(f"index {int(bad.flat[0])} is out of range for axis {axis} of size {size}")
        return [np.take(data, np.where(indices < 0, indices + size, indices), axis=axis)]

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(0)
        require_dtype(ctx, dtype, ALL_GPU, "data")
        data, axis = ctx.input_dims(0), _axis(ctx)
        n = dims_product(ctx.output_dims(0))
        if n == 0:  # nothing to gather; a zero INNER or NIDX would be a literal divisor
            return
        sizes = {"N": n, "INNER": dims_product(data[axis + 1 :]), "NIDX": dims_product(ctx.input_dims(1))}
        sizes["AXIS_DIM"] = data[axis]
        defs = {**type_defs(T=dtype, I_T=ctx.input_dtype(1)), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        shader = ctx.compile_shader("movement/gather", _SOURCE, defs, sizes)
        ctx.dispatch(shader, [ctx.input(0), ctx.input(1)], [ctx.output(0)], ceil_div(n, WORKGROUP_SIZE))


def _axis(ctx: NodeCtx) -> int:
    rank = ctx.input_rank(0)
    if rank == 0:
        raise ctx.error("data (input 0) must have rank >= 1")
    return ctx.normalize_axis(ctx.attr_int("axis", 0), rank)


GATHER: dict[str, GatherOp] = {"Gather": GatherOp()}
