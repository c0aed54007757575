"""The rows of the `IndexMapOp` family: one map builder and one numpy fold per op."""

from __future__ import annotations

from collections.abc import Callable
from typing import Literal, SupportsInt

import numpy as np

from onyxia.core import NodeCtx, SymbolicDim, SymbolicExpr, static_dims
from onyxia.operators.family import named_rows
from onyxia.operators.layout import broadcast_strides, contiguous_strides
from onyxia.operators.rearrange.family import IndexMap, IndexMapOp
from onyxia.operators.rearrange.slicing import normalize_slices, slice_inputs, static_slice
from onyxia.operators.rearrange.split import SplitOp

__all__ = ["INDEXMAP"]


# ----- Transpose ----------------------------------------------------------------------------------
def _perm(ctx: NodeCtx) -> list[int]:
    rank = ctx.input_rank(0)
    perm = ctx.attr_ints("perm", list(reversed(range(rank))))
    if sorted(perm) != list(range(rank)):
        raise ctx.error(f"perm {perm} is not a permutation of the {rank} axes")
    return perm


def _transpose(ctx: NodeCtx) -> IndexMap:
    dims, perm = ctx.input_dims(0), _perm(ctx)
    strides = contiguous_strides(dims)
    return IndexMap([dims[p] for p in perm], [dims[p] for p in perm], [strides[p] for p in perm])


# ----- Slice --------------------------------------------------------------------------------------
def _slice(ctx: NodeCtx) -> IndexMap:
    dims = list(ctx.input_dims(0))
    starts: list[SymbolicDim] = [0] * len(dims)
    steps: list[SymbolicDim] = [1] * len(dims)
    out = list(dims)
    for axis, start, step, extent in normalize_slices(ctx, dims):
        starts[axis], steps[axis], out[axis] = start, step, extent
    return IndexMap(out, dims, contiguous_strides(dims), starts, steps)


def _fold_slice(ctx: NodeCtx, data: np.ndarray) -> np.ndarray | None:
    for axis, start, end, step in zip(*slice_inputs(ctx, data.ndim)):
        if not (isinstance(start, int) and isinstance(end, int)):  # bounds bound at run time (a loop's
            return None  # iteration number): the constant is sliced on the GPU, at a size that may be static
        first, extent = static_slice(start, end, step, data.shape[axis])  # onnxruntime's clamps, not numpy's
        data = np.take(data, first + step * np.arange(extent), axis=axis)
    return data


# ----- Expand / Tile ------------------------------------------------------------------------------
def _expand_dims(ctx: NodeCtx) -> list[SymbolicDim]:
    shape = ctx.require_value(1, "shape")
    return list(ctx.broadcast(ctx.input_dims(0), [_dim(v) for v in shape.reshape(-1)]).dims)


def _expand(ctx: NodeCtx) -> IndexMap:
    out, dims = _expand_dims(ctx), list(ctx.input_dims(0))
    padded = [1] * (len(out) - len(dims)) + dims
    return IndexMap(out, padded, broadcast_strides(dims, out))


def _fold_expand(ctx: NodeCtx, data: np.ndarray) -> np.ndarray:
    dims = static_dims(_expand_dims(ctx))
    if dims is None:  # then the output is symbolic: never folded
        raise ctx.error(f"cannot fold an Expand to the symbolic shape {_expand_dims(ctx)}")
    return np.broadcast_to(data, dims).copy()


def _tile(ctx: NodeCtx) -> IndexMap:
    dims = list(ctx.input_dims(0))
    repeats = [_dim(r) for r in ctx.require_value(1, "repeats").reshape(-1)]  # symbolic: a run-time value
    if len(repeats) != len(dims):
        raise ctx.error(f"repeats has {len(repeats)} entries for rank {len(dims)}")
    out = [d * r for d, r in zip(dims, repeats)]
    return IndexMap(out, dims, contiguous_strides(dims), mode="tile")


def _fold_tile(ctx: NodeCtx, data: np.ndarray) -> np.ndarray | None:
    repeats = static_dims([_dim(r) for r in ctx.require_value(1, "repeats").reshape(-1)])
    return None if repeats is None else np.tile(data, repeats)  # None: repeats come at run time


# ----- Pad ----------------------------------------------------------------------------------------
_PadMode = Literal["constant", "reflect", "edge", "wrap"]
# The ONNX Pad modes we run, by name; np.pad spells them the same and its stub wants the Literal.
_PAD_MODES: dict[str, _PadMode] = {"constant": "constant", "reflect": "reflect", "edge": "edge", "wrap": "wrap"}


def _pads(ctx: NodeCtx) -> tuple[list[int], list[int], _PadMode, float | None]:
    rank = ctx.input_rank(0)
    legacy = ctx.node.opset < 11
    raw = ctx.attr_ints("pads") if legacy else [int(p) for p in ctx.require_value(1, "pads").reshape(-1)]
    axes = list(range(rank))
    if not legacy and ctx.has_input(3):
        axes = ctx.normalize_axes([int(a) for a in ctx.require_value(3, "axes").reshape(-1)], rank)
    if len(raw) != 2 * len(axes):
        raise ctx.error(f"pads has {len(raw)} entries; expected {2 * len(axes)}")
    begin, end = [0] * rank, [0] * rank
    for i, axis in enumerate(axes):
        begin[axis], end[axis] = raw[i], raw[i + len(axes)]
    value: float | None = ctx.attr_float("value", 0.0) if legacy else 0.0
    if not legacy and ctx.has_input(2):  # None: known only at run time, read from its buffer
        known = ctx.input_value(2)
        value = None if known is None else np.asarray(known).reshape(-1)[0].item()
    mode = _PAD_MODES.get(ctx.attr_str("mode", "constant"))
    if mode is None:
        raise ctx.error(f"Pad mode '{ctx.attr_str('mode')}' is not supported")
    return begin, end, mode, value


