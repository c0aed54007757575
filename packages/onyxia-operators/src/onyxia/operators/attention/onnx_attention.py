"""ai.onnx Attention (opsets 23-25), lowered onto the streamed attention kernel (com.onyxia
ScaledDotProductAttention) rather than given a kernel of its own.

``Attention(Q, K, V, attn_mask?, past_key?, past_value?, nonpad_kv_seqlen?) -> Y, present_key?,
present_value?, qk_matmul_output?`` (onnx's defs and reference, onnx/reference/ops/op_attention.py) is, per
batch row and query head, ``softmax(softcap((q * sqrt(scale)) (k * sqrt(scale))^T) + bias) v`` with the kv
head of grouped heads shared by consecutive query heads. The lowering:

- 3-D Q/K/V ([B, S, heads * H], `q_num_heads` / `kv_num_heads`) are split into [B, N, S, H] heads by a
  Reshape and Transpose; Y goes back through the kernel's transposed output and a Reshape (a view).
- present = ``Concat(past, new, axis=2)``, exactly optimum's Concat cache, so `FuseKvCache` makes it one
  KvAppend (new rows read in their projection's layout, appended in place once the LLM session aliases
  present to past); the attention reads present.
- Everything else is ScaledDotProductAttention's attributes and inputs, so no score matrix is stored:
  q_scale = k_scale = sqrt(scale) (the spec's numerically safer split), softcap, a bool mask as bias 0 /
  -inf, the mask's last dim padded with hidden keys, is_causal and opset 25's window measured from the
  query's position (bottom-right: past length, or nonpad_kv_seqlen - S), nonpad_kv_seqlen as each row's
  key count, and the fully-masked-row guard (such a row is 0, not NaN: the spec's 1.23 errata).
- qk_matmul_output is asked of the kernel only when something reads it (its own kernel then runs).

Why a lowering, not a rewrite rule or a kernel: the node has no pattern to match (it is one node), and
every piece of it is an op with a kernel and fusions already (KvAppend, the rotary fusions ahead of q/k,
the SDPA kernels' decode/rows split). softmax_precision is accepted and met: scores are f32 throughout.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, InferenceCtx, NodeCtx, SymbolicDim, TensorType
from onyxia.core.shapes import shape_of
from onyxia.operators.family import ONYXIA_DOMAIN
from onyxia.operators.lowering import Body, LoweredOp
from onyxia.operators.typesets import FLOATS

__all__ = ["ONNX_ATTENTION"]

_Q, _K, _V, _MASK, _PAST_K, _PAST_V, _NONPAD = range(7)
_QK_OUTPUT = 3


@dataclass(frozen=True)
class _Geometry:
    rank: int  # 3 or 4
    batch: SymbolicDim
    seq: SymbolicDim
    new_keys: SymbolicDim
    past: SymbolicDim  # 0 without past_key
    heads: int
    kv_heads: int
    head_size: int
    v_size: int


def _heads(ctx: NodeCtx, i: int, heads: int, what: str) -> int:
    hidden = ctx.input_dims(i)[2]
    if heads <= 0 or not isinstance(hidden, int) or hidden % heads:
        raise ctx.error(f"3-D input {i} ({what}) has hidden size {hidden}, not a multiple of {heads} heads")
    return hidden // heads


def _geometry(ctx: NodeCtx) -> _Geometry:
    dtype = ctx.input_dtype(_Q)
    for i, what in ((_Q, "Q"), (_K, "K"), (_V, "V"), (_PAST_K, "past_key"), (_PAST_V, "past_value")):
        if ctx.has_input(i) and (ctx.input_dtype(i) != dtype or dtype not in FLOATS):
            expected = f"Q's type {dtype.short}" if dtype in FLOATS else "f32, f16 or f64 (a WebGPU storage type)"
            raise ctx.error(f"input {i} ({what}) is {ctx.input_dtype(i).short}; expected {expected}")
    ranks = [len(ctx.input_dims(i)) for i in (_Q, _K, _V)]
    if ranks not in ([3, 3, 3], [4, 4, 4]):
        raise ctx.error(f"Q, K and V must all be 3-D or all 4-D; found {ctx.describe_inputs()}")
    q, k, v = (list(ctx.input_dims(i)) for i in (_Q, _K, _V))
    heads: SymbolicDim
    kv_heads: SymbolicDim
    size: SymbolicDim
    k_size: SymbolicDim
    v_size: SymbolicDim
    if ranks[0] == 3:
        heads, kv_heads = ctx.attr_int("q_num_heads", 0), ctx.attr_int("kv_num_heads", 0)
        size, k_size = _heads(ctx, _Q, heads, "Q"), _heads(ctx, _K, kv_heads, "K")
        v_size = _heads(ctx, _V, kv_heads, "V")
        batch, seq, new_keys = q[0], q[1], k[1]
        if k[0] != batch or v[:2] != k[:2] or k_size != size:
            raise ctx.error(f"Q [B, S, N * H], K [B, L, KV * H], V [B, L, KV * Hv] disagree: {ctx.describe_inputs()}")
    else:
        batch, heads, seq, size = q
        _, kv_heads, new_keys, k_size = k
        v_size = v[3]
        if k[0] != batch or v[:3] != k[:3] or k_size != size:
            raise ctx.error(f"Q [B, N, S, H], K [B, KV, L, H], V [B, KV, L, Hv] disagree: {ctx.describe_inputs()}")
    if not (isinstance(heads, int) and isinstance(kv_heads, int) and isinstance(size, int) and isinstance(v_size, int)):
        raise ctx.error(f"head counts and sizes must be static: {ctx.describe_inputs()}")
    if min(heads, kv_heads, size, v_size) <= 0 or heads % kv_heads:
        raise ctx.error(f"q heads must be a positive multiple of kv heads: {ctx.describe_inputs()}")
    past = _past(ctx, batch, kv_heads, size, v_size)
    _check_mask(ctx)
    return _Geometry(ranks[0], batch, seq, new_keys, past, heads, kv_heads, size, v_size)


def _past(ctx: NodeCtx, batch: SymbolicDim, kv_heads: int, size: int, v_size: int) -> SymbolicDim:
    if ctx.has_input(_PAST_K) != ctx.has_input(_PAST_V):
        raise ctx.error("past_key and past_value must be given together")
    if not ctx.has_input(_PAST_K):
        return 0
    if ctx.num_inputs > _NONPAD and ctx.has_input(_NONPAD):
        raise ctx.error("nonpad_kv_seqlen (an external cache) cannot be combined with past_key/past_value")
    pk, pv = list(ctx.input_dims(_PAST_K)), list(ctx.input_dims(_PAST_V))
    if len(pk) != 4 or pk != [batch, kv_heads, pk[2], size] or pv != [batch, kv_heads, pk[2], v_size]:
        raise ctx.error(f"past_key/past_value must be [B, KV, P, H] / [B, KV, P, Hv]: {ctx.describe_inputs()}")
    return pk[2]


def _check_mask(ctx: NodeCtx) -> None:
    if ctx.has_input(_MASK) and ctx.input_dtype(_MASK) not in (DataType.BOOL, ctx.input_dtype(_Q)):
        raise ctx.error(
            f"input 3 (attn_mask) is {ctx.input_dtype(_MASK).short}; expected bool or Q's type "
            f"{ctx.input_dtype(_Q).short} (the spec's two mask kinds)"
        )
    if ctx.num_inputs > _NONPAD and ctx.has_input(_NONPAD) and ctx.input_dtype(_NONPAD) != DataType.INT64:
        raise ctx.error(f"input 6 (nonpad_kv_seqlen) is {ctx.input_dtype(_NONPAD).short}; expected i64")


def _infer(ctx: InferenceCtx) -> list[TensorType]:
    g = _geometry(ctx)
    dtype, total = ctx.input_dtype(_Q), g.past + g.new_keys
    y = [g.batch, g.seq, g.heads * g.v_size] if g.rank == 3 else [g.batch, g.heads, g.seq, g.v_size]
    return [
        TensorType(dtype, shape_of(y)),
        TensorType(dtype, shape_of([g.batch, g.kv_heads, total, g.head_size])),
        TensorType(dtype, shape_of([g.batch, g.kv_heads, total, g.v_size])),
        TensorType(dtype, shape_of([g.batch, g.heads, g.seq, total])),
    ][: max(1, ctx.num_outputs)]


def _split(body: Body, x: int, g: _Geometry, heads: int, size: int) -> int:
    """[B, S, N * H] -> [B, N, S, H] (4-D inputs are that already)."""
    if g.rank == 4:
        return x
    shaped = body.op("Reshape", x, body.ints([0, 0, heads, size], f"heads_{heads}x{size}"))
    return body.op("Transpose", shaped, perm=[0, 2, 1, 3])


def _lower(body: Body) -> list[int | None]:
    ctx = body.ctx
    g = _geometry(ctx)
    q = _split(body, body.required(_Q), g, g.heads, g.head_size)
    k = _split(body, body.required(_K), g, g.kv_heads, g.head_size)
    v = _split(body, body.required(_V), g, g.kv_heads, g.v_size)
    past_k, past_v = body.input(_PAST_K), body.input(_PAST_V)
    if past_k is not None and past_v is not None:
        k, v = body.op("Concat", past_k, k, axis=2), body.op("Concat", past_v, v, axis=2)
    mask, nonpad = body.input(_MASK), body.input(_NONPAD)
    y_and_qk = body.ops(
        "ScaledDotProductAttention",
        q,
        k,
        v,
        mask,
        nonpad,
        domain=ONYXIA_DOMAIN,
        outputs=2 if _qk_read(body) else 1,
        **_attributes(ctx, g, bool_mask=mask is not None and ctx.input_dtype(_MASK) == DataType.BOOL),
    )
    y = y_and_qk[0]
    if g.rank == 3:
        y = body.op("Reshape", y, body.ints([0, 0, g.heads * g.v_size], "merged"))
    qk = y_and_qk[1] if len(y_and_qk) > 1 else None
    return [y, k, v, qk][: len(body.node.outputs)]


def _qk_read(body: Body) -> bool:
    outputs = body.node.outputs
    if len(outputs) <= _QK_OUTPUT or outputs[_QK_OUTPUT] is None:
        return False
    t = outputs[_QK_OUTPUT]
    return body.graph.is_graph_output(t) or bool(body.graph.tensor_consumers(t))


def _attributes(ctx: NodeCtx, g: _Geometry, *, bool_mask: bool) -> dict[str, object]:
    scale = ctx.attr_float("scale", 0.0) if ctx.attr("scale") is not None else 1.0 / math.sqrt(g.head_size)
    root = float(np.sqrt(np.float32(scale)).astype(ctx.input_dtype(_Q).numpy).astype(np.float32))
    cache = g.past != 0 or (ctx.num_inputs > _NONPAD and ctx.has_input(_NONPAD))
    trim = 0 if g.past == 0 else g.new_keys - g.seq
    if not isinstance(trim, int):
        raise ctx.error(f"with past_key, K's {g.new_keys} new keys and Q's {g.seq} rows must differ by a static count")
    attrs: dict[str, object] = {"q_scale": root, "k_scale": root, "empty_rows_zero": 1, "mask_pads_keys": 1}
    attrs.update(causal=ctx.attr_int("is_causal", 0), offset_from_valid=int(cache), offset_trim=trim)
    attrs.update(window_left=ctx.attr_int("left_window_size", -1), window_right=ctx.attr_int("right_window_size", -1))
    attrs.update(transpose_output=int(g.rank == 3), qk_mode=ctx.attr_int("qk_matmul_output_mode", 0))
    if ctx.attr_float("softcap", 0.0) > 0:
        attrs["softcap"] = ctx.attr_float("softcap", 0.0)
    if bool_mask:
        attrs.update(mask_true=0.0, mask_false=float("-inf"))
    return attrs


ONNX_ATTENTION: dict[tuple[str, int, int | None], LoweredOp] = {
    ("Attention", 23, None): LoweredOp("Attention", _infer, _lower),
}
