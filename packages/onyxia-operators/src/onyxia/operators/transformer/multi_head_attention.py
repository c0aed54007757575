"""com.microsoft MultiHeadAttention: attention over q, k and v projected already (T5/Whisper/SAM
exports after onnxruntime's optimizer, cross-attention included).

``MultiHeadAttention(query [B, S, D], key, value, bias?, key_padding_mask?, attention_bias?,
past_key?, past_value?)`` (onnxruntime's multihead_attention.cc, CPU kernel)::

    q = heads(query + bias_q)                               # [B, N, S, H]
    k = heads(key + bias_k)  or key as given when 4-D [B, N, L, H] (cross-attention's cached keys)
    v = heads(value + bias_v) or value as given when 4-D [B, N, L, Hv]
    k, v = concat(past_key, k), concat(past_value, v)        # present_key / present_value
    output = softmax(scale * q @ k^T + mask) @ v, heads merged back to [B, S, Dv]

The mask is Attention's (`transformer.masks`): key_padding_mask [B] (key lengths), [B, T] or
[B, S, T], ``unidirectional``, ``mask_filter_value``, attention_bias. What onnxruntime's CPU kernel
refuses is refused here by name: packed QKV (5-D query), packed KV (5-D key), the [3B + 2] and
[2B] masks, cache_indirection, past_sequence_length and the qk output.
"""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.core import DataType, InferenceCtx, SymbolicDim, TensorType
from onyxia.core.context import NodeCtx
from onyxia.core.shapes import shape_of
from onyxia.operators.lowering import Body, LoweredOp
from onyxia.operators.transformer.attention import attend, default_scale, split_heads
from onyxia.operators.transformer.masks import AttentionMask, check_mask_index

__all__ = ["MULTI_HEAD_ATTENTION"]

_INPUTS = ("query", "key", "value", "bias", "key_padding_mask", "attention_bias", "past_key", "past_value")


@dataclass(frozen=True)
class _Geometry:
    batch: SymbolicDim
    seq: SymbolicDim
    keys: SymbolicDim  # total key length: past + new keys
    heads: int
    sizes: tuple[int, int, int]  # hidden sizes of q, k and v
    split_kv: bool  # key and value come [B, N, L, H] already


