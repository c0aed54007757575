"""com.microsoft GroupQueryAttention (onnxruntime's contrib op), prefill with an empty past.

Exported decoders (onnxruntime-genai, optimum with GQA fusion) put the whole attention block in
this one node: q/k/v projections in BSNH, a causal mask, and the KV cache in BNSH. The semantics
follow onnxruntime's CPU kernel, checked against it: `local_window_size` w lets query i see keys j
with i - j < w, right padding (seqlens_k[b] + 1 < S) hides keys past the real length, and scale 0
means 1/sqrt(head_size).

Inputs are addressed by index (the `_Input` names) so the KV-cache form can be added without
reshuffling: with a past, the kv_cache shader will append to it and attention will read the
present cache through the same stride dims it uses for the BSNH inputs now.
"""

from __future__ import annotations

import enum
import math
from dataclasses import dataclass

from onyxia.core import DataType, InferenceCtx, NodeCtx, PlanCtx, TensorType, UnsupportedOpError, ceil_div, load_wgsl
from onyxia.core.shapes import dims_product, shape_of
from onyxia.operators.layout import type_defs
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["GroupQueryAttentionOp"]

_ATTENTION = load_wgsl(__package__, "gqa.wgsl")
_KV_CACHE = load_wgsl(__package__, "kv_cache.wgsl")
_WORKGROUP = 16
_COPY_WORKGROUP = 256


class _Input(enum.IntEnum):
    QUERY = 0
    KEY = 1
    VALUE = 2
    PAST_KEY = 3
    PAST_VALUE = 4
    SEQLENS_K = 5
    TOTAL_SEQUENCE_LENGTH = 6
    COS_CACHE = 7
    SIN_CACHE = 8
    POSITION_IDS = 9
    ATTENTION_BIAS = 10
    HEAD_SINK = 11


_UNSUPPORTED_INPUTS = (_Input.POSITION_IDS, _Input.ATTENTION_BIAS, _Input.HEAD_SINK)


@dataclass(frozen=True)
class _Heads:
    num: int
    kv: int
    size: int


@dataclass(frozen=True)
class GroupQueryAttentionOp:
    name: str = "GroupQueryAttention"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        _reject_unsupported(ctx)
        heads = _heads(ctx)
        dtype = ctx.input_dtype(_Input.QUERY)
        batch, seq, _ = ctx.input_dims(_Input.QUERY)
        past = ctx.input_dims(_Input.PAST_KEY)[2] if ctx.has_input(_Input.PAST_KEY) else 0
        present = shape_of([batch, heads.kv, past + seq, heads.size])  # type: ignore[operator]
        return [
            TensorType(dtype, ctx.input_shape(_Input.QUERY)),
            TensorType(dtype, present),
            TensorType(dtype, present),
        ]

    def try_fold(self, ctx: object) -> None:
        return None  # attention over constant activations does not occur in exported models

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(_Input.QUERY)
        require_dtype(ctx, dtype, FLOATS)
        if ctx.has_input(_Input.PAST_KEY) and ctx.input_dims(_Input.PAST_KEY)[2] != 0:
            raise _unsupported(
                ctx,
                f"past_key has sequence length {ctx.input_dims(_Input.PAST_KEY)[2]}; only an empty past (prefill) is "
                "implemented so far (hint: compile with the past length dim bound to 0)",
            )
        heads = _heads(ctx)
        batch, seq, _ = ctx.input_dims(_Input.QUERY)
        if dims_product([batch, seq]) == 0:
            return  # empty output and caches
        _plan_kv_cache(ctx, heads)
        _plan_attention(ctx, heads, dtype)


def _plan_kv_cache(ctx: PlanCtx, heads: _Heads) -> None:
    """present_key/value = the new k/v in BNSH (an absent output gets a scratch buffer instead)."""
    if not (ctx.has_output(1) or ctx.has_output(2)):
        return
    batch, seq, _ = ctx.input_dims(_Input.QUERY)
    total = seq  # empty past
    n = dims_product([batch, heads.kv, total, heads.size])
    dtype = ctx.input_dtype(_Input.KEY)
    targets = [
        ctx.output(i) if ctx.has_output(i) else ctx.alloc_scratch(n * dtype.gpu_numpy.itemsize, f"present{i}")
        for i in (1, 2)
    ]  # type: ignore[operator]
    defs = {**type_defs(T=dtype), "WORKGROUP_SIZE": _COPY_WORKGROUP}
    dims = {"N": n, "KV_HEADS": heads.kv, "TOTAL": total, "SEQ": seq, "HEAD_SIZE": heads.size}
    shader = ctx.compile_shader("attention/kv_cache", _KV_CACHE, defs, dims)
    ctx.dispatch(shader, [ctx.input(_Input.KEY), ctx.input(_Input.VALUE)], targets, ceil_div(n, _COPY_WORKGROUP))


