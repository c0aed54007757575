"""`RotaryEmbeddingOp`: com.microsoft RotaryEmbedding (onnxruntime's semantics, its CPU kernel the oracle).

Geometry follows onnxruntime's helper: with `rotary_embedding_dim` 0 the head size is twice the cache
width and `num_heads` 0 means hidden / head size (the Gemma and onnx-community exports rely on both);
a partial `rotary_embedding_dim` needs `num_heads`. Input is [B, S, heads * head] or [B, heads, S, head].
Position ids are one start position (a scalar or one-element vector: ids start + s) or [B, S];
Onyxia also accepts [1, S] and [S] (one row for every batch item), which onnxruntime refuses.
The cos/sin row of a position is cache[position] whatever its width, so a cache wider than
rotary_dim / 2 is read by its real row stride.

Onyxia's attribute ``angle_cache=1`` (set only by `rotate_by_angles`, never in a file) says both caches
are one table of f32 angles: the kernels take cos and sin of the entry themselves, the builtin
``cos``/``sin`` the Cos and Sin kernels use, so the result is the graph's ``Cos(a)``/``Sin(a)`` exactly
without those two dispatches.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import NamedTuple

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, SymbolicDim, TensorType, ceil_div, load_wgsl
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.normalization.checks import require_equal_dim
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = [
    "ROTARY",
    "RotaryEmbeddingOp",
    "RotaryGeometry",
    "angle_cache",
    "is_interleaved",
    "rotary_geometry",
    "rotary_head_size",
    "rotary_numpy",
    "rotary_tables",
]

_SOURCE = load_wgsl(__package__, "rotary.wgsl")


class RotaryGeometry(NamedTuple):
    batch: SymbolicDim
    seq: SymbolicDim
    heads: int
    head: int
    rotary: int
    four_d: bool  # [B, heads, S, head] rather than [B, S, heads * head]
    pos_offset: bool  # one start position (onnxruntime's format 0)
    pos_batch_stride: SymbolicDim  # ids of batch item b start at b * this (0: shared row)


@dataclass(frozen=True)
class RotaryEmbeddingOp:
    name: str = "RotaryEmbedding"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        rotary_geometry(ctx)
        return [TensorType(ctx.input_dtype(0), ctx.input_shape(0))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = ctx.known_values()
        if values is None:
            return None
        x, pos, cos, sin = values
        cos, sin = rotary_tables(ctx, cos, sin)
        y = rotary_numpy(x, pos, cos, sin, rotary_geometry(ctx), is_interleaved(ctx))
        return [y.astype(ctx.output_numpy_dtype(0))]

    def plan(self, ctx: PlanCtx) -> None:
        geo = rotary_geometry(ctx)
        for i, role in ((0, "input"), (2, "cos_cache"), (3, "sin_cache")):
            require_dtype(ctx, ctx.input_dtype(i), FLOATS, f"input {i} ({role})")
        n = dims_product(ctx.input_dims(0))
        if n == 0:
            return  # an empty output: nothing to write
        types = type_defs(X_T=ctx.input_dtype(0), COS_T=ctx.input_dtype(2), SIN_T=ctx.input_dtype(3))
        defs: dict[str, object] = {**types, **type_defs(Y_T=ctx.output_tensor(0).dtype)}
        defs.update(WORKGROUP_SIZE=WORKGROUP_SIZE, INTERLEAVED=is_interleaved(ctx))
        if angle_cache(ctx):
            defs["ANGLE_CACHE"] = True
        if geo.pos_offset:
            defs["POS_OFFSET"] = True
        max_pos, cache_w = ctx.input_dims(2)
        dims = {
            "N": n,
            "HEAD": geo.head,
            "ROTARY": geo.rotary,
            "ROW": geo.head if geo.four_d else geo.heads * geo.head,
            "S": geo.seq,
            "BATCH": geo.seq * geo.heads * geo.head,
            "POS_B_STRIDE": geo.pos_batch_stride,
            "CACHE_W": cache_w,
            "MAX_POS": max_pos,
        }
        shader = ctx.compile_shader("normalization/rotary", _SOURCE, defs, dims)
        ctx.dispatch(shader, [ctx.input(i) for i in range(4)], [ctx.output(0)], ceil_div(n, WORKGROUP_SIZE))


def is_interleaved(ctx: NodeCtx) -> bool:
    """onnxruntime pairs interleaved only for ``interleaved == 1``: 2, 99 or -1 run its half-split
    pairing (checked against onnxruntime 1.2x's CPU kernel), so Onyxia reads the attribute the same way."""
    return ctx.attr_int("interleaved", 0) == 1


def angle_cache(ctx: NodeCtx) -> bool:
    """The caches hold angles (``angle_cache=1``): f32 only, the type the folded Cos/Sin computed in."""
    if not ctx.attr_int("angle_cache", 0):
        return False
    if ctx.input_dtype(2) != DataType.FLOAT or ctx.input_dtype(3) != DataType.FLOAT:
        raise ctx.error(f"angle_cache=1 needs f32 angle tables; found {ctx.describe_inputs()}")
    return True


def rotary_tables(ctx: NodeCtx, cos: np.ndarray, sin: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The cos and sin caches as values (for folding): the tables themselves, or cos/sin of the angles."""
    if not angle_cache(ctx):
        return cos, sin
    return np.cos(cos.astype(np.float32)), np.sin(sin.astype(np.float32))


def rotary_head_size(hidden: int, cache_width: int, num_heads: int, rotary_embedding_dim: int) -> int:
    """onnxruntime's head size: twice the cache width unless rotary_embedding_dim is set (then hidden / num_heads)."""
    return 2 * cache_width if rotary_embedding_dim == 0 else hidden // num_heads


def rotary_geometry(ctx: NodeCtx) -> RotaryGeometry:
    """Heads, head size and rotary dim as onnxruntime's `CheckInputs` derives them, validated."""
    dims = ctx.input_dims(0)
    if len(dims) not in (3, 4):
        raise ctx.error(f"input 0 has rank {len(dims)}; expected [B, S, hidden] or [B, heads, S, head]")
    cache = ctx.input_dims(2)
    if len(cache) != 2 or list(ctx.input_dims(3)) != list(cache) or not isinstance(cache[1], int):
        raise ctx.error("cos_cache and sin_cache must both be [max_position, width] with a static width")
    four_d = len(dims) == 4
    hidden = dims[1] * dims[3] if four_d else dims[2]
    if not isinstance(hidden, int):
        raise ctx.error(f"the hidden size ({hidden}) must be static")
    rotary_attr, heads_attr = ctx.attr_int("rotary_embedding_dim", 0), ctx.attr_int("num_heads", 0)
    if rotary_attr > 0 and heads_attr <= 0:
        raise ctx.error("attribute rotary_embedding_dim is set, so num_heads must be too (as onnxruntime requires)")
    head = rotary_head_size(hidden, cache[1], heads_attr, rotary_attr)
    heads = heads_attr or (hidden // head if head else 0)
    rotary = rotary_attr or head
    if head == 0 or heads * head != hidden or (four_d and dims[3] != head):
        raise ctx.error(f"cannot split hidden size {hidden} into heads of {head} (num_heads {heads_attr})")
    if rotary % 2 or rotary > head or cache[1] < rotary // 2:
        raise ctx.error(f"rotary_embedding_dim {rotary} must be even, <= head size {head}, and <= 2 * cache width")
    seq = dims[2] if four_d else dims[1]
    pos_offset, stride = _position_layout(ctx, dims[0], seq)
    return RotaryGeometry(dims[0], seq, heads, head, rotary, four_d, pos_offset, stride)


def _position_layout(ctx: NodeCtx, batch: SymbolicDim, seq: SymbolicDim) -> tuple[bool, SymbolicDim]:
    """(one start position?, batch stride of the ids) for input 1's shape."""
    pos = ctx.input_dims(1)
    if len(pos) > 2:
        raise ctx.error(f"position_ids has rank {len(pos)}; expected a scalar, [1], [S] or [B, S]")
    if dims_product(pos) == 1 and len(pos) <= 1:
        return True, 0
    shared = len(pos) == 1 or pos[0] == 1
    if not require_equal_dim(ctx, pos[-1], seq, "position_ids dim -1"):
        raise ctx.error(f"position_ids has shape {ctx.input_shape(1)}; its last dim must be the sequence length {seq}")
    if not shared and not require_equal_dim(ctx, pos[0], batch, "position_ids dim 0"):
        raise ctx.error(f"position_ids has shape {ctx.input_shape(1)}; dim 0 must be 1 or the batch size {batch}")
    return False, 0 if shared else seq


def rotary_numpy(
    x: np.ndarray, pos: np.ndarray, cos: np.ndarray, sin: np.ndarray, geo: RotaryGeometry, interleaved: bool
) -> np.ndarray:
    """The op in numpy (float32), for folding."""
    batch, seq = x.shape[0], x.shape[2] if geo.four_d else x.shape[1]
    work = x.astype(np.float32)
    heads = work.transpose(0, 2, 1, 3) if geo.four_d else work.reshape(batch, seq, geo.heads, geo.head)
    ids = pos.reshape(-1)[0] + np.arange(seq) if geo.pos_offset else pos.reshape(-1, seq)
    ids = np.broadcast_to(np.clip(ids, 0, cos.shape[0] - 1), (batch, seq))
    half = geo.rotary // 2
    c = cos.astype(np.float32)[ids][:, :, None, :half]
    s = sin.astype(np.float32)[ids][:, :, None, :half]
    first, second = (
        (slice(0, geo.rotary, 2), slice(1, geo.rotary, 2)) if interleaved else (slice(0, half), slice(half, geo.rotary))
    )
    out = heads.copy()
    a, b = heads[..., first], heads[..., second]
    out[..., first], out[..., second] = a * c - b * s, a * s + b * c
    return out.transpose(0, 2, 1, 3) if geo.four_d else out.reshape(x.shape)


ROTARY: dict[str, RotaryEmbeddingOp] = {"RotaryEmbedding": RotaryEmbeddingOp()}
