"""Where each element of an index-driven gather or scatter lands in the data tensor.

GatherElements, GatherND, ScatterElements and ScatterND all walk one iteration space (the gather's
output, the scatter's updates) and address the data tensor at

    offset(e) = sum_axis coord_axis * base_stride_axis + sum_t wrap(indices[tuple(e) * K + t]) * indexed_stride_t

where ``tuple(e) = sum_axis coord_axis * tuple_stride_axis`` picks the row of K index components
an element uses. Each op is only a choice of those strides, so the shader, the shape checks and the
numpy folds share this module. Negative indices wrap by the addressed dim, as ONNX specifies; one
outside ``[-dim, dim)`` is an error (onnxruntime's too), reported through the node's error slot.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from onyxia.core import BufferRef, DataType, NodeCtx, PlanCtx, SymbolicDim, ceil_div, load_wgsl
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import WORKGROUP_SIZE, contiguous_strides, type_defs

__all__ = [
    "INDEX_TYPES",
    "INT64",
    "Addressing",
    "check_index_dtype",
    "elements_addressing",
    "elements_axis",
    "elements_locate",
    "emit_indexed",
    "nd_addressing",
    "nd_locate",
    "wrap_indices",
]

INDEX_TYPES = frozenset({DataType.INT32, DataType.INT64})
INT64 = frozenset({DataType.INT64})
_SOURCE = load_wgsl(__package__, "indexed.wgsl")


@dataclass(frozen=True)
class Addressing:
    """The strides of one gather or scatter; `lines`/`steps`/`inner` group colliding elements.

    Two scatter updates can only hit the same output element when they share a *line*: element
    ``e = (line / inner * steps + step) * inner + line % inner``. A serial scatter gives each line
    one invocation that walks its `steps` in order, so duplicates combine without atomics.
    """

    dims: list[SymbolicDim]
    base_strides: list[SymbolicDim]
    tuple_strides: list[SymbolicDim]
    indexed_dims: list[SymbolicDim]
    indexed_strides: list[SymbolicDim]
    lines: SymbolicDim
    steps: SymbolicDim
    inner: SymbolicDim

    @property
    def size(self) -> SymbolicDim:
        return dims_product(self.dims)


def check_index_dtype(ctx: NodeCtx, i: int, allowed: frozenset[DataType] = INDEX_TYPES) -> None:
    dtype = ctx.input_dtype(i)
    if dtype not in allowed:
        names = " or ".join(sorted(d.name.lower() for d in allowed))
        raise ctx.error(f"indices (input {i}) must be {names}, found {dtype.name.lower()}")


def elements_axis(ctx: NodeCtx) -> int:
    rank = ctx.input_rank(0)
    if rank == 0:
        raise ctx.error("data (input 0) must have rank >= 1")
    return ctx.normalize_axis(ctx.attr_int("axis", 0), rank)


def elements_addressing(ctx: NodeCtx) -> Addressing:
    """GatherElements / ScatterElements: each index element replaces its own coordinate on `axis`."""
    axis, data, idx = elements_axis(ctx), list(ctx.input_dims(0)), list(ctx.input_dims(1))
    if len(idx) != len(data):
        raise ctx.error(f"indices (input 1) have rank {len(idx)}; expected the data rank {len(data)}")
    strides = contiguous_strides(data)
    base = [0 if a == axis else s for a, s in enumerate(strides)]
    lines = dims_product(idx[:axis] + idx[axis + 1 :])
    inner = dims_product(idx[axis + 1 :])
    return Addressing(idx, base, contiguous_strides(idx), [data[axis]], [strides[axis]], lines, idx[axis], inner)


def _nd_tuple_length(ctx: NodeCtx, batch_dims: int) -> int:
    data, idx = ctx.input_dims(0), ctx.input_dims(1)
    if not 0 <= batch_dims < min(len(data), len(idx)):
        raise ctx.error(
            f"attribute batch_dims={batch_dims} is out of range: expected 0 <= batch_dims < "
            f"min(data rank {len(data)}, indices rank {len(idx)})"
        )
    k = idx[-1]
    if not isinstance(k, int):
        raise ctx.error(f"the last dim of indices (input 1) must be static, found '{k}'")
    if not 1 <= k <= len(data) - batch_dims:
        raise ctx.error(
            f"indices rows have {k} components; expected 1..{len(data) - batch_dims} (data rank - batch_dims)"
        )
    for a in range(batch_dims):
        if isinstance(data[a], int) and isinstance(idx[a], int) and data[a] != idx[a]:
            raise ctx.error(f"batch dim {a} differs: data has {data[a]}, indices have {idx[a]}")
    return k


def nd_addressing(ctx: NodeCtx) -> Addressing:
    """GatherND / ScatterND: each index row picks a slice ``data[batch, row, :]``; the iteration
    space (the gather's output, the scatter's updates) is ``indices[:-1] + data[batch_dims + K:]``."""
    b = ctx.attr_int("batch_dims", 0)
    k = _nd_tuple_length(ctx, b)
    data, rows = list(ctx.input_dims(0)), list(ctx.input_dims(1))[:-1]
    strides = contiguous_strides(data)
    slice_dims = data[b + k :]
    base = strides[:b] + [0] * (len(rows) - b) + strides[b + k :]
    tuples = contiguous_strides(rows) + [0] * len(slice_dims)
    indexed = data[b : b + k], strides[b : b + k]
    inner = dims_product(slice_dims)
    return Addressing(rows + slice_dims, base, tuples, *indexed, inner, dims_product(rows), inner)


def wrap_indices(ctx: NodeCtx, indices: np.ndarray, size: int, what: str) -> np.ndarray:
    """Indices as non-negative int64, or an error naming the first one outside ``[-size, size)``."""
    indices = np.asarray(indices, np.int64)
    bad = indices[(indices < -size) | (indices >= size)]
    if bad.size:
        raise ctx.error(f"index {int(bad.flat[0])} is out of range for {what} of size {size}")
    return np.where(indices < 0, indices + size, indices)


def elements_locate(ctx: NodeCtx, shape: Sequence[int], indices: np.ndarray) -> tuple[np.ndarray, ...]:
    """A numpy fancy index reading ``data[c with c[axis] = indices[c]]`` for every index coordinate c.

    numpy's take/put_along_axis broadcast over the data's dims, but ONNX lets indices be shorter
    than the data on every axis, so the other axes get aranges of the indices' own extent."""
    axis = elements_axis(ctx)
    grids: list[np.ndarray] = list(np.indices(indices.shape, sparse=True))
    grids[axis] = wrap_indices(ctx, indices, int(shape[axis]), f"axis {axis}")
    return tuple(grids)


