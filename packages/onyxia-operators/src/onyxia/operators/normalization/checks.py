"""Compile-time refusals shared by the normalisation-family operators.

An attribute value Onyxia has no shader for must fail when the model is compiled, naming the node,
the op and the attribute, not at run time with a wrong answer.
"""

from __future__ import annotations

from collections.abc import Sequence

from onyxia.core import NodeCtx, SymbolicDim, UnsupportedOpError

__all__ = ["is_suffix_of", "unsupported_attribute"]


def unsupported_attribute(ctx: NodeCtx, attribute: str, value: object, expected: str) -> UnsupportedOpError:
    node = ctx.node
    domain = node.domain or "ai.onnx"
    return UnsupportedOpError(
        f"node '{node.name}' ({node.op_type}, domain {domain}): attribute {attribute}={value} is not supported; "
        f"expected {expected}"
    )


def is_suffix_of(small: Sequence[SymbolicDim], big: Sequence[SymbolicDim]) -> bool:
    """`small` (leading 1s dropped) equals the trailing dims of `big`: it broadcasts over `big`'s leading
    dims only, so flat index ``i % numel(small)`` addresses it from a flat index ``i`` into `big`."""
    trimmed = list(small)
    while trimmed and trimmed[0] == 1:
        trimmed.pop(0)
    return len(trimmed) <= len(big) and list(big[len(big) - len(trimmed) :]) == trimmed