def _plan_attention(ctx: PlanCtx, heads: _Heads, dtype: DataType) -> None:
    batch, seq, _ = ctx.input_dims(_Input.QUERY)
    scale = ctx.attr_float("scale", 0.0) or 1.0 / math.sqrt(heads.size)
    defs: dict[str, object] = {
        **type_defs(T=dtype, SEQLENS_T=ctx.input_dtype(_Input.SEQLENS_K)),
        **{"WORKGROUP_SIZE": _WORKGROUP, "HEAD_SIZE": heads.size},
        **{"NUM_HEADS": heads.num, "GROUP": heads.num // heads.kv, "SCALE": _f32(scale)},
    }
    softcap = ctx.attr_float("softcap", 0.0)
    if softcap > 0:
        defs["SOFTCAP"] = _f32(softcap)
    window = ctx.attr_int("local_window_size", -1)
    if window > 0:
        defs["WINDOW"] = window
    kv_row = heads.kv * heads.size  # BSNH: consecutive positions are one row of all kv heads apart
    dims = {"SEQ": seq, "KV_BATCH_STRIDE": seq * kv_row, "KV_HEAD_STRIDE": heads.size, "KV_SEQ_STRIDE": kv_row}
    shader = ctx.compile_shader("attention/gqa", _ATTENTION, defs, dims)  # type: ignore[arg-type]
    reads = [ctx.input(i) for i in (_Input.QUERY, _Input.KEY, _Input.VALUE, _Input.SEQLENS_K)]
    ctx.dispatch(shader, reads, [ctx.output(0)], (ceil_div(seq, _WORKGROUP), heads.num, batch))


def _heads(ctx: NodeCtx) -> _Heads:
    num, kv = ctx.attr_int("num_heads"), ctx.attr_int("kv_num_heads")
    if num <= 0 or kv <= 0 or num % kv:
        raise ctx.error(f"num_heads ({num}) must be a positive multiple of kv_num_heads ({kv})")
    q_dims, k_dims = ctx.input_dims(_Input.QUERY), ctx.input_dims(_Input.KEY)
    if len(q_dims) != 3 or len(k_dims) != 3:
        raise ctx.error("query and key must be 3-D [batch, sequence, heads * head_size]")
    hidden, kv_hidden = q_dims[2], k_dims[2]
    if not isinstance(hidden, int) or hidden % num:
        raise ctx.error(f"query hidden size {hidden} must be a static multiple of num_heads ({num})")
    size = hidden // num
    if kv_hidden != kv * size:
        raise ctx.error(f"key hidden size {kv_hidden} must be kv_num_heads * head_size = {kv} * {size}")
    if ctx.input_dims(_Input.VALUE) != k_dims:
        raise ctx.error(f"value shape {list(ctx.input_dims(_Input.VALUE))} must equal key shape {list(k_dims)}")
    return _Heads(num, kv, size)


def _reject_unsupported(ctx: NodeCtx) -> None:
    if not ctx.has_input(_Input.KEY):
        raise _unsupported(ctx, "packed QKV (key and value absent) is not implemented; export with separate q/k/v")
    for attr in ("do_rotary", "smooth_softmax"):
        if ctx.attr_int(attr, 0):
            raise _unsupported(ctx, f"attribute {attr}=1 is not implemented")
    for index in _UNSUPPORTED_INPUTS:
        if ctx.has_input(index):
            raise _unsupported(ctx, f"input {int(index)} ({index.name.lower()}) is not implemented")
    if ctx.num_outputs > 3 and ctx.has_output(3):
        raise _unsupported(ctx, "output 3 (output_qk) is not implemented")
    if ctx.has_input(_Input.PAST_KEY) != ctx.has_input(_Input.PAST_VALUE):
        raise ctx.error("past_key and past_value must be given together")


def _unsupported(ctx: NodeCtx, message: str) -> UnsupportedOpError:
    return UnsupportedOpError(f"node '{ctx.node.name}' (GroupQueryAttention, domain com.microsoft): {message}")


def _f32(value: float) -> str:
    """A WGSL f32 literal that round-trips `value` (repr keeps every significant digit)."""
    return f"f32({float(value)!r})"