def _pad(ctx: NodeCtx) -> IndexMap:
    dims = list(ctx.input_dims(0))
    begin, end, mode, value = _pads(ctx)
    out = [d + b + e for d, b, e in zip(dims, begin, end)]
    starts: list[SymbolicDim] = [-b for b in begin]
    if value is None:  # constant_value comes at run time: the shader reads input 2 (unused by other modes)
        return IndexMap(
            out, dims, contiguous_strides(dims), starts, mode=mode, pad_input=2 if mode == "constant" else None
        )
    return IndexMap(out, dims, contiguous_strides(dims), starts, mode=mode, pad_value=value)


def _fold_pad(ctx: NodeCtx, data: np.ndarray) -> np.ndarray | None:
    begin, end, mode, value = _pads(ctx)
    if value is None:
        return None  # constant_value comes at run time (ignored by the other modes: the shader never reads it)
    cropped = data[tuple(slice(max(-b, 0), data.shape[i] - max(-e, 0)) for i, (b, e) in enumerate(zip(begin, end)))]
    widths = [(max(b, 0), max(e, 0)) for b, e in zip(begin, end)]
    if mode == "constant":
        return np.pad(cropped, widths, mode="constant", constant_values=value)
    return np.pad(cropped, widths, mode=mode)


# ----- DepthToSpace / SpaceToDepth: a transpose of a 6-D view -------------------------------------
def _blocks(ctx: NodeCtx) -> tuple[list[SymbolicDim], int]:
    dims = list(ctx.input_dims(0))
    if len(dims) != 4:
        raise ctx.error(f"expects a 4-D NCHW input, found rank {len(dims)}")
    return dims, ctx.attr_int("blocksize")


def _view_transpose(view: list[SymbolicDim], perm: list[int], output: list[SymbolicDim]) -> IndexMap:
    strides = contiguous_strides(view)
    return IndexMap([view[p] for p in perm], [view[p] for p in perm], [strides[p] for p in perm], output_dims=output)


def _depth_to_space(ctx: NodeCtx) -> IndexMap:
    (n, c, h, w), b = _blocks(ctx)
    c2 = c // (b * b)
    if ctx.attr_str("mode", "DCR") == "DCR":
        return _view_transpose([n, b, b, c2, h, w], [0, 3, 4, 1, 5, 2], [n, c2, h * b, w * b])
    return _view_transpose([n, c2, b, b, h, w], [0, 1, 4, 2, 5, 3], [n, c2, h * b, w * b])


def _space_to_depth(ctx: NodeCtx) -> IndexMap:
    (n, c, h, w), b = _blocks(ctx)
    h2, w2 = h // b, w // b
    # opset 28's mode: DCR puts the block offset outermost in the output channel, CRD innermost
    perm = [0, 3, 5, 1, 2, 4] if ctx.attr_str("mode", "DCR") == "DCR" else [0, 1, 3, 5, 2, 4]
    return _view_transpose([n, c, h2, b, w2, b], perm, [n, c * b * b, h2, w2])


def _fold_view(ctx: NodeCtx, data: np.ndarray, build: Callable[[NodeCtx], IndexMap]) -> np.ndarray:
    m = build(ctx)
    out_dims, in_strides = static_dims(m.out_dims), static_dims(m.in_strides)
    output_dims = static_dims(m.output_dims if m.output_dims is not None else m.out_dims)
    if out_dims is None or in_strides is None or output_dims is None:  # a known value has a static shape
        raise ctx.error(f"cannot fold a view with symbolic dims {m.out_dims}")
    out = np.empty(int(np.prod(out_dims)), dtype=data.dtype)
    flat = data.reshape(-1)
    for i, idx in enumerate(np.ndindex(*out_dims)):
        out[i] = flat[sum(c * s for c, s in zip(idx, in_strides))]
    return out.reshape(output_dims)


def _dim(value: SymbolicExpr | SupportsInt) -> SymbolicDim:
    return value if isinstance(value, SymbolicExpr) else int(value)


INDEXMAP: dict[str, IndexMapOp | SplitOp] = {"Split": SplitOp()} | named_rows(
    {
        "Transpose": IndexMapOp(_transpose, lambda ctx, x: np.transpose(x, _perm(ctx))),
        "Slice": IndexMapOp(_slice, _fold_slice),
        "Expand": IndexMapOp(_expand, _fold_expand),
        "Tile": IndexMapOp(_tile, _fold_tile),
        "Pad": IndexMapOp(_pad, _fold_pad),
        "DepthToSpace": IndexMapOp(_depth_to_space, lambda ctx, x: _fold_view(ctx, x, _depth_to_space)),
        "SpaceToDepth": IndexMapOp(_space_to_depth, lambda ctx, x: _fold_view(ctx, x, _space_to_depth)),
    }
)
