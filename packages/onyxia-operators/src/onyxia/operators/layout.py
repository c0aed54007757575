"""Strides and dtype defs shared by every operator that indexes tensors in a shader.

Strides are dim expressions (ints or `SymbolicExpr`), so the same helper serves static and
symbolic shapes; planning turns them into literals or immediates. `wgsl_literal` is onyxia.core's
(the one place a value becomes shader text), re-exported here beside `type_defs`.
"""

from __future__ import annotations

from collections.abc import Sequence

from onyxia.core import DataType, NodeCtx, SymbolicDim, wgsl_literal  # wgsl_literal: re-exported for operators
from onyxia.core.shapes import dims_product

__all__ = [
    "WORKGROUP_SIZE",
    "broadcast_strides",
    "collapse_broadcast",
    "contiguous_strides",
    "node_literal",
    "type_defs",
    "wgsl_literal",
]

WORKGROUP_SIZE = 256


def contiguous_strides(dims: Sequence[SymbolicDim]) -> list[SymbolicDim]:
    """Row-major strides in elements."""
    return [dims_product(dims[i + 1 :]) for i in range(len(dims))]


def broadcast_strides(in_dims: Sequence[SymbolicDim], out_dims: Sequence[SymbolicDim]) -> list[SymbolicDim]:
    """Strides of an input read at output coordinates: 0 along axes it is broadcast over."""
    padded = [1] * (len(out_dims) - len(in_dims)) + list(in_dims)
    strides = contiguous_strides(padded)
    return [0 if d == 1 and o != 1 else s for d, o, s in zip(padded, out_dims, strides)]


def collapse_broadcast(
    in_dims: Sequence[Sequence[SymbolicDim]], out_dims: Sequence[SymbolicDim]
) -> tuple[list[SymbolicDim], list[list[SymbolicDim]]]:
    """The fewest output axes a broadcast can be indexed over, and each input's strides along them.

    A broadcasting kernel unravels each output index axis by axis, one division per axis; a division by a
    symbolic dim (an immediate) costs a CPU rasteriser a scalar divide per lane, where a literal one compiles to
    a multiply (a BatchNorm-like ``x * s[C, 1, 1]`` ran 1.6x slower with H and W open on lavapipe). So size-1
    output axes are dropped and neighbours that every input reads alike (all of it, or broadcast over both)
    merge: ``[1, C, H, W]`` against ``[C, 1, 1]`` is ``[C, H * W]``. An input axis that is neither the output's
    extent nor 1 (a symbolic dim broadcast at run time) leaves the axes as they are."""
    ones: list[SymbolicDim] = [1] * len(out_dims)
    padded = [ones[: len(out_dims) - len(d)] + list(d) for d in in_dims]
    kinds: list[tuple[bool, ...]] = []  # per kept output axis: which inputs read all of it
    kept: list[SymbolicDim] = []
    for axis, o in enumerate(out_dims):
        if o == 1:
            continue
        column = [d[axis] for d in padded]
        if any(d != o and d != 1 for d in column):
            return list(out_dims), [broadcast_strides(d, out_dims) for d in in_dims]
        kind = tuple(d == o for d in column)
        if kinds and kinds[-1] == kind:
            kept[-1] = kept[-1] * o
        else:
            kinds.append(kind)
            kept.append(o)
    if not kept:
        return [1], [[0] for _ in in_dims]
    views = [[o if kind[j] else 1 for o, kind in zip(kept, kinds)] for j in range(len(in_dims))]
    return kept, [broadcast_strides(v, kept) for v in views]


def type_defs(**dtypes: DataType) -> dict[str, object]:
    """``A_T="f32"``-style defs for the storage types, plus ``F16`` when any of them is f16."""
    defs: dict[str, object] = {name: dtype.wgsl for name, dtype in dtypes.items()}
    if any(dtype == DataType.FLOAT16 for dtype in dtypes.values()):
        defs["F16"] = True
    return defs


def node_literal(ctx: NodeCtx, dtype: DataType, value: object, what: str) -> str:
    """`wgsl_literal` for a value of this node (`what`: ``"attribute 'alpha'"``), so a value the
    shader type cannot hold is a compile-time error naming the node and where the value came from."""
    return wgsl_literal(dtype, value, f"node '{ctx.node.name}' ({ctx.node.op_type}): {what}")
