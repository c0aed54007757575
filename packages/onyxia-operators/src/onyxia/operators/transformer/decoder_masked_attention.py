"""com.microsoft DecoderMaskedMultiHeadAttention: one decoding step (query length 1) over a KV cache
buffer of fixed capacity, or cross-attention over keys already split in heads.

``DecoderMaskedMultiHeadAttention(query [B, 1, D], key, value, mask_index?, attention_bias?,
past_key?, past_value?, past_sequence_length?, beam_width?, cache_indirection?, bias?)``, as
onnxruntime 1.32's CPU kernel runs it (decoder_masked_multihead_attention.cc; measured):

- self-attention (``past_present_share_buffer`` = 1, which that kernel requires): key and value are
  [B, 1, D] / [B, 1, Dv] (plus their bias slices); past_key/past_value are [B, N, M, H] buffers of
  M positions of which the first P = past_sequence_length are filled. present = the buffer with
  the new key/value written at row P; attention reads keys 0..P. A mask_index [B, P + 1] (raw 0/1,
  ``mask_filter_value``) or an attention_bias [B|1, N|1, 1, P + 1] gives that length as a shape, so
  the keys are the present's first P + 1 rows; without either, all M rows are read and those past P
  get float32's lowest (their softmax weight is exactly 0, as if not read).
- cross-attention: key and value [B, N, L, H] as given (the bias applies to the query only).

Lowered to the MultiHeadAttention pieces: the write at P is a Where over the buffer's positions, and
the attention is the one ScaledDotProductAttention. Beam search (beam_width, cache_indirection)
and the qk output are refused by name.
"""

from __future__ import annotations

import numpy as np

from onyxia.core import DataType, InferenceCtx, TensorType
from onyxia.core.context import NodeCtx
from onyxia.core.shapes import shape_of
from onyxia.operators.lowering import Body, LoweredOp
from onyxia.operators.transformer.attention import attend, default_scale, sdpa, split_heads
from onyxia.operators.transformer.masks import AttentionMask, check_mask_index

__all__ = ["DECODER_MASKED_MHA"]


