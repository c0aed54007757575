"""`IndexedGatherOp`: GatherElements and GatherND, one row each, one shader (indexed.wgsl).

Both read ``data[address(e)]`` for every output element e; a row only says how the indices
address the data (`Addressing`) and how numpy does the same (a fancy index). Folding accepts
symbolic data values (object arrays of `SymbolicExpr`), so ``GatherND(Shape(x), [[0]])`` or a
GatherElements over a shape tensor still gives the symbolic dims at compile time.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, TensorType, as_output_value, shape_of
from onyxia.operators.family import named_rows
from onyxia.operators.gather_scatter.addressing import (
    INDEX_TYPES,
    INT64,
    Addressing,
    check_index_dtype,
    elements_addressing,
    elements_locate,
    emit_indexed,
    nd_addressing,
    nd_locate,
)
from onyxia.operators.typesets import ALL_GPU, require_dtype

__all__ = ["GATHER_INDEXED", "IndexedGatherOp"]

Locate = Callable[[NodeCtx, Sequence[int], np.ndarray], tuple[np.ndarray, ...]]


@dataclass(frozen=True)
class IndexedGatherOp:
    address: Callable[[NodeCtx], Addressing]
    locate: Locate
    index_types: frozenset[DataType] = INDEX_TYPES
    name: str = "gather"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        check_index_dtype(ctx, 1, self.index_types)
        return [TensorType(ctx.input_dtype(0), shape_of(self.address(ctx).dims))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        data, indices = ctx.input_value(0), ctx.input_value(1)
        if data is None or indices is None or indices.dtype == object:
            return None
        return [as_output_value(data[self.locate(ctx, data.shape, indices)], ctx.output_numpy_dtype())]

    def plan(self, ctx: PlanCtx) -> None:
        require_dtype(ctx, ctx.input_dtype(0), ALL_GPU, "data")
        a = self.address(ctx)
        if a.size == 0:  # nothing to gather; a zero dim would also be a literal divisor in the shader
            return
        emit_indexed(ctx, a, "gather", [ctx.input(0), ctx.input(1)], ctx.output(0))


GATHER_INDEXED: dict[str, IndexedGatherOp] = named_rows(
    {
        "GatherElements": IndexedGatherOp(elements_addressing, elements_locate),
        "GatherND": IndexedGatherOp(nd_addressing, nd_locate, INT64),  # the spec allows int64 indices only
    }
)
