"""Shape rules of the copy-only movement ops: each maps the data input's dims to the output's dims.

Reshape, Squeeze, Unsqueeze, Flatten and Identity never reorder elements, so a rule is all that
tells them apart; `MovementOp` does the rest. Rules work on symbolic dims too: a Reshape target
folded from ``Shape -> Gather -> Mul -> Concat`` holds `SymbolicExpr`s, and a ``-1`` next to
symbolic dims is solved by cancelling the factors both sides share (``[b, s, 8] -> [-1, 8]`` gives
``b * s``, not ``b * s * 8 / 8``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np

from onyxia.core import NodeCtx, SymbolicDim, SymbolicExpr
from onyxia.core.shapes import dims_product, format_dims

__all__ = [
    "ShapeRule",
    "flatten_dims",
    "identity_dims",
    "reshape_dims",
    "squeeze_dims_attr",
    "squeeze_dims_input",
    "unsqueeze_dims_attr",
    "unsqueeze_dims_input",
]

Dims = Sequence[SymbolicDim]
ShapeRule = Callable[[NodeCtx, Dims], list[SymbolicDim]]


def identity_dims(ctx: NodeCtx, dims: Dims) -> list[SymbolicDim]:
    return list(dims)


def flatten_dims(ctx: NodeCtx, dims: Dims) -> list[SymbolicDim]:
    # Unlike other axis attributes, Flatten's axis may equal the rank (everything goes to dim 0).
    rank = len(dims)
    axis = ctx.attr_int("axis", 1)
    if not -rank <= axis <= rank:
        raise ctx.error(f"axis {axis} is out of range for rank {rank} (Flatten accepts [{-rank}, {rank}])")
    axis = axis + rank if axis < 0 else axis
    return [dims_product(dims[:axis]), dims_product(dims[axis:])]


def unsqueeze_dims_input(ctx: NodeCtx, dims: Dims) -> list[SymbolicDim]:
    """Opset 13+: axes is input 1 (must be known at compile time)."""
    return _unsqueeze(ctx, dims, _int_list(ctx, ctx.require_value(1, "axes"), "axes"))


def unsqueeze_dims_attr(ctx: NodeCtx, dims: Dims) -> list[SymbolicDim]:
    """Opsets 1-12: axes is an attribute."""
    return _unsqueeze(ctx, dims, ctx.attr_ints("axes"))


def squeeze_dims_input(ctx: NodeCtx, dims: Dims) -> list[SymbolicDim]:
    """Opset 13+: optional axes input; absent (or empty, as onnxruntime reads it) squeezes every 1."""
    axes = _int_list(ctx, ctx.require_value(1, "axes"), "axes") if ctx.has_input(1) else []
    return _squeeze(ctx, dims, axes)


def squeeze_dims_attr(ctx: NodeCtx, dims: Dims) -> list[SymbolicDim]:
    return _squeeze(ctx, dims, ctx.attr_ints("axes", []))


def _unsqueeze(ctx: NodeCtx, dims: Dims, axes: list[int]) -> list[SymbolicDim]:
    rank = len(dims) + len(axes)
    inserted = set(ctx.normalize_axes(axes, rank))
    rest = iter(dims)
    return [1 if i in inserted else next(rest) for i in range(rank)]


def _squeeze(ctx: NodeCtx, dims: Dims, axes: list[int]) -> list[SymbolicDim]:
    if not axes:  # every dim that is 1 at run time goes, so a symbolic one decides the output's rank
        kept = [d for d in dims if d != 1]
        symbolic = [d for d in kept if not isinstance(d, int)]
        if symbolic:  # kept here (right where it is not 1); the plan needs it static to be right everywhere
            ctx.mark_static_required(symbolic, "Squeeze without axes drops the dim where it is 1 at run time")
        return kept
    removed = ctx.normalize_axes(axes, len(dims))
    for axis in removed:
        dim = dims[axis]
        if isinstance(dim, int) and dim != 1:
            raise ctx.error(f"cannot squeeze axis {axis}: its dim is {dim}, expected 1")
        if not isinstance(dim, int):
            ctx.constraints.append((dim, 1, f"node '{ctx.node.name}' (Squeeze) axis {axis}"))
    return [d for i, d in enumerate(dims) if i not in removed]


def reshape_dims(ctx: NodeCtx, dims: Dims) -> list[SymbolicDim]:
    """ONNX Reshape: 0 copies the input dim (unless allowzero=1), one -1 takes what is left."""
    target = _dim_list(ctx, ctx.require_value(1, "shape"))
    allowzero = ctx.attr_int("allowzero", 0)
    text = "[" + ", ".join(map(str, target)) + "]"
    if allowzero and 0 in target and -1 in target:
        raise ctx.error(f"shape {text} has both 0 and -1, which allowzero=1 forbids")
    if target.count(-1) > 1:
        raise ctx.error(f"shape {text} has more than one -1")
    out: list[SymbolicDim] = []
    for i, dim in enumerate(target):
        if isinstance(dim, int) and dim < -1:
            raise ctx.error(f"shape {text} has invalid dim {dim} at index {i}")
        if dim == 0 and not allowzero:
            if i >= len(dims):
                raise ctx.error(
                    f"shape {text} copies dim {i} (0) but the input {format_dims(dims)} has rank {len(dims)}"
                )
            dim = dims[i]
        out.append(dim)
    if -1 in out:
        missing = out.index(-1)
        out[missing] = _solve_missing(ctx, dims, out[:missing] + out[missing + 1 :], text)
    _check_numel(ctx, dims, out, text)
    return out


def _solve_missing(ctx: NodeCtx, dims: Dims, known: list[SymbolicDim], text: str) -> SymbolicDim:
    if 0 in known:
        raise ctx.error(f"shape {text}: cannot infer -1 when the other dims have zero elements")
    num, den = _cancel(dims, known)
    num_int = int(np.prod([d for d in num if isinstance(d, int)], dtype=np.int64))
    den_int = int(np.prod([d for d in den if isinstance(d, int)], dtype=np.int64))
    num_sym = [d for d in num if not isinstance(d, int)]
    den_sym = [d for d in den if not isinstance(d, int)]
    if num_int % den_int != 0 and not num_sym and not den_sym:
        raise ctx.error(f"cannot reshape input {format_dims(dims)} to {text}: {num_int} is not divisible by {den_int}")
    if num_int % den_int == 0 and not den_sym:
        return dims_product([num_int // den_int, *num_sym])
    return SymbolicExpr.binary("/", dims_product(num), dims_product(den))


def _check_numel(ctx: NodeCtx, dims: Dims, out: list[SymbolicDim], text: str) -> None:
    before, after = dims_product(dims), dims_product(out)
    if isinstance(before, int) and isinstance(after, int):
        if before != after:
            raise ctx.error(
                f"cannot reshape input {format_dims(dims)} ({before} elements) to {text} "
                f"(resolved {format_dims(out)}, {after} elements)"
            )
        return
    num, den = _cancel(dims, out)
    if dims_product(num) != dims_product(den):  # unprovable at compile time: checked once dims are bound
        ctx.constraints.append((before, after, f"node '{ctx.node.name}' (Reshape) element count"))


def _cancel(num: Dims, den: Dims) -> tuple[list[SymbolicDim], list[SymbolicDim]]:
    """Drop the factors `num` and `den` share (structurally equal dims)."""
    rest_num, rest_den = list(num), []
    for d in den:
        if d in rest_num:
            rest_num.remove(d)
        else:
            rest_den.append(d)
    return rest_num, rest_den


def _dim_list(ctx: NodeCtx, value: np.ndarray) -> list[SymbolicDim]:
    """A 1-D shape value (int64, or a symbolic value holding `SymbolicExpr`s) as dims."""
    if value.ndim != 1:
        raise ctx.error(f"shape input must be 1-D, found rank {value.ndim}")
    out: list[SymbolicDim] = []
    for v in value.tolist():
        if isinstance(v, (int, np.integer)):
            out.append(int(v))
        elif isinstance(v, SymbolicExpr):
            out.append(v)
        else:
            raise ctx.error(f"shape entry {v!r} is neither an integer nor a symbolic dim")
    return out


def _int_list(ctx: NodeCtx, value: np.ndarray, what: str) -> list[int]:
    if value.dtype == object or not np.issubdtype(value.dtype, np.integer):
        raise ctx.error(f"{what} must be integers known at compile time, found {value.dtype} {value.tolist()}")
    return [int(v) for v in value.reshape(-1)]
