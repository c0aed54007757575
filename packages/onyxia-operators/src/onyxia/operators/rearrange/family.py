"""`IndexMapOp`: ops whose every output element copies one input element (or a pad value).

Transpose, Slice, Expand, Tile, Pad, DepthToSpace and SpaceToDepth differ only in the per-axis
map from output coordinate to input coordinate (``start + coord * step`` into an axis of some
extent and stride, then tiled or padded), so each row is a function that builds an `IndexMap`
and a numpy fold; the family infers, folds and plans them all with one shader.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

import numpy as np

from onyxia.core import (
    BufferRef,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    SymbolicDim,
    TensorType,
    as_output_value,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import WORKGROUP_SIZE, contiguous_strides, node_literal, type_defs
from onyxia.operators.typesets import ALL_GPU, require_dtype

__all__ = ["IndexMap", "IndexMapOp", "emit_index_map", "identity_map"]

_SOURCE = load_wgsl(__package__, "indexmap.wgsl")


@dataclass
class IndexMap:
    """Per output axis: its extent, and the input axis it reads (extent, stride, start, step)."""

    out_dims: list[SymbolicDim]
    in_dims: list[SymbolicDim]
    in_strides: list[SymbolicDim]
    starts: list[SymbolicDim] = field(default_factory=list)
    steps: list[SymbolicDim] = field(default_factory=list)
    mode: str = "copy"
    pad_value: float | int = 0
    pad_input: int | None = None  # MODE constant: the node input holding the pad value, read at run time
    output_dims: list[SymbolicDim] | None = None  # when the mapped view is not the output's shape

    def __post_init__(self) -> None:
        self.starts = self.starts or [0] * len(self.out_dims)
        self.steps = self.steps or [1] * len(self.out_dims)


def identity_map(dims: Sequence[SymbolicDim]) -> IndexMap:
    return IndexMap(list(dims), list(dims), contiguous_strides(dims))


@dataclass(frozen=True)
class IndexMapOp:
    build: Callable[[NodeCtx], IndexMap]
    fold: Callable[[NodeCtx, np.ndarray], np.ndarray | None]  # None: a value the fold needs comes at run time
    name: str = "indexmap"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        m = self.build(ctx)
        return [TensorType(ctx.input_dtype(0), shape_of(m.output_dims or m.out_dims))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        data = ctx.input_value(0)
        if data is None:
            return None
        folded = self.fold(ctx, data)
        return None if folded is None else [as_output_value(folded, ctx.output_numpy_dtype())]

    def plan(self, ctx: PlanCtx) -> None:
        emit_index_map(ctx, self.build(ctx), ctx.output(0))


def emit_index_map(ctx: PlanCtx, m: IndexMap, output: BufferRef) -> None:
    """One dispatch of the index-map shader reading input 0 into `output`."""
    dtype = ctx.input_dtype(0)
    require_dtype(ctx, dtype, ALL_GPU)
    n = dims_product(m.out_dims)
    rank_pad = [] if m.out_dims else [1]
    defs: dict[str, object] = {**type_defs(X_T=dtype), "WORKGROUP_SIZE": WORKGROUP_SIZE, "MODE": m.mode}
    defs["OUT_BINDING"] = 1 if m.pad_input is None else 2
    defs["RANK"] = max(len(m.out_dims), 1)
    reads = [ctx.input(0)]
    if m.mode == "constant" and m.pad_input is not None:
        defs["PAD_VALUE"] = "in_pad[0]"
        reads.append(ctx.input(m.pad_input))
    elif m.mode == "constant":
        defs["PAD_VALUE"] = node_literal(ctx, dtype, m.pad_value, "the constant pad value")
    dims = {
        "N": n,
        "OUT_DIMS": m.out_dims or rank_pad,
        "IN_DIMS": m.in_dims or rank_pad,
        "IN_STRIDES": m.in_strides or [0],
        "STARTS": m.starts or [0],
        "STEPS": m.steps or [1],
    }
    shader = ctx.compile_shader("rearrange/indexmap", _SOURCE, defs, dims)
    ctx.dispatch(shader, reads, [output], ceil_div(n, WORKGROUP_SIZE))
