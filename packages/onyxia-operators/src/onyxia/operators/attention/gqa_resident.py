"""GroupQueryAttention over the LLM session's resident KV cache (`onyxia.core.resident_kv`): onnxruntime's
past_present_share_buffer mode, with each batch row's cache in any slot of the buffer.

onnxruntime enters that mode when past and present are one buffer, which a graph cannot state; the
session says so with the private node attribute ``past_present_share_buffer`` = 1 (not in the contrib
spec; onnxruntime never sees it). Shape inference runs before planning knows the layout, so it decides
by the attribute: past_key/value are then [B, kv_heads, C, head_size] with C the capacity (the past
length dim the session binds statically) and present has that same shape, not past + S rows. Planning
then requires the layout (`PlanCtx.resident_kv`) to agree, and present aliased to past.

In that mode the kernels get one def, RESIDENT, and one read binding, SLOTS (the session's int32
[batch, 2] table: slot, rows cached): batch row b's rows live in slot ``rows[b, 0]`` with stride C
(onyxia::kv_rows' `cache_slot`), and its new tokens go where onnxruntime puts them, by seqlens_k[b]
(onyxia::kv_rows with PAST_ROWS = C: the kept past is the whole row prefix). So the writers touch only
the new rows, for any batch and kv_heads, and the one-token step keeps its single fused dispatch.
"""

from __future__ import annotations

from onyxia.core import BufferRef, NodeCtx, PlanCtx, PlanningError
from onyxia.core.plan_ctx import ResidentKv
from onyxia.operators.attention.gqa_inputs import GqaInput

__all__ = ["SHARE_BUFFER", "check_share_buffer", "resident_cache", "shares_buffer", "slot_binding"]

SHARE_BUFFER = "past_present_share_buffer"  # the session's private attribute (module docstring)


def shares_buffer(ctx: NodeCtx) -> bool:
    return bool(ctx.attr_int(SHARE_BUFFER, 0))


def check_share_buffer(ctx: NodeCtx) -> None:
    """Shape inference's half of the contract: the attribute needs the caches and a full (unwindowed) buffer."""
    if not shares_buffer(ctx):
        return
    if not ctx.has_input(GqaInput.PAST_KEY):
        raise ctx.error(f"attribute {SHARE_BUFFER}=1 needs past_key and past_value (the shared cache buffers)")
    if ctx.attr_int("sliding_window_cache", 0):
        raise ctx.error(
            f"attribute {SHARE_BUFFER}=1 with sliding_window_cache=1: a shared buffer holds every row "
            "(hint: keep sliding_window_cache=0 and let local_window_size mask the keys)"
        )


def resident_cache(ctx: PlanCtx) -> ResidentKv | None:
    """The resident layout both caches are stored in, or None; refuses a layout the attribute (which
    shaped the outputs) or the aliases disagree with."""
    key, value = ctx.resident_kv(GqaInput.PAST_KEY), ctx.resident_kv(GqaInput.PAST_VALUE)
    where = f"node '{ctx.node.name}' (GroupQueryAttention)"
    if (key is None) != (value is None):
        raise PlanningError(f"{where}: only one of past_key and past_value is a resident KV cache; expected both")
    if shares_buffer(ctx) != (key is not None):
        found = "is" if key is not None else "is not"
        raise PlanningError(
            f"{where}: attribute {SHARE_BUFFER}={int(shares_buffer(ctx))}, but past_key {found} a resident KV "
            f"cache; the session must set the attribute exactly on the nodes whose caches are resident"
        )
    if key is None:
        return None
    if not (ctx.shares_storage(GqaInput.PAST_KEY, 1) and ctx.shares_storage(GqaInput.PAST_VALUE, 2)):
        raise PlanningError(f"{where}: a resident KV cache needs present_key/value aliased to past_key/value")
    rows = ctx.input_dims(GqaInput.PAST_KEY)[2]
    if rows != key.capacity:
        raise PlanningError(
            f"{where}: past_key has {rows} rows per head; the resident cache's capacity is {key.capacity} "
            "(bind the past length dim to the capacity)"
        )
    return key


def slot_binding(resident: ResidentKv | None) -> tuple[list[str], list[BufferRef], dict[str, object]]:
    """Binding names, read buffers and defs that address a resident cache by slot (all empty otherwise)."""
    if resident is None:
        return [], [], {}
    return ["SLOTS"], [resident.rows], {"RESIDENT": True}
