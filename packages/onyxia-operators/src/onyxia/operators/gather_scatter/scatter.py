"""`IndexedScatterOp`: ScatterElements (and its opset 9-10 name Scatter) and ScatterND.

The plan copies the data into the output, then scatters the updates with indexed.wgsl. With
``reduction="none"`` one invocation writes each update, in no particular order: ONNX leaves
duplicate indices undefined there. With add/mul/max/min duplicates must all be combined, and WGSL
has no float atomics, so one invocation per *line* (the updates that can collide: same slice
position for ScatterND, same coordinates off the axis for ScatterElements) walks its updates in
order, which also combines duplicates in the same order as onnxruntime.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    TensorType,
    as_output_value,
    ceil_div,
)
from onyxia.core.shapes import dims_product
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
from onyxia.operators.typesets import ALL_GPU, NUMERIC, WRAPPING_NUMERIC, require_dtype

__all__ = ["SCATTER", "IndexedScatterOp"]

Locate = Callable[[NodeCtx, Sequence[int], np.ndarray], tuple[np.ndarray, ...]]


@dataclass(frozen=True)
class _Reduction:
    combine: str  # WGSL in `a` (current output) and `b` (update)
    fold: np.ufunc | None  # None: plain assignment
    symbolic: bool  # whether the fold also works on SymbolicExpr values (they have no ordering)
    dtypes: frozenset[DataType]  # add/mul have no checked uint64 form (`typesets.WRAPPING_NUMERIC`)


_REDUCTIONS = {
    "none": _Reduction("b", None, True, ALL_GPU),
    "add": _Reduction("a + b", np.add, True, WRAPPING_NUMERIC),
    "mul": _Reduction("a * b", np.multiply, True, WRAPPING_NUMERIC),
    "max": _Reduction("max(a, b)", np.maximum, False, NUMERIC),
    "min": _Reduction("min(a, b)", np.minimum, False, NUMERIC),
}


@dataclass(frozen=True)
class IndexedScatterOp:
    address: Callable[[NodeCtx], Addressing]
    locate: Locate
    name: str = "scatter"
    index_types: frozenset[DataType] = INDEX_TYPES

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        check_index_dtype(ctx, 1, self.index_types)
        _reduction(ctx)
        expected, updates = self.address(ctx).dims, list(ctx.input_dims(2))
        if len(updates) != len(expected) or any(
            isinstance(u, int) and isinstance(e, int) and u != e for u, e in zip(updates, expected)
        ):
            raise ctx.error(f"updates (input 2) have shape {updates}; expected {[str(d) for d in expected]}")
        if ctx.input_dtype(2) != ctx.input_dtype(0):
            raise ctx.error(f"updates dtype {ctx.input_dtype(2).name.lower()} differs from the data's")
        return [TensorType(ctx.input_dtype(0), ctx.input_shape(0))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        data, indices, updates = ctx.values()[:3]
        reduction = _reduction(ctx)
        if data is None or indices is None or updates is None or indices.dtype == object:
            return None
        symbolic = data.dtype == object or updates.dtype == object
        if symbolic and not reduction.symbolic:
            return None
        out = data.astype(object) if symbolic else data.copy()
        where = self.locate(ctx, data.shape, indices)
        if reduction.fold is None:
            out[where] = updates
        else:
            reduction.fold.at(out, where, updates)
        return [as_output_value(out, ctx.output_numpy_dtype())]

    def plan(self, ctx: PlanCtx) -> None:
        dtype, reduction = ctx.input_dtype(0), _reduction(ctx)
        require_dtype(ctx, dtype, reduction.dtypes, "data")
        nbytes = dims_product(ctx.output_dims(0)) * dtype.gpu_numpy.itemsize
        if dtype.gpu_numpy.itemsize % 4:  # buffer copies move whole 4-byte words; buffers are padded to 4
            nbytes = ceil_div(nbytes, 4) * 4
        if nbytes != 0:
            ctx.copy(ctx.input(0), ctx.output(0), nbytes)
        a = self.address(ctx)
        if a.size == 0:
            return
        mode = "scatter" if reduction.fold is None else "serial"
        emit_indexed(ctx, a, mode, [ctx.input(2), ctx.input(1)], ctx.output(0), reduction.combine)


def _reduction(ctx: NodeCtx) -> _Reduction:
    name = ctx.attr_str("reduction", "none")
    if name not in _REDUCTIONS:
        raise ctx.error(f"attribute reduction='{name}' is not one of {', '.join(_REDUCTIONS)}")
    return _REDUCTIONS[name]


SCATTER: dict[str | tuple[str, int, int | None], IndexedScatterOp] = {
    "ScatterElements": IndexedScatterOp(elements_addressing, elements_locate, "ScatterElements"),
    ("Scatter", 9, 10): IndexedScatterOp(elements_addressing, elements_locate, "Scatter"),  # ScatterElements' old name
    "ScatterND": IndexedScatterOp(nd_addressing, nd_locate, "ScatterND", INT64),  # the spec allows int64 indices only
}
