"""com.microsoft Attention: BERT/ViT self-attention with one packed q/k/v projection.

``Attention(input [B, S, D_in], weights [D_in, Dq + Dk + Dv], bias?, mask_index?, past?,
attention_bias?)`` (onnxruntime's ContribOperators.md; CPU kernel contrib_ops/cpu/bert/attention.cc)::

    q, k, v = split(input @ weights + bias, qkv_hidden_sizes or 3 equal parts)   # heads: [B, N, *, H]
    k, v = concat(past[0], k), concat(past[1], v)  along the sequence, when past [2, B, N, P, H] is given
    present = stack(k, v)                                                        # [2, B, N, P + S, H]
    output = softmax(scale * q @ k^T + mask) @ v, heads merged back to [B, S, Dv]

with ``scale`` 1/sqrt(Dq / N) unless given and the mask of `transformer.masks` (mask_index forms,
``unidirectional``, ``mask_filter_value`` default -10000, attention_bias). Lowered to MatMul, Add,
Split, Reshape/Transpose per head and one com.onyxia ScaledDotProductAttention (whose softmax is
onnxruntime's exp(x - max) / sum over all keys), so the projection meets the MatMul fusions. Float32
only, as the fused attention kernel; rotary (``do_rotary``) and the shared past/present buffer are
refused by name, as is ``past_sequence_length`` (that buffer's companion).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from onyxia.core import DataType, InferenceCtx, SymbolicDim, TensorType
from onyxia.core.context import NodeCtx
from onyxia.core.shapes import shape_of
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.lowering import Body, LoweredOp
from onyxia.operators.transformer.masks import AttentionMask, check_mask_index, lower_mask

__all__ = ["ATTENTION", "AttentionGeometry", "attend", "attention_geometry", "default_scale", "sdpa", "split_heads"]

_INPUTS = ("input", "weights", "bias", "mask_index", "past", "attention_bias", "past_sequence_length")


@dataclass(frozen=True)
class AttentionGeometry:
    batch: SymbolicDim
    seq: SymbolicDim
    past: SymbolicDim  # 0 without past
    heads: int
    sizes: tuple[int, int, int]  # hidden sizes of q, k and v
    starts: bool  # mask_index is [2B]: end then start positions

    @property
    def head_size(self) -> int:
        return self.sizes[0] // self.heads

    @property
    def v_head_size(self) -> int:
        return self.sizes[2] // self.heads


def attention_geometry(ctx: NodeCtx) -> AttentionGeometry:
    """Check the node as onnxruntime's CheckInputs does; every fact the lowering relies on."""
    for attr in ("do_rotary", "past_present_share_buffer"):
        if ctx.attr_int(attr, 0):
            raise ctx.error(f"attribute {attr}=1 is not supported (onnxruntime's CPU kernel refuses it too)")
    if ctx.has_input(6):
        raise ctx.error("input 6 (past_sequence_length) belongs to the shared past/present buffer, not supported")
    for i in (0, 1, 2, 4, 5):
        if ctx.has_input(i) and ctx.input_dtype(i) != DataType.FLOAT:
            raise ctx.error(f"input {i} ({_INPUTS[i]}) is {ctx.input_dtype(i).short}; expected f32")
    x, w = ctx.input_dims(0), ctx.input_dims(1)
    if len(x) != 3 or len(w) != 2 or x[2] != w[0] or not isinstance(w[1], int):
        raise ctx.error(
            f"input must be [B, S, D_in] and weights [D_in, D] with a static D; found {ctx.describe_inputs()}"
        )
    heads = ctx.attr_int("num_heads", 0)
    sizes = tuple(ctx.attr_ints("qkv_hidden_sizes", [w[1] // 3] * 3))
    if heads <= 0 or len(sizes) != 3 or sum(sizes) != w[1] or sizes[0] != sizes[1]:
        raise ctx.error(
            f"qkv_hidden_sizes {list(sizes)} (q and k equal, summing to the weights' {w[1]} columns) and "
            f"num_heads {heads} (positive) disagree"
        )
    if any(s <= 0 or s % heads for s in sizes):
        raise ctx.error(f"the hidden sizes {list(sizes)} are not positive multiples of num_heads {heads}")
    if ctx.has_input(2) and list(ctx.input_dims(2)) != [w[1]]:
        raise ctx.error(f"bias must be [{w[1]}]; found {list(ctx.input_dims(2))}")
    batch, seq = x[0], x[1]
    past: SymbolicDim = 0
    if ctx.has_input(4):
        p = ctx.input_dims(4)
        if sizes[1] != sizes[2] or len(p) != 5 or list(p[:3]) != [2, batch, heads] or p[4] != sizes[0] // heads:
            raise ctx.error(f"past must be [2, B, N, P, H] with equal k and v sizes; found {ctx.describe_inputs()}")
        past = p[3]
    total = seq + past if past != 0 else seq
    starts = check_mask_index(ctx, 3, batch, seq, total) if ctx.has_input(3) else False
    if ctx.has_input(5):
        bias = ctx.input_dims(5)
        if len(bias) != 4 or any(d not in (1, e) for d, e in zip(bias, [batch, heads, seq, total])):
            raise ctx.error(f"attention_bias must broadcast as [B|1, N|1, S, T]; found {list(bias)}")
    return AttentionGeometry(batch, seq, past, heads, (sizes[0], sizes[1], sizes[2]), starts)


def _infer(ctx: InferenceCtx) -> list[TensorType]:
    g = attention_geometry(ctx)
    out = [TensorType(DataType.FLOAT, shape_of([g.batch, g.seq, g.sizes[2]]))]
    if ctx.node.outputs[1:2] and ctx.node.outputs[1] is not None:
        total = g.seq + g.past if g.past != 0 else g.seq
        out.append(TensorType(DataType.FLOAT, shape_of([2, g.batch, g.heads, total, g.head_size])))
    return out


def split_heads(body: Body, x: int, heads: int, size: int) -> int:
    """[B, S, N * H] -> [B, N, S, H]."""
    shaped = body.op("Reshape", x, body.ints([0, 0, heads, size], f"heads_{size}"))
    return body.op("Transpose", shaped, perm=[0, 2, 1, 3])


def attend(body: Body, q: int, k: int, v: int, mask: AttentionMask, scale: float, out_size: int) -> int:
    """ScaledDotProductAttention over [B, N, *, H] heads under `mask`, merged back to [B, S, N * Hv]."""
    mask_input, mask_attrs = lower_mask(body, mask, k, q)
    return sdpa(body, q, k, v, mask_input, mask_attrs, scale, out_size)


def sdpa(
    body: Body, q: int, k: int, v: int, mask: int | None, mask_attrs: dict[str, float], scale: float, out_size: int
) -> int:
    """The one attention node every lowering ends in, its output merged to [B, S, out_size]."""
    inputs = [q, k, v, *([mask] if mask is not None else [])]
    attrs: dict[str, Any] = {"scale": scale, "transpose_output": 1, **mask_attrs}
    y = body.op("ScaledDotProductAttention", *inputs, domain=ONYXIA_DOMAIN, **attrs)
    return body.op("Reshape", y, body.ints([0, 0, out_size], "merged"))


def default_scale(ctx: NodeCtx, head_size: int) -> float:
    """onnxruntime: ``scale == 0 ? 1 / sqrt(head_size) : scale``."""
    scale = ctx.attr_float("scale", 0.0)
    return scale if scale != 0.0 else 1.0 / math.sqrt(head_size)


def _lower(body: Body) -> list[int | None]:
    g = attention_geometry(body.ctx)
    qkv = body.op("MatMul", body.input(0), body.input(1))
    if body.input(2) is not None:
        qkv = body.op("Add", qkv, body.input(2))
    q, k, v = body.ops("Split", qkv, body.ints(list(g.sizes), "qkv_sizes"), axis=-1, outputs=3)
    q, k, v = (split_heads(body, t, g.heads, s // g.heads) for t, s in zip((q, k, v), g.sizes))
    past, k_past = body.input(4), None
    if past is not None:
        k_past, v_past = (body.op("Gather", past, body.const(np.int64(i), f"past_{i}"), axis=0) for i in (0, 1))
        k, v = body.op("Concat", k_past, k, axis=2), body.op("Concat", v_past, v, axis=2)
    present = None
    if len(body.node.outputs) > 1 and body.node.outputs[1] is not None:
        present = body.op("Concat", *(body.op("Unsqueeze", t, body.ints([0], "stack")) for t in (k, v)), axis=0)
    mask = AttentionMask(
        mask_index=body.input(3),
        unidirectional=bool(body.ctx.attr_int("unidirectional", 0)),
        bias=body.input(5),
        filter_value=body.ctx.attr_float("mask_filter_value", -10000.0),
        starts=g.starts,
        past=k_past,
    )
    out = attend(body, q, k, v, mask, default_scale(body.ctx, g.head_size), g.sizes[2])
    return [out, present]


ATTENTION: dict[str, LoweredOp] = {"Attention": LoweredOp("Attention", _infer, _lower)}
