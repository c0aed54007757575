"""`GatherOp`: ONNX Gather (axis attribute), the workhorse of shape chains and embedding lookups.

The output is ``data[outer, indices[j], inner]`` flattened as ``[outer, j, inner]``. Negative
indices wrap by adding the axis dim, on the host and on the GPU alike; an index outside
``[-dim, dim)`` is an error on both (onnxruntime's too): the kernel reports it in the node's error
slot, and `run()` raises naming the node and the index. Folding also runs on
symbolic values, so ``Gather(Shape(x), 1)`` yields the `SymbolicExpr` of x's dim 1.

An embedding table over the storage-binding limit (Gemma 3's 671 MB f32 one) is gathered in row
ranges (`PlanCtx.chunks`), one dispatch each: every dispatch binds its rows and writes only the
outputs whose index falls in them, so each output is written exactly once.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    BufferRange,
    BufferRef,
    Chunk,
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    SymbolicDim,
    TensorType,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.typesets import ALL_GPU, require_dtype

__all__ = ["GATHER", "GatherOp"]

_SOURCE = load_wgsl(__package__, "gather_axis.wgsl")
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
        inner = dims_product(data[axis + 1 :])
        sizes = {"N": n, "INNER": inner, "NIDX": dims_product(ctx.input_dims(1)), "AXIS_DIM": data[axis]}
        defs = {**type_defs(T=dtype, I_T=ctx.input_dtype(1)), "WORKGROUP_SIZE": WORKGROUP_SIZE, "ERRORS_BINDING": 3}
        errors = ctx.error_slot(f"axis {axis} of size {data[axis]}")
        chunks, mode = _chunks(ctx, axis, inner)
        for chunk in chunks:
            chunk_defs = defs if chunk.size is None else {**defs, mode: True}
            chunk_sizes = sizes if chunk.size is None else {**sizes, "FIRST_ROW": chunk.first_row, "ROWS": chunk.rows}
            shader = ctx.compile_shader(
                "gather_scatter/gather_axis", _SOURCE, chunk_defs, chunk_sizes, errors.immediates
            )
            reads: list[BufferRef | BufferRange] = [ctx.input_chunk(0, chunk), ctx.input(1)]
            ctx.dispatch(shader, reads, [ctx.output(0), errors.ref], ceil_div(n, WORKGROUP_SIZE))


def _chunks(ctx: PlanCtx, axis: int, inner: SymbolicDim) -> tuple[list[Chunk], str]:
    """Row ranges of the data, and the shader flag that reads them: along `axis` when nothing precedes
    it (an embedding table gathered on axis 0: CHUNKED), or along the one outer dim of a table
    gathered on axis 1 (a tied weight read by columns: OUTER_CHUNKED), so a range of rows is a range
    of bytes either way."""
    dims, itemsize = ctx.input_dims(0), ctx.input_dtype(0).gpu_numpy.itemsize
    whole = [Chunk(0, None, 0, dims[axis])]
    if not isinstance(inner, int) or inner == 0:
        return whole, "CHUNKED"
    if all(d == 1 for d in dims[:axis]):
        return ctx.chunks(0, inner * itemsize), "CHUNKED"
    if axis == 1 and isinstance(dims[1], int):
        return ctx.chunks(0, dims[1] * inner * itemsize), "OUTER_CHUNKED"
    return whole, "CHUNKED"


def _axis(ctx: NodeCtx) -> int:
    rank = ctx.input_rank(0)
    if rank == 0:
        raise ctx.error("data (input 0) must have rank >= 1")
    return ctx.normalize_axis(ctx.attr_int("axis", 0), rank)


GATHER: dict[str, GatherOp] = {"Gather": GatherOp()}