def _geometry(ctx: NodeCtx) -> _Geometry:
    for i, what in ((8, "past_sequence_length"), (9, "cache_indirection")):
        if ctx.has_input(i):
            raise ctx.error(f"input {i} ({what}) is not supported (beam search's shared buffers)")
    if not ctx.has_input(1) or not ctx.has_input(2):
        raise ctx.error(
            "key and value are required: packed QKV/KV forms are not supported (nor by onnxruntime's CPU kernel)"
        )
    for i in (0, 1, 2, 3, 5, 6, 7):
        if ctx.has_input(i) and ctx.input_dtype(i) != DataType.FLOAT:
            raise ctx.error(f"input {i} ({_INPUTS[i]}) is {ctx.input_dtype(i).short}; expected f32")
    heads = ctx.attr_int("num_heads", 0)
    q, k, v = (ctx.input_dims(i) for i in range(3))
    if len(q) != 3 or not isinstance(q[2], int) or heads <= 0 or q[2] % heads:
        raise ctx.error(f"query must be [B, S, D] with D a multiple of num_heads {heads}; found {list(q)}")
    batch, seq, size = q
    if len(k) == 3 and len(v) == 3:
        split_kv, keys, k_size, v_size = False, k[1], k[2], v[2]
        if k[0] != batch or v[:2] != k[:2]:
            raise ctx.error(f"key [B, L, D] and value [B, L, Dv] disagree with query: {ctx.describe_inputs()}")
    elif len(k) == 4 and len(v) == 4:
        if list(k[:2]) != [batch, heads] or list(v[:3]) != list(k[:3]) or k[3] != size // heads:
            raise ctx.error(f"4-D key and value must be [B, N, L, H] with query's heads: {ctx.describe_inputs()}")
        if ctx.has_input(6) or ctx.has_input(7):
            raise ctx.error("past_key/past_value go with 3-D key and value, not with keys already split in heads")
        split_kv, keys, k_size = True, k[2], size
        v_size = heads * v[3] if isinstance(v[3], int) else v[3]
    else:
        raise ctx.error(
            f"key and value must both be 3-D or both 4-D (packed KV is not supported): {ctx.describe_inputs()}"
        )
    if not isinstance(k_size, int) or not isinstance(v_size, int) or k_size != size or v_size % heads:
        raise ctx.error(f"the key hidden size must equal query's {size} and value's split in {heads} heads")
    if ctx.has_input(3) and list(ctx.input_dims(3)) != [2 * size + v_size]:
        raise ctx.error(f"bias must be [{2 * size + v_size}] (q, k and v biases); found {list(ctx.input_dims(3))}")
    if ctx.has_input(6) != ctx.has_input(7):
        raise ctx.error("past_key and past_value come together")
    if ctx.has_input(6):
        pk, pv = ctx.input_dims(6), ctx.input_dims(7)
        if list(pk) != [batch, heads, pk[2], size // heads] or list(pv) != [batch, heads, pk[2], v_size // heads]:
            raise ctx.error(f"past_key/past_value must be [B, N, P, H] / [B, N, P, Hv]: {ctx.describe_inputs()}")
        keys = pk[2] + keys
    if ctx.has_input(4):
        if len(ctx.input_dims(4)) == 1 and ctx.input_dims(4)[0] != batch:
            raise ctx.error(f"a 1-D key_padding_mask must be [batch] (key lengths); found {list(ctx.input_dims(4))}")
        check_mask_index(ctx, 4, batch, seq, keys)
    if ctx.has_input(5):
        bias = ctx.input_dims(5)
        if len(bias) != 4 or any(d not in (1, e) for d, e in zip(bias, [batch, heads, seq, keys])):
            raise ctx.error(f"attention_bias must broadcast as [B|1, N|1, S, T]; found {list(bias)}")
    if len(ctx.node.outputs) > 3 and ctx.node.outputs[3] is not None:
        raise ctx.error("output 3 (qk, the raw scores) is not supported")
    return _Geometry(batch, seq, keys, heads, (size, k_size, v_size), split_kv)


def _infer(ctx: InferenceCtx) -> list[TensorType]:
    g = _geometry(ctx)
    out = [TensorType(DataType.FLOAT, shape_of([g.batch, g.seq, g.sizes[2]]))]
    for size in g.sizes[1:]:
        out.append(TensorType(DataType.FLOAT, shape_of([g.batch, g.heads, g.keys, size // g.heads])))
    return out


def _lower(body: Body) -> list[int | None]:
    g = _geometry(body.ctx)
    projected = [body.required(i) for i in range(3)]
    bias = body.input(3)
    if bias is not None:
        parts = body.ops("Split", bias, body.ints(list(g.sizes), "qkv_sizes"), axis=0, outputs=3)
        for i in range(1 if g.split_kv else 3):
            projected[i] = body.op("Add", projected[i], parts[i])
    q, k, v = projected
    q = split_heads(body, q, g.heads, g.sizes[0] // g.heads)
    if not g.split_kv:
        k, v = (split_heads(body, t, g.heads, s // g.heads) for t, s in ((k, g.sizes[1]), (v, g.sizes[2])))
    if body.input(6) is not None:
        k, v = body.op("Concat", body.input(6), k, axis=2), body.op("Concat", body.input(7), v, axis=2)
    mask = AttentionMask(
        mask_index=body.input(4),
        unidirectional=bool(body.ctx.attr_int("unidirectional", 0)),
        bias=body.input(5),
        filter_value=body.ctx.attr_float("mask_filter_value", -10000.0),
        past=body.input(6),
    )
    out = attend(body, q, k, v, mask, default_scale(body.ctx, g.sizes[0] // g.heads), g.sizes[2])
    return [out, k, v]


MULTI_HEAD_ATTENTION: dict[str, LoweredOp] = {"MultiHeadAttention": LoweredOp("MultiHeadAttention", _infer, _lower)}