def nd_locate(ctx: NodeCtx, shape: Sequence[int], indices: np.ndarray) -> tuple[np.ndarray, ...]:
    """A numpy fancy index over the first ``batch_dims + K`` data axes; the result (or the target of
    an assignment) has shape ``indices.shape[:-1] + shape[batch_dims + K:]``."""
    b = ctx.attr_int("batch_dims", 0)
    grids: list[np.ndarray] = list(np.indices(indices.shape[:-1], sparse=True)[:b])
    for t in range(indices.shape[-1]):
        grids.append(wrap_indices(ctx, indices[..., t], int(shape[b + t]), f"data axis {b + t}"))
    return tuple(grids)


def emit_indexed(
    ctx: PlanCtx, a: Addressing, mode: str, reads: Sequence[BufferRef], output: BufferRef, combine: str = "b"
) -> None:
    """One dispatch of indexed.wgsl: `reads` are (data or updates, indices); `mode` gather, scatter or serial."""
    defs = {**type_defs(T=ctx.output_tensor(0).dtype), "MODE": mode, "WORKGROUP_SIZE": WORKGROUP_SIZE}
    defs["ERRORS_BINDING"] = 3
    defs.update(RANK=max(len(a.dims), 1), K=len(a.indexed_dims), COMBINE=combine)
    dims: dict[str, SymbolicDim | list[SymbolicDim]] = {
        "DIMS": a.dims or [1],
        "BASE_STRIDES": a.base_strides or [0],
        "TUPLE_STRIDES": a.tuple_strides or [0],
        "INDEXED_DIMS": a.indexed_dims,
        "INDEXED_STRIDES": a.indexed_strides,
    }
    if mode == "serial":
        dims.update(LINES=a.lines, STEPS=a.steps, INNER=a.inner)
    else:
        dims["N"] = a.size
    errors = ctx.error_slot(f"data dims [{', '.join(map(str, ctx.input_dims(0)))}]")
    shader = ctx.compile_shader("gather_scatter/indexed", _SOURCE, defs, dims, errors.immediates)
    invocations = a.lines if mode == "serial" else a.size
    ctx.dispatch(shader, reads, [output, errors.ref], ceil_div(invocations, WORKGROUP_SIZE))
