"""GroupQueryAttention's prompt kernel (gqa_prefill.wgsl): a workgroup per block of query rows and kv head.

A prompt step of S tokens over T cached keys does S * T * head_size multiply-adds per head twice (scores and
values). gqa.wgsl's rows kernel gives each query row and head its own invocation, which reads every key and
value row of its head itself: a cache load per multiply-add, which made a 1,024-token prompt on lavapipe ~40x
slower than onnxruntime on the CPU, the gap growing with the prompt. Here the query heads that share a kv
head (GQA's group) and a block of query rows form one workgroup whose items all use each loaded key and
value; the shader's header says how, for its two kernels:

- ``spread`` (CPU rasterisers opened with subgroups: lavapipe): lanes load different keys and subgroup
  broadcasts share them, ITEMS rows per invocation; 8 keys per step where the subgroup has 8 lanes.
- ``tiles`` (any other device): key and value tiles in workgroup memory, sized to WebGPU's 16 KiB.

`force_variants({"gqa_prefill": "tiles"})` picks one whatever the adapter (tests run each on lavapipe; "spread4"
is spread with only its 4-key step, which lavapipe's 8-lane subgroups never take otherwise).
The kernel takes the rows kernel's bindings and defs (gqa.py builds them: caches, the resident layout's
slots, rotary, window, softcap, the seqlens check), so every cache form works unchanged.
"""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.core import BufferRef, PlanCtx, PlanningError, SymbolicDim, ceil_div, load_wgsl
from onyxia.core.adapter_facts import adapter_facts, forced_variant
from onyxia.core.plan_ctx import ErrorSlotUse
from onyxia.operators.attention.gqa_cache import binding_defs
from onyxia.operators.attention.gqa_inputs import CacheLayout, Heads

__all__ = ["FAMILY", "plan_prefill", "prefill_kernel"]

FAMILY = "gqa_prefill"  # the `force_variants` key
_PREFILL = load_wgsl(__package__, "gqa_prefill.wgsl")
_WORKGROUP_BYTES = 16384  # WebGPU's guaranteed maxComputeWorkgroupStorageSize (tiles: k and v, f32)
_TILE_LANES = 64  # tiles: invocations per workgroup to aim for, one item each
_MAX_TILE = 32  # tiles: keys per tile; more only lengthens the tail tile of short prompts
# spread: 32 invocations of 4 items each (128 items: 64 query rows of Qwen3's 2 heads per group); measured
# on lavapipe against 64 x 1, 64 x 2, 16 x 8 and 32 x 8 for a 256-token chunk after 768 cached tokens
_SPREAD_LANES = 32
_SPREAD_ITEMS = 4


@dataclass(frozen=True)
class PrefillKernel:
    """One planned shape of the kernel: its name, query rows per workgroup, invocations, and shader defs."""

    name: str
    block: int
    lanes: int
    defs: dict[str, object]


def prefill_kernel(heads: Heads) -> PrefillKernel | None:
    """The kernel for this head grouping on the target adapter, or None where it does not apply and the rows
    kernel serves: a head size not a multiple of 4 (the caches are read as vec4), a group larger than a
    workgroup's items, or (tiles) a head too wide for 4 keys and values in workgroup memory."""
    group = heads.num // heads.kv
    facts = adapter_facts()
    name = forced_variant(FAMILY) or ("spread" if facts.cpu and facts.subgroups else "tiles")
    if heads.size % 4:
        return None
    if name in ("spread", "spread4"):
        if group > _SPREAD_LANES * _SPREAD_ITEMS:
            return None
        # 8 keys a step need 8 lanes; a device that may run fewer also compiles the 4-key step (the shader)
        steps = "4" if name == "spread4" else "8" if facts.subgroup_min_size >= 8 else "4 8"
        defs = {"SPREAD": True, "STEPS": steps, "QUADS_4": "0", "QUADS_8": "0 1"}
        defs["ITEMS"] = " ".join(str(i) for i in range(_SPREAD_ITEMS))
        return PrefillKernel(name, _SPREAD_LANES * _SPREAD_ITEMS // group, _SPREAD_LANES, defs)
    if name != "tiles":
        raise PlanningError(f"{FAMILY} variants: no variant '{name}' (known: spread, spread4, tiles)")
    tile = min(_MAX_TILE, _WORKGROUP_BYTES // (2 * 4 * heads.size) // 4 * 4)
    if group > _TILE_LANES or tile < 4:
        return None
    block = _TILE_LANES // group
    return PrefillKernel(name, block, block * group, {"TILE": tile})


def plan_prefill(
    ctx: PlanCtx,
    layout: CacheLayout,
    defs: dict[str, object],
    names: list[str],
    reads: list[BufferRef],
    dims: dict[str, SymbolicDim],
    prompt: SymbolicDim,
    errors: ErrorSlotUse | None,
) -> bool:
    """Dispatch the kernel for steps of more than one token (`prompt`: 1 for those, 0 for one-token steps,
    which the decode kernels serve), from the rows kernel's `defs`, binding `names` and `reads`. False, with
    nothing planned, where `prefill_kernel` refuses the heads."""
    heads = layout.heads
    kernel = prefill_kernel(heads)
    if kernel is None:
        return False
    groups = ceil_div(layout.seq, kernel.block) * prompt
    if groups == 0:
        return True  # statically a one-token step
    kernel_defs = {**defs, **binding_defs(names), **kernel.defs, "BLOCK": kernel.block, "WORKGROUP_SIZE": kernel.lanes}
    immediates = None if errors is None else errors.immediates
    label = f"attention/gqa_prefill@{kernel.name}"
    shader = ctx.compile_shader(label, _PREFILL, kernel_defs, dims, immediates)
    writes = [ctx.output(0)] if errors is None else [ctx.output(0), errors.ref]
    ctx.dispatch(shader, reads, writes, (groups, heads.kv, layout.batch))
    return True
