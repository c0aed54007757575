"""com.microsoft GroupQueryAttention (onnxruntime's contrib op): prefill, decode and continuation
over a growing, in-place or windowed KV cache.

Exported decoders (onnxruntime-genai, optimum with GQA fusion, onnx-community) put the whole
attention block in this one node: q/k/v projections in BSNH, rotary embedding, a causal mask, and
the KV cache in BNSH. The semantics follow onnxruntime 1.31's CPU kernel, checked against it:
seqlens_k[b] + 1 is batch row b's valid length, the new tokens take the positions just before it
(rotary positions too; a first prompt's right padding starts at 0), `local_window_size` w lets the
query at position p see keys j with p - j < w, padded keys stay hidden, and scale 0 means
1/sqrt(head_size). The row placement lives in one WGSL module (onyxia::kv_rows) that every
kernel imports, and the bindings and functions they share (query, seqlens_k and its check, rotary, softcap,
output, a one-token step's new rows) in another (onyxia::gqa_io). Packed QKV (key and value empty) is read from the query buffer with the row
stride and column offsets `Heads` gives (static defs), so it costs no extra dispatch.

Two steps: gqa_cache writes the extended cache (kept past rows + new rows, keys rotated), then
attention reads it: gqa_prefill's kernel for prompts (the rows kernel where its shape does not apply), a
workgroup-per-head kernel for one-token steps. Over an
in-place cache a one-token step is one step: the append runs inside the decode kernel (gqa_decode_append).
The LLM session's resident cache (gqa_resident: onnxruntime's past_present_share_buffer, each batch row in
its own slot) is in place for any batch and kv heads, through the same kernels with one def more.
With a symbolic sequence length both are planned, and their workgroup counts pick one at run time
(2 // (seq + 1) is 1 for seq = 1 and 0 above), so prefill and decode share one plan.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import ClassVar

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
from onyxia.core.plan_ctx import ErrorSlotUse
from onyxia.core.shapes import dims_product, shape_of
from onyxia.operators.attention.gqa_cache import binding_defs, plan_kv_cache, rotary_plan
from onyxia.operators.attention.gqa_decode_append import appends_in_decode, plan_decode_append, seqlens_check
from onyxia.operators.attention.gqa_inputs import (
    CacheLayout,
    GqaInput,
    cache_layout,
    heads_of,
    reject_unsupported,
    rotary_dim,
)
from onyxia.operators.attention.gqa_prefill import plan_prefill
from onyxia.operators.attention.gqa_resident import check_share_buffer, resident_cache, shares_buffer, slot_binding
from onyxia.operators.int64_checks import checked_defs
from onyxia.operators.layout import node_literal, type_defs
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["GroupQueryAttentionOp"]

_ATTENTION = load_wgsl(__package__, "gqa.wgsl")
_ROWS_WORKGROUP = 16  # query rows per workgroup (one invocation each)
_DECODE_WORKGROUP = 64  # invocations splitting one query row's keys


@dataclass(frozen=True)
class GroupQueryAttentionOp:
    name: str = "GroupQueryAttention"
    appends_in_place: ClassVar[bool] = True  # with present aliased to past, plan() writes only the new rows

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        reject_unsupported(ctx)
        check_share_buffer(ctx)
        heads = heads_of(ctx)
        rotary_dim(ctx, heads)  # validates the caches
        dtype = ctx.input_dtype(GqaInput.QUERY)
        batch, seq, _ = ctx.input_dims(GqaInput.QUERY)
        past = ctx.input_dims(GqaInput.PAST_KEY)[2] if ctx.has_input(GqaInput.PAST_KEY) else 0
        # a fixed-size present: onnxruntime-genai's windowed cache, or the session's shared buffer (gqa_resident)
        fixed = ctx.attr_int("sliding_window_cache", 0) or shares_buffer(ctx)
        rows = past if fixed else past + seq
        present = TensorType(dtype, shape_of([batch, heads.kv, rows, heads.size]))
        output = shape_of([batch, seq, heads.num * heads.size]) if heads.packed else ctx.input_shape(GqaInput.QUERY)
        return [TensorType(dtype, output), present, present]

    def try_fold(self, ctx: FoldCtx) -> None:
        return None  # attention over constant activations does not occur in exported models

    def plan(self, ctx: PlanCtx) -> None:
        require_dtype(ctx, ctx.input_dtype(GqaInput.QUERY), FLOATS)
        shares = (ctx.shares_storage(GqaInput.PAST_KEY, 1), ctx.shares_storage(GqaInput.PAST_VALUE, 2))
        layout = cache_layout(ctx, shares, resident_cache(ctx))
        if dims_product([layout.batch, layout.seq]) == 0:
            return  # empty output; the caches keep their past
        cache = plan_kv_cache(ctx, layout, prompts_only=appends_in_decode(layout))
        _plan_attention(ctx, layout, cache)


def _plan_attention(ctx: PlanCtx, layout: CacheLayout, cache: list[BufferRef]) -> None:
    heads, seq = layout.heads, layout.seq
    scale = ctx.attr_float("scale", 0.0) or 1.0 / math.sqrt(heads.size)
    rotary_defs, rotary_dims, rotary_reads = rotary_plan(ctx, heads)
    slot_names, slot_reads, slot_defs = slot_binding(layout.resident)
    reads = [ctx.input(GqaInput.QUERY), *cache, ctx.input(GqaInput.SEQLENS_K), *rotary_reads, *slot_reads]
    names = ["Q", "K", "V", "SEQLENS", *(["COS", "SIN"] * bool(rotary_reads)), *slot_names, "OUT"]
    defs: dict[str, object] = {
        **slot_defs,
        **type_defs(T=ctx.input_dtype(GqaInput.QUERY), SEQLENS_T=ctx.input_dtype(GqaInput.SEQLENS_K)),
        **{"HEAD_SIZE": heads.size, "NUM_HEADS": heads.num, "GROUP": heads.num // heads.kv, "Q_STRIDE": heads.q_stride},
        **{
            "SCALE": node_literal(ctx, DataType.FLOAT, scale, "attribute 'scale'"),
            "WINDOW": max(ctx.attr_int("local_window_size", -1), 0),
            **rotary_defs,
        },
    }
    softcap = ctx.attr_float("softcap", 0.0)
    if softcap > 0:
        defs["SOFTCAP"] = node_literal(ctx, DataType.FLOAT, softcap, "attribute 'softcap'")
    dims = {"SEQ": seq, "KV_ROWS": layout.rows, "PAST_ROWS": layout.past, **rotary_dims}
    errors = seqlens_check(ctx, layout)
    immediates = None if errors is None else errors.immediates
    writes = [] if errors is None else [errors.ref]
    decode = 2 // (seq + 1)  # 1 for a one-token step, 0 for longer ones
    if decode != 0:  # statically known to be 0 for a static prompt length above 1
        lanes = min(heads.size, _DECODE_WORKGROUP)
        decode_defs = {**defs, **binding_defs([*names, "SCORES"]), "DECODE": True, "WORKGROUP_SIZE": _DECODE_WORKGROUP}
        decode_defs.update(checked_defs(errors, len(names) + 1))
        decode_defs.update(DIM_LANES=lanes, KEY_GROUPS=_DECODE_WORKGROUP // lanes)
        if appends_in_decode(layout):
            plan_decode_append(ctx, layout, decode_defs, dims, cache, decode, errors)
        else:
            shader = ctx.compile_shader("attention/gqa_decode", _ATTENTION, decode_defs, dims, immediates)
            scores = ctx.alloc_scratch(dims_product([layout.batch, heads.num, layout.rows, 4]), "scores")
            ctx.dispatch(shader, reads, [ctx.output(0), scores, *writes], (decode, heads.num, layout.batch))
    _plan_rows(ctx, layout, {**defs, **checked_defs(errors, len(names))}, names, reads, dims, decode, errors)


def _plan_rows(
    ctx: PlanCtx,
    layout: CacheLayout,
    defs: dict[str, object],
    names: list[str],
    reads: list[BufferRef],
    dims: dict[str, SymbolicDim],
    decode: SymbolicDim,
    errors: ErrorSlotUse | None,
) -> None:
    """The prompt kernel (gqa_prefill), or where its shape does not apply the rows kernel, for steps of more
    than one token (none when the step is statically one token)."""
    if plan_prefill(ctx, layout, defs, names, reads, dims, 1 - decode, errors):
        return
    rows_groups = ceil_div(layout.seq, _ROWS_WORKGROUP) * (1 - decode)
    if rows_groups != 0:
        rows_defs = {**defs, **binding_defs(names), "WORKGROUP_SIZE": _ROWS_WORKGROUP}
        shader = ctx.compile_shader(
            "attention/gqa", _ATTENTION, rows_defs, dims, None if errors is None else errors.immediates
        )
        writes = [ctx.output(0)] if errors is None else [ctx.output(0), errors.ref]
        ctx.dispatch(shader, reads, writes, (rows_groups, layout.heads.num, layout.batch))
