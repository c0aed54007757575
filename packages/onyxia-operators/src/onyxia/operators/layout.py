"""Strides and dtype defs shared by every operator that indexes tensors in a shader.

Strides are dim expressions (ints or `SymbolicExpr`), so the same helper serves static and
symbolic shapes; planning turns them into literals or immediates. `wgsl_literal` is onyxia.core's
(the one place a value becomes shader text), re-exported here beside `type_defs`.
"""

from __future__ import annotations

from collections.abc import Sequence

from onyxia.core import DataType, NodeCtx, SymbolicDim, wgsl_literal  # wgsl_literal: re-exported for operators
from onyxia.core.shapes import dims_product

__all__ = ["WORKGROUP_SIZE", "broadcast_strides", "contiguous_strides", "node_literal", "type_defs", "wgsl_literal"]

WORKGROUP_SIZE = 256


def contiguous_strides(dims: Sequence[SymbolicDim]) -> list[SymbolicDim]:
    """Row-major strides in elements."""
    return [dims_product(dims[i + 1 :]) for i in range(len(dims))]


def broadcast_strides(in_dims: Sequence[SymbolicDim], out_dims: Sequence[SymbolicDim]) -> list[SymbolicDim]:
    """Strides of an input read at output coordinates: 0 along axes it is broadcast over."""
    padded = [1] * (len(out_dims) - len(in_dims)) + list(in_dims)
    strides = contiguous_strides(padded)
    return [0 if d == 1 and o != 1 else s for d, o, s in zip(padded, out_dims, strides)]


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
