"""GroupQueryAttention's one-token step over an in-place cache as one dispatch: the KV append folded into the
decode attention kernel (gqa_decode_append.wgsl).

Unfused, a decode step is two dispatches: kv_cache.wgsl appends the new (rotated) key and value rows, then
gqa.wgsl's decode kernel reads them back from the cache. In place (the session aliased present to past) the
append touches only the new rows, which the attention workgroups can build themselves from the projection
output, so the append is folded in: the cache step's workgroup count becomes 0 for a one-token step (it
still serves prompts) and this kernel, with 1 workgroup row for a one-token step and 0 otherwise, writes the
rows. Copying and windowed caches keep the two steps: there the attention reads a cache the append builds
whole. The session's resident cache (gqa_resident) is in place for any batch and kv heads: each workgroup
finds its batch row's slot through onyxia::kv_rows' `cache_slot`.
"""

from __future__ import annotations

from onyxia.core import BufferRef, PlanCtx, SymbolicDim, load_wgsl
from onyxia.core.plan_ctx import ErrorSlotUse
from onyxia.core.shapes import dims_product
from onyxia.operators.attention.gqa_cache import binding_defs
from onyxia.operators.attention.gqa_inputs import CacheLayout, GqaInput
from onyxia.operators.attention.gqa_resident import slot_binding
from onyxia.operators.int64_checks import checked_defs

__all__ = ["appends_in_decode", "plan_decode_append", "seqlens_check"]

_SOURCE = load_wgsl(__package__, "gqa_decode_append.wgsl")


def appends_in_decode(layout: CacheLayout) -> bool:
    """Whether a one-token step's append runs inside the attention kernel (in place, not windowed)."""
    return layout.in_place and not layout.windowed


def seqlens_check(ctx: PlanCtx, layout: CacheLayout) -> ErrorSlotUse | None:
    """The error slot the attention kernels report a seqlens_k outside [0, present length) into, as
    onnxruntime refuses it ("seqlens_k[b] = v is out of range [0, total)"); None for a windowed cache,
    whose valid length runs past its capacity."""
    if layout.windowed:
        return None
    return ctx.error_slot(
        f"input {int(GqaInput.SEQLENS_K)} (seqlens_k): each seqlens_k[b] must lie in [0, {layout.rows})"
    )


def plan_decode_append(
    ctx: PlanCtx,
    layout: CacheLayout,
    defs: dict[str, object],
    dims: dict[str, SymbolicDim],
    present: list[BufferRef],
    decode: SymbolicDim,
    errors: ErrorSlotUse | None = None,
) -> None:
    """The fused step: gqa.wgsl's decode defs and dims (`defs`, `dims`) plus the new rows' layout; the
    seqlens_k check reports into `errors`."""
    heads = layout.heads
    new = [] if heads.packed else [ctx.input(GqaInput.KEY), ctx.input(GqaInput.VALUE)]
    rotary = [ctx.input(GqaInput.COS_CACHE), ctx.input(GqaInput.SIN_CACHE)] if "ROTARY" in defs else []
    slot_names, slot_reads, _ = slot_binding(layout.resident)  # RESIDENT comes with `defs`
    names = [
        "Q",
        *([] if heads.packed else ["NEW_K", "NEW_V"]),
        "SEQLENS",
        *(["COS", "SIN"] * bool(rotary)),
        *slot_names,
        *("CACHE_K", "CACHE_V", "OUT", "SCORES"),
    ]
    fused_defs = {k: v for k, v in defs.items() if not k.startswith("BIND_") and k != "DECODE"}
    fused_defs |= binding_defs(names) | {"KV_HEADS": heads.kv, "NEW_STRIDE": heads.kv_stride}
    fused_defs |= {"K_OFFSET": heads.k_offset, "V_OFFSET": heads.v_offset}
    if heads.packed:
        fused_defs["PACKED"] = True
    fused_defs |= checked_defs(errors, len(names))
    shader = ctx.compile_shader(
        "attention/gqa_decode_append", _SOURCE, fused_defs, dims, None if errors is None else errors.immediates
    )
    scores = ctx.alloc_scratch(dims_product([layout.batch, heads.num, layout.rows, 4]), "scores")
    reads = [ctx.input(GqaInput.QUERY), *new, ctx.input(GqaInput.SEQLENS_K), *rotary, *slot_reads]
    writes = [*present, ctx.output(0), scores] + ([] if errors is None else [errors.ref])
    ctx.dispatch(shader, reads, writes, (decode, heads.num, layout.batch))
