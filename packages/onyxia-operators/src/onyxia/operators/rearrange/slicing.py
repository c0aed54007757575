"""ONNX Slice argument handling (inputs from opset 10, attributes before), static or symbolic."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from onyxia.core import NodeCtx, SymbolicDim, SymbolicExpr

__all__ = ["normalize_slices", "slice_inputs"]

_HUGE = 2**31 - 1  # exporters write INT64_MAX / INT32_MAX for "to the end"


def slice_inputs(ctx: NodeCtx, rank: int) -> tuple[list[int], Sequence[SymbolicDim], Sequence[SymbolicDim], list[int]]:
    """(axes, starts, ends, steps), known at compile time (starts/ends may be symbolic); axes normalised."""
    starts: Sequence[SymbolicDim]
    ends: Sequence[SymbolicDim]
    if ctx.node.opset < 10:
        starts, ends = ctx.attr_ints("starts"), ctx.attr_ints("ends")
        axes = ctx.attr_ints("axes", list(range(len(starts))))
        steps = [1] * len(starts)
    else:
        starts = _dims(ctx, 1, "starts")
        ends = _dims(ctx, 2, "ends")
        axes = _ints(ctx, 3, "axes") if ctx.has_input(3) else list(range(len(starts)))
        steps = _ints(ctx, 4, "steps") if ctx.has_input(4) else [1] * len(starts)
    if not len(starts) == len(ends) == len(axes) == len(steps):
        raise ctx.error("starts, ends, axes and steps must have the same length")
    if 0 in steps:
        raise ctx.error("slice step must not be 0")
    return ctx.normalize_axes(axes, rank), starts, ends, steps


def normalize_slices(ctx: NodeCtx, dims: list[SymbolicDim]) -> list[tuple[int, SymbolicDim, int, SymbolicDim]]:
    """Per sliced axis: (axis, first input index, step, output extent), clamped as ONNX specifies."""
    result: list[tuple[int, SymbolicDim, int, SymbolicDim]] = []
    for axis, start, end, step in zip(*slice_inputs(ctx, len(dims))):
        dim = dims[axis]
        first: SymbolicDim
        extent: SymbolicDim
        if isinstance(dim, int) and isinstance(start, int) and isinstance(end, int):
            first, extent = _static(start, end, step, dim)
        else:
            first, extent = _symbolic(ctx, start, end, step, dim)
        result.append((axis, first, step, extent))
    return result


def _dims(ctx: NodeCtx, i: int, what: str) -> list[SymbolicDim]:
    values = np.asarray(ctx.require_value(i, what)).reshape(-1)
    return [v if isinstance(v, SymbolicExpr) else int(v) for v in values]


def _ints(ctx: NodeCtx, i: int, what: str) -> list[int]:
    return [int(v) for v in np.asarray(ctx.require_value(i, what)).reshape(-1)]


def _static(start: int, end: int, step: int, dim: int) -> tuple[int, int]:
    first, stop, stride = slice(start, end, step).indices(dim)
    return first, len(range(first, stop, stride))


def _symbolic(
    ctx: NodeCtx, start: SymbolicDim, end: SymbolicDim, step: int, dim: SymbolicDim
) -> tuple[SymbolicDim, SymbolicDim]:
    """A symbolic axis or bound: positive steps, symbolic bounds taken as in range (exporters
    slice `[past:past+seq]`-style windows they derived from the same dims)."""
    if step < 0:
        raise ctx.error(f"a negative slice step over the symbolic dim '{dim}' is not supported")
    first = _from_end(start, dim)
    stop = dim if isinstance(end, int) and end >= _HUGE else _from_end(end, dim)
    return first, (stop - first + (step - 1)) // step


def _from_end(bound: SymbolicDim, dim: SymbolicDim) -> SymbolicDim:
    """ONNX negative bounds count from the end; a symbolic bound is non-negative."""
    return dim + bound if isinstance(bound, int) and bound < 0 else bound
