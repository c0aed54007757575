"""com.microsoft GroupQueryAttention (onnxruntime's contrib op), prefill with an empty past.

Exported decoders (onnxruntime-genai, optimum with GQA fusion) put the whole attention block in
this one node: q/k/v projections in BSNH, rotary embedding, a causal mask, and the KV cache in BNSH.
The semantics follow onnxruntime's CPU kernel, checked against it: `local_window_size` w lets query
i see keys j with i - j < w, right padding (seqlens_k[b] + 1 < S) hides keys past the real length,
rotary positions are 0..S-1 (padded rows included), and scale 0 means 1/sqrt(head_size).

Two dispatches: kv_cache writes present_key/value (keys rotated), then attention reads keys and
values from there. That is also the shape of the KV-cache form still to come: with a past, the
first dispatch appends to it and the second already reads the whole present cache.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from onyxia.core import (
    BufferRef,
    DataType,
    FoldCtx,
    InferenceCtx,
    PlanCtx,
    SymbolicDim,
    TensorType,
    ceil_div,
    load_wgsl,
)
from onyxia.core.shapes import dims_product, shape_of
from onyxia.operators.attention.gqa_inputs import GqaInput, Heads, heads_of, reject_unsupported, rotary_dim, unsupported
from onyxia.operators.layout import type_defs
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["GroupQueryAttentionOp"]

_ATTENTION = load_wgsl(__package__, "gqa.wgsl")
_KV_CACHE = load_wgsl(__package__, "kv_cache.wgsl")
_WORKGROUP = 16  # query rows per workgroup (one invocation each)
_COPY_WORKGROUP = 256


@dataclass(frozen=True)
class GroupQueryAttentionOp:
    name: str = "GroupQueryAttention"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        reject_unsupported(ctx)
        heads = heads_of(ctx)
        rotary_dim(ctx, heads)  # validates the caches
        dtype = ctx.input_dtype(GqaInput.QUERY)
        batch, seq, _ = ctx.input_dims(GqaInput.QUERY)
        past = ctx.input_dims(GqaInput.PAST_KEY)[2] if ctx.has_input(GqaInput.PAST_KEY) else 0
        present = TensorType(dtype, shape_of([batch, heads.kv, past + seq, heads.size]))  # type: ignore[operator]
        return [TensorType(dtype, ctx.input_shape(GqaInput.QUERY)), present, present]

    def try_fold(self, ctx: FoldCtx) -> None:
        return None  # attention over constant activations does not occur in exported models

    def plan(self, ctx: PlanCtx) -> None:
        require_dtype(ctx, ctx.input_dtype(GqaInput.QUERY), FLOATS)
        past = ctx.input_dims(GqaInput.PAST_KEY)[2] if ctx.has_input(GqaInput.PAST_KEY) else 0
        if past != 0:
            raise unsupported(
                ctx,
                f"past_key has sequence length {past}; only an empty past (prefill) is implemented so far "
                "(hint: compile with the past length dim bound to 0)",
            )
        heads = heads_of(ctx)
        batch, seq, _ = ctx.input_dims(GqaInput.QUERY)
        if dims_product([batch, seq]) == 0:
            return  # empty output and caches
        present = _plan_kv_cache(ctx, heads)
        _plan_attention(ctx, heads, present)


def _rotary(ctx: PlanCtx, heads: Heads) -> tuple[dict[str, object], dict[str, SymbolicDim], list[BufferRef]]:
    """Defs, dims and cos/sin bindings shared by both shaders (all empty without do_rotary)."""
    dim = rotary_dim(ctx, heads)
    if not dim:
        return {}, {}, []
    defs = {"ROTARY": dim, "INTERLEAVED": bool(ctx.attr_int("rotary_interleaved", 0))}
    dims = {"MAX_POS": ctx.input_dims(GqaInput.COS_CACHE)[0]}
    return defs, dims, [ctx.input(GqaInput.COS_CACHE), ctx.input(GqaInput.SIN_CACHE)]


def _plan_kv_cache(ctx: PlanCtx, heads: Heads) -> list[BufferRef]:
    """present_key/value = the new k/v in BNSH, keys rotated; an absent output gets a scratch buffer,
    since attention reads the cache from there. Returns the two cache buffers."""
    batch, seq, _ = ctx.input_dims(GqaInput.QUERY)
    total = seq  # empty past
    n = dims_product([batch, heads.kv, total, heads.size])
    dtype = ctx.input_dtype(GqaInput.KEY)
    nbytes = n * dtype.gpu_numpy.itemsize  # type: ignore[operator]
    caches = [ctx.output(i) if ctx.has_output(i) else ctx.alloc_scratch(nbytes, f"present{i}") for i in (1, 2)]
    rotary_defs, rotary_dims, rotary_reads = _rotary(ctx, heads)
    defs = {**type_defs(T=dtype), "WORKGROUP_SIZE": _COPY_WORKGROUP, **rotary_defs}
    dims = {"N": n, "KV_HEADS": heads.kv, "TOTAL": total, "SEQ": seq, "HEAD_SIZE": heads.size, **rotary_dims}
    shader = ctx.compile_shader("attention/kv_cache", _KV_CACHE, defs, dims)
    reads = [ctx.input(GqaInput.KEY), ctx.input(GqaInput.VALUE), *rotary_reads]
    ctx.dispatch(shader, reads, caches, ceil_div(n, _COPY_WORKGROUP))
    return caches


def _plan_attention(ctx: PlanCtx, heads: Heads, present: list[BufferRef]) -> None:
    dtype: DataType = ctx.input_dtype(GqaInput.QUERY)
    batch, seq, _ = ctx.input_dims(GqaInput.QUERY)
    scale = ctx.attr_float("scale", 0.0) or 1.0 / math.sqrt(heads.size)
    rotary_defs, rotary_dims, rotary_reads = _rotary(ctx, heads)
    defs: dict[str, object] = {
        **type_defs(T=dtype, SEQLENS_T=ctx.input_dtype(GqaInput.SEQLENS_K)),
        **{"WORKGROUP_SIZE": _WORKGROUP, "HEAD_SIZE": heads.size, "NUM_HEADS": heads.num},
        **{"GROUP": heads.num // heads.kv, "SCALE": _f32(scale), **rotary_defs},
    }
    softcap = ctx.attr_float("softcap", 0.0)
    if softcap > 0:
        defs["SOFTCAP"] = _f32(softcap)
    window = ctx.attr_int("local_window_size", -1)
    if window > 0:
        defs["WINDOW"] = window
    shader = ctx.compile_shader("attention/gqa", _ATTENTION, defs, {"SEQ": seq, "TOTAL": seq, **rotary_dims})
    reads = [ctx.input(GqaInput.QUERY), *present, ctx.input(GqaInput.SEQLENS_K), *rotary_reads]
    ctx.dispatch(shader, reads, [ctx.output(0)], (ceil_div(seq, _WORKGROUP), heads.num, batch))


def _f32(value: float) -> str:
    """A WGSL f32 literal that round-trips `value` (repr keeps every significant digit)."""
    return f"f32({float(value)!r})"
