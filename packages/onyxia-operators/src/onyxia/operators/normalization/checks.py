"""Validation shared by the normalisation-family operators.

An attribute value Onyxia has no shader for must fail when the model is compiled, naming the node,
the op and the attribute, not at run time with a wrong answer. Shape checks follow `ctx.broadcast`:
two static dims must agree; a symbolic dim facing another dim is assumed equal and recorded as a
constraint the runtime checks once dims are bound (exporters name the same size differently).
"""

from __future__ import annotations

from collections.abc import Sequence

from onyxia.core import NodeCtx, SymbolicDim, UnsupportedOpError
from onyxia.core.shapes import shape_of

__all__ = ["require_equal_dim", "require_rows", "require_suffix", "unsupported_attribute"]


def unsupported_attribute(ctx: NodeCtx, attribute: str, value: object, expected: str) -> UnsupportedOpError:
    node = ctx.node
    domain = node.domain or "ai.onnx"
    return UnsupportedOpError(
        f"node '{node.name}' ({node.op_type}, domain {domain}): attribute {attribute}={value} is not supported; "
        f"expected {expected}"
    )


def require_equal_dim(ctx: NodeCtx, found: SymbolicDim, expected: SymbolicDim, what: str) -> bool:
    """False (and no constraint) when both are static and differ."""
    if found == expected:
        return True
    if isinstance(found, int) and isinstance(expected, int):
        return False
    ctx.constraints.append((found, expected, f"node '{ctx.node.name}' ({ctx.node.op_type}) {what}"))
    return True


def require_suffix(ctx: NodeCtx, i: int, role: str, target: Sequence[SymbolicDim]) -> None:
    """Input `i`'s dims, leading 1s dropped, must be the trailing dims of `target`: it then broadcasts
    over `target`'s leading dims only, so flat index ``k % numel(input)`` addresses it from a flat
    index ``k`` into `target`."""
    dims = list(ctx.input_dims(i))
    while dims and dims[0] == 1:
        dims.pop(0)
    tail = list(target[len(target) - len(dims) :]) if len(dims) <= len(target) else None
    what = f"input {i} ({role})"
    if tail is None or not all(require_equal_dim(ctx, d, t, what) for d, t in zip(dims, tail)):
        raise ctx.error(
            f"{what} has shape {ctx.input_shape(i)}; expected it to broadcast over leading dims to {shape_of(target)}"
        )


def require_rows(ctx: NodeCtx, i: int, role: str, target: Sequence[SymbolicDim]) -> None:
    """Input `i` has `target`'s dims (leading 1s aside): a row-wise reduction over it sees `target`'s rows."""
    dims, want = list(ctx.input_dims(i)), list(target)
    for d in (dims, want):
        while d and d[0] == 1:
            d.pop(0)
    what = f"input {i} ({role})"
    if len(dims) != len(want) or not all(require_equal_dim(ctx, d, t, what) for d, t in zip(dims, want)):
        raise ctx.error(f"{what} has shape {ctx.input_shape(i)}; expected {shape_of(target)}")