def _check(ctx: NodeCtx) -> tuple[bool, int, int]:
    """(self-attention?, heads, value hidden size), after onnxruntime's checks."""
    for i, what in ((8, "beam_width"), (9, "cache_indirection")):
        if ctx.has_input(i):
            raise ctx.error(f"input {i} ({what}) is not supported (beam search)")
    if ctx.attr_int("output_qk", 0):
        raise ctx.error("output_qk=1 is not supported")
    for i in (0, 1, 2, 4, 5, 6, 10):
        if ctx.has_input(i) and ctx.input_dtype(i) != DataType.FLOAT:
            raise ctx.error(f"input {i} is {ctx.input_dtype(i).short}; expected f32")
    heads, q = ctx.attr_int("num_heads", 0), ctx.input_dims(0)
    if len(q) != 3 or q[1] != 1 or not isinstance(q[2], int) or heads <= 0 or q[2] % heads:
        raise ctx.error(f"query must be [B, 1, D] with D a multiple of num_heads {heads}; found {list(q)}")
    if not ctx.has_input(1) or not ctx.has_input(2):
        raise ctx.error("key and value are required")
    k, v = ctx.input_dims(1), ctx.input_dims(2)
    self_attention = len(k) == 3
    if self_attention:
        if not ctx.attr_int("past_present_share_buffer", 0):
            raise ctx.error("self-attention needs past_present_share_buffer=1 (onnxruntime's CPU kernel requires it)")
        if list(k) != list(q) or len(v) != 3 or v[:2] != k[:2] or not isinstance(v[2], int):
            raise ctx.error(f"key must be [B, 1, D] like query and value [B, 1, Dv]: {ctx.describe_inputs()}")
        v_size = v[2]
        if not all(ctx.has_input(i) for i in (5, 6, 7)):
            raise ctx.error("self-attention needs past_key, past_value and past_sequence_length (inputs 5 to 7)")
        pk, pv = ctx.input_dims(5), ctx.input_dims(6)
        if list(pk) != [q[0], heads, pk[2], q[2] // heads] or list(pv) != [q[0], heads, pk[2], v_size // heads]:
            raise ctx.error(f"past_key/past_value must be [B, N, M, H] buffers: {ctx.describe_inputs()}")
        if ctx.input_dtype(7) != DataType.INT32 or len(ctx.input_dims(7)) > 1:
            raise ctx.error("past_sequence_length must be one int32")
    else:
        if len(k) != 4 or list(k[:2]) != [q[0], heads] or k[3] != q[2] // heads or list(v[:3]) != list(k[:3]):
            raise ctx.error(f"cross-attention key/value must be [B, N, L, H]: {ctx.describe_inputs()}")
        if not isinstance(v[3], int) or ctx.has_input(5) or ctx.has_input(6):
            raise ctx.error("cross-attention takes no past_key/past_value (and a static value head size)")
        v_size = heads * v[3]
    if ctx.has_input(10) and list(ctx.input_dims(10)) != [2 * q[2] + v_size]:
        raise ctx.error(f"bias must be [{2 * q[2] + v_size}]; found {list(ctx.input_dims(10))}")
    if ctx.has_input(3):
        total = ctx.input_dims(3)[-1] if self_attention else k[2]
        if len(ctx.input_dims(3)) != 2:
            raise ctx.error(f"mask_index must be [B, T] (raw 0/1); found {list(ctx.input_dims(3))}")
        check_mask_index(ctx, 3, q[0], 1, total)
    if ctx.has_input(4) and (len(ctx.input_dims(4)) != 4 or ctx.input_dims(4)[2] != 1):
        raise ctx.error(f"attention_bias must be [B|1, N|1, 1, T]; found {list(ctx.input_dims(4))}")
    return self_attention, heads, v_size


def _infer(ctx: InferenceCtx) -> list[TensorType]:
    self_attention, _, v_size = _check(ctx)
    q = ctx.input_dims(0)
    out = [TensorType(DataType.FLOAT, shape_of([q[0], 1, v_size]))]
    if self_attention:
        out += [TensorType(DataType.FLOAT, ctx.input_shape(i)) for i in (5, 6)]
    return out


def _write_row(body: Body, buffer: int, row: int, step: int) -> int:
    """`buffer` [B, N, M, H] with row `step` (int64 scalar) replaced by `row` [B, N, 1, H]."""
    capacity = body.op("Gather", body.op("Shape", buffer), body.const(np.int64(2), "seq_axis"), axis=0)
    positions = body.op("Range", body.const(np.int64(0), "zero"), capacity, body.const(np.int64(1), "one"))
    at = body.op("Equal", body.op("Unsqueeze", positions, body.ints([1], "axes")), step)
    return body.op("Where", at, row, buffer)


def _lower(body: Body) -> list[int | None]:
    self_attention, heads, v_size = _check(body.ctx)
    size = body.ctx.input_dims(0)[2]
    assert isinstance(size, int)
    q, k, v = (body.required(i) for i in range(3))
    bias = body.input(10)
    if bias is not None:
        parts = body.ops("Split", bias, body.ints([size, size, v_size], "qkv_sizes"), axis=0, outputs=3)
        q = body.op("Add", q, parts[0])
        if self_attention:
            k, v = body.op("Add", k, parts[1]), body.op("Add", v, parts[2])
    q = split_heads(body, q, heads, size // heads)
    scale = default_scale(body.ctx, size // heads)
    mask = AttentionMask(
        mask_index=body.input(3), bias=body.input(4), filter_value=body.ctx.attr_float("mask_filter_value", -10000.0)
    )
    if not self_attention:
        return [attend(body, q, k, v, mask, scale, v_size)]
    step = body.op("Cast", body.required(7), to=int(DataType.INT64))
    k, v = split_heads(body, k, heads, size // heads), split_heads(body, v, heads, v_size // heads)
    present_k, present_v = _write_row(body, body.required(5), k, step), _write_row(body, body.required(6), v, step)
    length_from = body.input(3) if body.input(3) is not None else body.input(4)
    if length_from is not None:  # T = P + 1 is that input's last dim: read the present's first T rows
        axis = len(body.ctx.input_dims(3 if body.input(3) is not None else 4)) - 1
        total = body.op("Shape", length_from, start=axis, end=axis + 1)
        zero, seq_axis = body.ints([0], "start"), body.ints([2], "seq_axis_1d")
        keys, values = (body.op("Slice", t, zero, total, seq_axis) for t in (present_k, present_v))
        return [attend(body, q, keys, values, mask, scale, v_size), present_k, present_v]
    capacity = body.op("Gather", body.op("Shape", present_k), body.const(np.int64(2), "seq_axis"), axis=0)
    positions = body.op("Range", body.const(np.int64(0), "zero"), capacity, body.const(np.int64(1), "one"))
    filled = body.op("LessOrEqual", positions, step)
    lowest = float(np.finfo(np.float32).min)
    out = sdpa(body, q, present_k, present_v, filled, {"mask_true": 0.0, "mask_false": lowest}, scale, v_size)
    return [out, present_k, present_v]


DECODER_MASKED_MHA: dict[str, LoweredOp] = {
    "DecoderMaskedMultiHeadAttention": LoweredOp("DecoderMaskedMultiHeadAttention", _infer, _lower)
}
