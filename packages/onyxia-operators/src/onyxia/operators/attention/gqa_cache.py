"""GroupQueryAttention's KV-cache steps: the extended cache attention reads, and the present outputs.

Three forms, all following onyxia::kv_rows (onnxruntime's row placement):
- growing cache: one dispatch writes present = kept past rows + new rows (+ zeros), and attention
  reads present;
- in place (the session aliased present to past, batch = kv heads = 1): the dispatch binds only the
  present buffer and writes the new rows after the past ones, so a decode step costs one row, not a
  copy of the cache; binding past too would bind one buffer read-only and read-write at once;
- resident (the session's slot-addressed cache, gqa_resident): in place for any batch and kv heads,
  each batch row's new rows going into its slot at stride capacity;
- windowed (sliding_window_cache=1): the extended cache goes to scratch, since a multi-token step's
  early queries need keys the window shift drops, and a second dispatch shifts the last `capacity`
  rows into the fixed-size present.
Packed QKV binds the query buffer once and reads k and v at their column offsets (no Split).
"""

from __future__ import annotations

from collections.abc import Sequence

from onyxia.core import BufferRef, PlanCtx, SymbolicDim, ceil_div, load_wgsl
from onyxia.core.shapes import dims_product
from onyxia.operators.attention.gqa_inputs import CacheLayout, GqaInput, Heads, rotary_dim
from onyxia.operators.attention.gqa_resident import slot_binding
from onyxia.operators.layout import type_defs

__all__ = ["binding_defs", "plan_kv_cache", "rotary_plan"]

_KV_CACHE = load_wgsl(__package__, "kv_cache.wgsl")
_KV_WINDOW = load_wgsl(__package__, "kv_window.wgsl")
_WORKGROUP = 256


def binding_defs(names: Sequence[str]) -> dict[str, object]:
    """``BIND_<NAME>`` defs numbering the bindings in dispatch order (reads, then writes), so a
    shader with optional bindings needs no copy of its declarations per combination."""
    return {f"BIND_{name}": i for i, name in enumerate(names)}


def rotary_plan(ctx: PlanCtx, heads: Heads) -> tuple[dict[str, object], dict[str, SymbolicDim], list[BufferRef]]:
    """Defs, dims and cos/sin bindings shared by the cache and attention shaders (empty without do_rotary)."""
    dim = rotary_dim(ctx, heads)
    if not dim:
        return {}, {}, []
    defs: dict[str, object] = {"ROTARY": dim, "INTERLEAVED": bool(ctx.attr_int("rotary_interleaved", 0))}
    dims = {"MAX_POS": ctx.input_dims(GqaInput.COS_CACHE)[0]}
    return defs, dims, [ctx.input(GqaInput.COS_CACHE), ctx.input(GqaInput.SIN_CACHE)]


def plan_kv_cache(ctx: PlanCtx, layout: CacheLayout, prompts_only: bool = False) -> list[BufferRef]:
    """Emit the cache steps; returns the extended key and value caches attention reads. `prompts_only`: a
    one-token step dispatches no append (the fused decode kernel of gqa_decode_append writes its rows)."""
    if layout.windowed:
        ext = [_scratch(ctx, layout, layout.rows, f"extended_{name}") for name in ("key", "value")]
        _write_cache(ctx, layout, ext)
        _shift_window(ctx, layout, ext)
        return ext
    present = [
        ctx.output(i) if ctx.has_output(i) else _scratch(ctx, layout, layout.rows, f"present{i}") for i in (1, 2)
    ]
    _write_cache(ctx, layout, present, prompts_only)
    return present


def _scratch(ctx: PlanCtx, layout: CacheLayout, rows: SymbolicDim, label: str) -> BufferRef:
    n = dims_product([layout.batch, layout.heads.kv, rows, layout.heads.size])
    return ctx.alloc_scratch(n * ctx.input_dtype(GqaInput.QUERY).gpu_numpy.itemsize, label)


def _write_cache(ctx: PlanCtx, layout: CacheLayout, dst: list[BufferRef], prompts_only: bool = False) -> None:
    heads = layout.heads
    copies_past = ctx.has_input(GqaInput.PAST_KEY) and not layout.in_place
    rows = layout.rows if copies_past else layout.seq  # rows written per kv head
    n = dims_product([layout.batch, heads.kv, rows, heads.size])
    rotary_defs, rotary_dims, rotary_reads = rotary_plan(ctx, heads)
    past = [ctx.input(GqaInput.PAST_KEY), ctx.input(GqaInput.PAST_VALUE)] if copies_past else []
    new = [ctx.input(GqaInput.QUERY)] if heads.packed else [ctx.input(GqaInput.KEY), ctx.input(GqaInput.VALUE)]
    slot_names, slot_reads, slot_defs = slot_binding(layout.resident)
    names = [
        *(["NEW_QKV"] if heads.packed else ["NEW_K", "NEW_V"]),
        "SEQLENS",
        *(["PAST_K", "PAST_V"] if past else []),
        *(["COS", "SIN"] * bool(rotary_reads)),
        *slot_names,
    ]
    defs = {
        **slot_defs,
        **type_defs(T=ctx.input_dtype(GqaInput.QUERY), SEQLENS_T=ctx.input_dtype(GqaInput.SEQLENS_K)),
        **binding_defs([*names, "DST_K", "DST_V"]),
        **{"WORKGROUP_SIZE": _WORKGROUP, **rotary_defs},
        **{"NEW_STRIDE": heads.kv_stride, "K_OFFSET": heads.k_offset, "V_OFFSET": heads.v_offset},
    }
    if past:
        defs["PAST"] = True
    if heads.packed:
        defs["PACKED"] = True
    dims = {"N": n, "KV_HEADS": heads.kv, "HEAD_SIZE": heads.size, "SEQ": layout.seq, **rotary_dims}
    dims.update(PAST_ROWS=layout.past, DST_ROWS=layout.rows)
    shader = ctx.compile_shader("attention/kv_cache", _KV_CACHE, defs, dims)
    reads = [*new, ctx.input(GqaInput.SEQLENS_K), *past, *rotary_reads, *slot_reads]
    groups = ceil_div(n, _WORKGROUP) * (1 - 2 // (layout.seq + 1)) if prompts_only else ceil_div(n, _WORKGROUP)
    if groups != 0:  # statically 0 for a static one-token step with prompts_only
        ctx.dispatch(shader, reads, dst, groups)


def _shift_window(ctx: PlanCtx, layout: CacheLayout, ext: list[BufferRef]) -> None:
    """present = the last min(valid, capacity) rows of the extended cache, left-aligned."""
    if not (ctx.has_output(1) or ctx.has_output(2)):
        return
    heads = layout.heads
    n = dims_product([layout.batch, heads.kv, layout.past, heads.size])
    present = [
        ctx.output(i) if ctx.has_output(i) else _scratch(ctx, layout, layout.past, f"present{i}") for i in (1, 2)
    ]
    defs = {
        **type_defs(T=ctx.input_dtype(GqaInput.QUERY), SEQLENS_T=ctx.input_dtype(GqaInput.SEQLENS_K)),
        "WORKGROUP_SIZE": _WORKGROUP,
    }
    dims = {"N": n, "KV_HEADS": heads.kv, "HEAD_SIZE": heads.size, "SEQ": layout.seq}
    dims.update(CAPACITY=layout.past, EXT_ROWS=layout.rows)
    shader = ctx.compile_shader("attention/kv_window", _KV_WINDOW, defs, dims)
    ctx.dispatch(shader, [*ext, ctx.input(GqaInput.SEQLENS_K)], present, ceil_div(n, _WORKGROUP))
