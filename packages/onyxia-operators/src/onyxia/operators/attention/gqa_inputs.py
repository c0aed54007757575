"""GroupQueryAttention's inputs by index, and the checks that turn its unsupported forms into
clear errors at shape inference (before anything is planned)."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from onyxia.core import NodeCtx, UnsupportedOpError

__all__ = ["GqaInput", "Heads", "heads_of", "reject_unsupported", "rotary_dim", "unsupported"]


class GqaInput(enum.IntEnum):
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


_UNSUPPORTED_INPUTS = (GqaInput.POSITION_IDS, GqaInput.ATTENTION_BIAS, GqaInput.HEAD_SINK)


@dataclass(frozen=True)
class Heads:
    num: int
    kv: int
    size: int


def heads_of(ctx: NodeCtx) -> Heads:
    """Head counts and size, checked against the q/k/v shapes."""
    num, kv = ctx.attr_int("num_heads"), ctx.attr_int("kv_num_heads")
    if num <= 0 or kv <= 0 or num % kv:
        raise ctx.error(f"num_heads ({num}) must be a positive multiple of kv_num_heads ({kv})")
    q_dims, k_dims = ctx.input_dims(GqaInput.QUERY), ctx.input_dims(GqaInput.KEY)
    if len(q_dims) != 3 or len(k_dims) != 3:
        raise ctx.error("query and key must be 3-D [batch, sequence, heads * head_size]")
    hidden, kv_hidden = q_dims[2], k_dims[2]
    if not isinstance(hidden, int) or hidden % num:
        raise ctx.error(f"query hidden size {hidden} must be a static multiple of num_heads ({num})")
    size = hidden // num
    if kv_hidden != kv * size:
        raise ctx.error(f"key hidden size {kv_hidden} must be kv_num_heads * head_size = {kv} * {size}")
    if ctx.input_dims(GqaInput.VALUE) != k_dims:
        raise ctx.error(f"value shape {list(ctx.input_dims(GqaInput.VALUE))} must equal key shape {list(k_dims)}")
    return Heads(num, kv, size)


def rotary_dim(ctx: NodeCtx, heads: Heads) -> int:
    """Elements of each head that do_rotary rotates (twice the cos_cache width), 0 without rotary."""
    if not ctx.attr_int("do_rotary", 0):
        return 0
    if not (ctx.has_input(GqaInput.COS_CACHE) and ctx.has_input(GqaInput.SIN_CACHE)):
        raise ctx.error("do_rotary=1 needs inputs 7 (cos_cache) and 8 (sin_cache)")
    cos, sin = ctx.input_dims(GqaInput.COS_CACHE), ctx.input_dims(GqaInput.SIN_CACHE)
    if len(cos) != 2 or cos != sin or not isinstance(cos[1], int) or not 0 < 2 * cos[1] <= heads.size:
        raise ctx.error(
            f"cos_cache and sin_cache must both be [max_position, rotary_dim / 2] with rotary_dim <= head_size "
            f"({heads.size}); found {list(cos)} and {list(sin)}"
        )
    return 2 * cos[1]


def reject_unsupported(ctx: NodeCtx) -> None:
    if not ctx.has_input(GqaInput.KEY):
        raise unsupported(ctx, "packed QKV (key and value absent) is not implemented; export with separate q/k/v")
    for attr in ("smooth_softmax", "sliding_window_cache"):  # the latter: a fixed-capacity window cache
        if ctx.attr_int(attr, 0):
            raise unsupported(ctx, f"attribute {attr}=1 is not implemented")
    for index in _UNSUPPORTED_INPUTS:
        if ctx.has_input(index):
            raise unsupported(ctx, f"input {int(index)} ({index.name.lower()}) is not implemented")
    if ctx.num_outputs > 3 and ctx.has_output(3):
        raise unsupported(ctx, "output 3 (output_qk) is not implemented")
    if ctx.has_input(GqaInput.PAST_KEY) != ctx.has_input(GqaInput.PAST_VALUE):
        raise ctx.error("past_key and past_value must be given together")


def unsupported(ctx: NodeCtx, message: str) -> UnsupportedOpError:
    return UnsupportedOpError(f"node '{ctx.node.name}' (GroupQueryAttention, domain com.microsoft): {message}")
