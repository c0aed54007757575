"""ONNX Slice argument handling (inputs from opset 10, attributes before), static or symbolic."""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from onyxia.core import NodeCtx, SymbolicDim, SymbolicExpr

__all__ = ["normalize_slices", "slice_inputs", "static_slice"]

_HUGE = 2**31 - 1  # exporters write INT64_MAX / INT32_MAX for "to the end"
_TO_THE_END = (2**31 - 1, 2**63 - 1)  # onnxruntime reads these ends as "to the end" for negative steps too


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
            first, extent = static_slice(start, end, step, dim)
        else:
            first, extent = _symbolic(ctx, start, end, step, dim)
        result.append((axis, first, step, extent))
    return result


def _dims(ctx: NodeCtx, i: int, what: str) -> list[SymbolicDim]:
    values = np.asarray(ctx.require_value(i, what)).reshape(-1)
    return [v if isinstance(v, SymbolicExpr) else int(v) for v in values]


def _ints(ctx: NodeCtx, i: int, what: str) -> list[int]:
    return [int(v) for v in np.asarray(ctx.require_value(i, what)).reshape(-1)]


def static_slice(start: int, end: int, step: int, dim: int) -> tuple[int, int]:
    """(first index, extent) as onnxruntime slices, which differs from Python's `slice.indices` twice
    for negative steps: a start before the first element clamps to 0 (it reads that element), and an
    end of INT32_MAX or INT64_MAX (the exporters' "to the end") runs to the first element."""
    low, high = (0, dim) if step > 0 else (-1, dim - 1)
    first = min(max(start + dim if start < 0 else start, 0), high)
    stop = low if step < 0 and end in _TO_THE_END else min(max(end + dim if end < 0 else end, low), high)
    return max(first, 0), len(range(first, stop, step))


def _symbolic(
    ctx: NodeCtx, start: SymbolicDim, end: SymbolicDim, step: int, dim: SymbolicDim
) -> tuple[SymbolicDim, SymbolicDim]:
    """ONNX's clamping written as dim expressions, so one plan slices right at every run-time size:
    ``x[n][0:10]`` is ``min(10, n)`` long, ``x[n][-5:]`` starts at ``max(0, n - 5)``. Bounds are
    clamped to ``[0, dim]`` (negative steps: starts to ``[0, dim - 1]``, ends to ``[-1, dim - 1]``)
    after a negative static bound gains ``dim``; `SymbolicExpr`'s min/max collapse where the answer holds for every size, so the
    ``[past:past + seq]`` windows exporters derive from the same dims stay plain sums. A symbolic
    bound is a size (Shape arithmetic), taken as non-negative: its sign is not known to count from
    the end."""
    if step > 0:
        first, stop = _clamp(start, dim, 0, dim), _clamp(end, dim, 0, dim)
        return first, SymbolicExpr.binary("max", (stop - first + (step - 1)) // step, 0)
    first = _clamp(start, dim, 0, dim - 1)  # starts clamp to 0, as `static_slice` says
    stop = -1 if isinstance(end, int) and end in _TO_THE_END else _clamp(end, dim, -1, dim - 1)
    extent = SymbolicExpr.binary("max", (first - stop + (-step - 1)) // -step, 0)
    return SymbolicExpr.binary("max", first, 0), extent  # first is -1 only where dim is 0: nothing is read


def _clamp(bound: SymbolicDim, dim: SymbolicDim, low: SymbolicDim, high: SymbolicDim) -> SymbolicDim:
    """`bound` counted from the end when negative, then clamped to ``[low, high]`` (``high`` wins
    where ``dim`` is 0 and ``low > high``: the extent is then 0)."""
    if isinstance(bound, int) and abs(bound) >= _HUGE:
        bound = high if bound > 0 else low
    elif isinstance(bound, int) and bound < 0:
        bound = dim + bound
    return SymbolicExpr.binary("min", SymbolicExpr.binary("max", bound, low), high)
