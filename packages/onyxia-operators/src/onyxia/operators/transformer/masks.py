"""The additive attention mask onnxruntime's CPU attention kernels build, spelled in plain ops.

onnxruntime (contrib_ops/cpu/bert/attention_helper.h, ``PrepareMask``) adds to the scaled scores
``alpha * q @ k^T`` a mask of 0 for keys a query may see and ``mask_filter_value`` for the others:

- ``mask_index`` [B]: key lengths, keys at or past ``mask_index[b]`` masked (right padding);
- ``mask_index`` [2B]: end positions, then start positions (keys before the start masked too);
- [B, T] (a raw 0/1 mask) and [B, S, T]: keys whose entry is not > 0 masked;
- ``unidirectional``: key j *set* to float32's lowest for query s < S - 1 when j > past + s,
  whatever the padding mask said (onnxruntime 1.32's CPU kernel, measured: a key masked both ways
  is lowest, not filter + lowest; and its loop leaves the last query row unmasked, which matters
  only for MultiHeadAttention with more keys than queries);
- then the attention bias [B|1, N|1, S, T] is added.

A padding mask alone goes to ScaledDotProductAttention as its bool condition (``mask_true`` 0,
``mask_false`` the filter value): no float mask is materialised per layer. Otherwise the float
parts are summed, broadcasting to [B, N, S, T] only as far as the parts need.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, SymbolicExpr
from onyxia.core.context import NodeCtx
from onyxia.operators.lowering import Body

__all__ = ["AttentionMask", "check_mask_index", "key_positions", "lower_mask"]


@dataclass(frozen=True)
class AttentionMask:
    """What a mask is made of: the mask_index-like input (and its form), causal, an additive bias."""

    mask_index: int | None = None
    unidirectional: bool = False
    bias: int | None = None
    filter_value: float = -10000.0
    starts: bool = False  # a 1-D mask_index of [2B]: end positions then start positions
    past: int | None = None  # the past keys [B, N, P, H]: query s sits at position P + s


def check_mask_index(ctx: NodeCtx, i: int, batch: object, seq: object, total: object) -> bool:
    """Validate input `i` as a mask_index for [B, S] queries over T keys; True for the [2B] form."""
    if ctx.input_dtype(i) != DataType.INT32:
        raise ctx.error(f"input {i} (mask_index) is {ctx.input_dtype(i).short}; expected int32")
    dims = ctx.input_dims(i)
    if len(dims) == 1:
        if dims[0] == batch:
            return False
        if isinstance(batch, (int, SymbolicExpr)) and dims[0] == 2 * batch:
            return True
        raise ctx.error(f"a 1-D mask_index must be [batch] or [2 * batch] (batch {batch}); found {list(dims)}")
    expected = {2: [batch, total], 3: [batch, seq, total]}.get(len(dims))
    if expected is None:
        raise ctx.error(f"mask_index of rank {len(dims)} is not supported (onnxruntime's CPU kernel takes 1-D to 3-D)")
    if list(dims) != expected:
        raise ctx.error(f"a {len(dims)}-D mask_index must be {expected}; found {list(dims)}")
    return False


def key_positions(body: Body, keys: int, queries: int, past: int | None) -> tuple[int, int, int]:
    """Key positions 0..T-1, the query rows' positions past + 0..S-1 (int64) and whether each row
    is not the last (bool [S]), from the 4-D k [B, N, T, H], q [B, N, S, H] and past [B, N, P, H]."""
    zero, one = body.const(np.int64(0), "zero"), body.const(np.int64(1), "one")
    index = body.const(np.int64(2), "seq_axis")
    total = body.op("Gather", body.op("Shape", keys), index, axis=0)
    rows = body.op("Gather", body.op("Shape", queries), index, axis=0)
    offset = zero if past is None else body.op("Gather", body.op("Shape", past), index, axis=0)
    row_index = body.op("Range", zero, rows, one)
    not_last = body.op("Less", row_index, body.op("Sub", rows, one))
    return body.op("Range", zero, total, one), body.op("Add", row_index, offset), not_last


def lower_mask(body: Body, mask: AttentionMask, keys: int, queries: int) -> tuple[int | None, dict[str, float]]:
    """The ScaledDotProductAttention mask input and attributes for `mask`."""
    valid = _valid_keys(body, mask, keys, queries) if mask.mask_index is not None else None
    if valid is not None and not mask.unidirectional and mask.bias is None:
        return valid, {"mask_true": 0.0, "mask_false": mask.filter_value}
    zero, masked = body.const(np.float32(0.0), "mask_zero"), body.const(np.float32(mask.filter_value), "mask_filter")
    total = None if valid is None else body.op("Where", valid, zero, masked)
    if mask.unidirectional:
        positions, rows, not_last = key_positions(body, keys, queries, mask.past)
        future = body.op("Greater", _unsqueeze(body, positions, [0]), _unsqueeze(body, rows, [1]))
        future = body.op("And", future, _unsqueeze(body, not_last, [1]))
        lowest = body.const(np.finfo(np.float32).min, "mask_lowest")
        total = body.op("Where", future, lowest, zero if total is None else total)
    if mask.bias is not None:
        total = mask.bias if total is None else body.op("Add", total, mask.bias)
    return total, {}


def _valid_keys(body: Body, mask: AttentionMask, keys: int, queries: int) -> int:
    """Bool [B, 1, 1, T] or [B, 1, S, T]: the keys each query may see by the padding mask."""
    index = mask.mask_index
    assert index is not None
    rank = len(body.ctx.input_dims(body.node.inputs.index(index)))
    if rank > 1:
        seen = body.op("Greater", index, body.const(np.int32(0), "mask_zero_i32"))
        return _unsqueeze(body, seen, [1, 2] if rank == 2 else [1])
    positions, _, _ = key_positions(body, keys, queries, None)
    bounds = body.op("Cast", index, to=int(DataType.INT64))
    if mask.starts:
        ends_starts = body.op("Reshape", bounds, body.ints([2, -1], "ends_starts"))
        ends = body.op("Gather", ends_starts, body.const(np.int64(0), "ends"), axis=0)
        starts = body.op("Gather", ends_starts, body.const(np.int64(1), "starts"), axis=0)
    else:
        ends, starts = bounds, None
    row = _unsqueeze(body, positions, [0])
    seen = body.op("Less", row, _unsqueeze(body, ends, [1]))
    if starts is not None:
        seen = body.op("And", seen, body.op("GreaterOrEqual", row, _unsqueeze(body, starts, [1])))
    return _unsqueeze(body, seen, [1, 2])


def _unsqueeze(body: Body, x: int, axes: list[int]) -> int:
    return body.op("Unsqueeze", x, body.ints(axes, "axes"))
