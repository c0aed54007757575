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

Two kernels do the fused step. Where the device has subgroups (lavapipe as the runtime opens it, GPUs),
gqa_decode_quads.wgsl: a workgroup per (kv head, batch row) reads each key and value row once for the GROUP query
heads sharing it, its lanes in quads splitting the head size, with an online softmax per quad and no scores
scratch; a batched step of B rows costs B times the rows it reads (it was ~20 times one row's cost at 8 rows of
Gemma 3 270m's 18 layers on lavapipe, 5.5 -> 118 ms, where every row of every head paid barrier rounds and per-lane
reads of q). Elsewhere gqa_decode_append.wgsl, a workgroup per query head as gqa.wgsl's decode kernel.
"""

from __future__ import annotations

from onyxia.core import BufferRef, PlanCtx, SymbolicDim, load_wgsl
from onyxia.core.adapter_facts import adapter_facts
from onyxia.core.plan_ctx import ErrorSlotUse
from onyxia.core.shapes import dims_product
from onyxia.operators.attention.gqa_cache import binding_defs
from onyxia.operators.attention.gqa_inputs import CacheLayout, GqaInput, Heads
from onyxia.operators.attention.gqa_resident import slot_binding
from onyxia.operators.int64_checks import checked_defs

__all__ = ["appends_in_decode", "plan_decode_append", "quads_split", "seqlens_check"]

_SOURCE = load_wgsl(__package__, "gqa_decode_append.wgsl")
_QUADS = load_wgsl(__package__, "gqa_decode_quads.wgsl")
_QUADS_WORKGROUP = 32  # 8 quads: enough keys in flight for a step's rows, a cheap merge


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
    ]
    fused_defs = {k: v for k, v in defs.items() if not k.startswith("BIND_") and k != "DECODE"}
    fused_defs |= {"KV_HEADS": heads.kv, "NEW_STRIDE": heads.kv_stride}
    fused_defs |= {"K_OFFSET": heads.k_offset, "V_OFFSET": heads.v_offset}
    if heads.packed:
        fused_defs["PACKED"] = True
    immediates = None if errors is None else errors.immediates
    reads = [ctx.input(GqaInput.QUERY), *new, ctx.input(GqaInput.SEQLENS_K), *rotary, *slot_reads]
    errors_write = [] if errors is None else [errors.ref]
    split = quads_split(heads)
    if split is not None:  # a workgroup per kv head, its lanes in quads (gqa_decode_quads.wgsl)
        names += ["CACHE_K", "CACHE_V", "OUT"]
        fused_defs = {k: v for k, v in fused_defs.items() if k not in ("DIM_LANES", "KEY_GROUPS")}
        fused_defs |= _quads_defs(heads, split) | binding_defs(names) | checked_defs(errors, len(names))
        shader = ctx.compile_shader("attention/gqa_decode_quads", _QUADS, fused_defs, dims, immediates)
        ctx.dispatch(shader, reads, [*present, ctx.output(0), *errors_write], (decode, heads.kv * split, layout.batch))
        return
    names += ["CACHE_K", "CACHE_V", "OUT", "SCORES"]
    fused_defs |= binding_defs(names) | checked_defs(errors, len(names))
    shader = ctx.compile_shader("attention/gqa_decode_append", _SOURCE, fused_defs, dims, immediates)
    scores = ctx.alloc_scratch(dims_product([layout.batch, heads.num, layout.rows, 4]), "scores")
    writes = [*present, ctx.output(0), scores, *errors_write]
    ctx.dispatch(shader, reads, writes, (decode, heads.num, layout.batch))


def quads_split(heads: Heads) -> int | None:
    """Workgroups per kv head of gqa_decode_quads.wgsl, or None where it does not apply: it needs subgroups (quads
    add their partial dot products by shuffles), head sizes in whole vec4s per lane (16 | HEAD_SIZE) and its
    workgroup memory within the adapter's."""
    facts = adapter_facts()
    if not facts.subgroups or heads.size % 16:
        return None
    group = heads.num // heads.kv
    split = 2 if heads.kv == 1 and group % 2 == 0 else 1  # one kv head: two workgroups, so two CPU threads work
    quads = _QUADS_WORKGROUP // 4
    shared = 4 * heads.size * (2 + group // split + quads) + 8 * quads  # new k and v rows, queries, the merge
    return split if shared <= facts.workgroup_storage_bytes else None


def _quads_defs(heads: Heads, split: int) -> dict[str, object]:
    per = heads.num // heads.kv // split
    return {
        "WORKGROUP_SIZE": _QUADS_WORKGROUP,
        "HEAD_SPLIT": split,
        "HEADS": per,
        "HEAD_ITEMS": " ".join(str(g) for g in range(per)),
        "DQ4": heads.size // 16,
        "DQ4_ITEMS": " ".join(str(i) for i in range(heads.size // 16)),
    }
