"""Split: each output is a Slice of the input along `axis`, planned with the index-map shader."""

from __future__ import annotations

import numpy as np

from onyxia.core import FoldCtx, InferenceCtx, NodeCtx, PlanCtx, SymbolicDim, TensorType, shape_of, static_dims
from onyxia.operators.layout import contiguous_strides
from onyxia.operators.rearrange.family import IndexMap, emit_index_map

__all__ = ["SplitOp"]


class SplitOp:
    """Sizes come from the `split` input (opset 13+), the `split` attribute (before), or an even
    split into the number of outputs (`num_outputs` from opset 18: the last part may be smaller)."""

    name = "Split"

    def _sizes(self, ctx: NodeCtx) -> tuple[int, list[SymbolicDim]]:
        dims = ctx.input_dims(0)
        axis = ctx.normalize_axis(ctx.attr_int("axis", 0), len(dims))
        if ctx.has_input(1):
            sizes: list[SymbolicDim] = [int(v) for v in ctx.require_value(1, "split").reshape(-1)]
        elif "split" in ctx.node.attributes:
            sizes = list(ctx.attr_ints("split"))
        else:
            parts = ctx.attr_int("num_outputs", ctx.num_outputs)
            total = dims[axis]
            if isinstance(total, int):
                chunk = -(-total // parts)
                sizes = [min(chunk, max(total - i * chunk, 0)) for i in range(parts)]
            else:
                sizes = [total // parts] * parts
        if len(sizes) != ctx.num_outputs:
            raise ctx.error(f"split gives {len(sizes)} parts for {ctx.num_outputs} outputs")
        static = static_dims(sizes)
        if static is not None and isinstance(dims[axis], int) and sum(static) != dims[axis]:
            raise ctx.error(f"split sizes {sizes} do not add up to dim {dims[axis]} of axis {axis}")
        return axis, sizes

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        axis, sizes = self._sizes(ctx)
        dims = list(ctx.input_dims(0))
        return [TensorType(ctx.input_dtype(0), shape_of([*dims[:axis], s, *dims[axis + 1 :]])) for s in sizes]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        data = ctx.input_value(0)
        if data is None:
            return None
        axis, sizes = self._sizes(ctx)
        static = static_dims(sizes)
        return None if static is None else list(np.split(data, np.cumsum(static)[:-1], axis=axis))

    def plan(self, ctx: PlanCtx) -> None:
        axis, sizes = self._sizes(ctx)
        dims = list(ctx.input_dims(0))
        offset: SymbolicDim = 0
        for i, size in enumerate(sizes):
            out = [*dims[:axis], size, *dims[axis + 1 :]]
            starts: list[SymbolicDim] = [0] * len(dims)
            starts[axis] = offset
            emit_index_map(ctx, IndexMap(out, dims, contiguous_strides(dims), starts), ctx.output(i))
            offset = offset + size
