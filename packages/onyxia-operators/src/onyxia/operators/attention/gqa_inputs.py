"""GroupQueryAttention's inputs by index, the checks that turn its unsupported forms into clear
errors at shape inference (before anything is planned), and the cache layout planning derives.

Packed QKV (onnxruntime-genai's fused projection: key and value empty, query
[B, S, (num_heads + 2 * kv_num_heads) * head_size]) is read in place: `Heads` gives the row
stride and the column offsets of q, k and v within a token's row, so the kernels index the one
buffer directly and no Split or copy runs. Without packing the strides are the plain row widths
and the offsets 0, and the kernels compute exactly what they did before."""

from __future__ import annotations

import enum
from dataclasses import dataclass

from onyxia.core import NodeCtx, PlanningError, SymbolicDim, UnsupportedOpError
from onyxia.core.plan_ctx import ResidentKv

__all__ = [
    "CacheLayout",
    "GqaInput",
    "Heads",
    "cache_layout",
    "heads_of",
    "reject_unsupported",
    "rotary_dim",
    "unsupported",
]


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
    packed: bool = False  # q, k and v share the query input, each token's row [q heads | k heads | v heads]

    @property
    def q_stride(self) -> int:
        """Elements between consecutive tokens' q rows (the query input's last dim)."""
        return (self.num + 2 * self.kv) * self.size if self.packed else self.num * self.size

    @property
    def kv_stride(self) -> int:
        """Elements between consecutive tokens' new k (and v) rows."""
        return self.q_stride if self.packed else self.kv * self.size

    @property
    def k_offset(self) -> int:
        """Column of a token's first new k element within its row."""
        return self.num * self.size if self.packed else 0

    @property
    def v_offset(self) -> int:
        """Column of a token's first new v element within its row."""
        return (self.num + self.kv) * self.size if self.packed else 0


def heads_of(ctx: NodeCtx) -> Heads:
    """Head counts and size, checked against the q/k/v shapes (or the packed query's)."""
    num, kv = ctx.attr_int("num_heads"), ctx.attr_int("kv_num_heads")
    if num <= 0 or kv <= 0 or num % kv:
        raise ctx.error(f"num_heads ({num}) must be a positive multiple of kv_num_heads ({kv})")
    if ctx.has_input(GqaInput.KEY) != ctx.has_input(GqaInput.VALUE):
        raise ctx.error("key and value must both be given (separate q/k/v) or both be empty (packed QKV)")
    if not ctx.has_input(GqaInput.KEY):
        return _packed_heads(ctx, num, kv)
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


def _packed_heads(ctx: NodeCtx, num: int, kv: int) -> Heads:
    q_dims = ctx.input_dims(GqaInput.QUERY)
    if len(q_dims) != 3:
        raise ctx.error(
            f"packed query must be 3-D [batch, sequence, (num_heads + 2 * kv_num_heads) * head_size]; "
            f"found {list(q_dims)}"
        )
    hidden = q_dims[2]
    if not isinstance(hidden, int) or hidden % (num + 2 * kv):
        raise ctx.error(
            f"packed query hidden size {hidden} must be a static multiple of num_heads + 2 * kv_num_heads "
            f"= {num} + 2 * {kv}"
        )
    return Heads(num, kv, hidden // (num + 2 * kv), packed=True)


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
    for index in (GqaInput.SEQLENS_K, GqaInput.TOTAL_SEQUENCE_LENGTH):
        if not ctx.has_input(index):
            raise ctx.error(f"input {int(index)} ({index.name.lower()}) is required; found it empty or absent")
    if ctx.attr_int("smooth_softmax", 0):
        raise unsupported(ctx, "attribute smooth_softmax=1 is not implemented")
    for index in _UNSUPPORTED_INPUTS:
        if ctx.has_input(index):
            raise unsupported(ctx, f"input {int(index)} ({index.name.lower()}) is not implemented")
    if ctx.num_outputs > 3 and ctx.has_output(3):
        raise unsupported(ctx, "output 3 (output_qk) is not implemented")
    if ctx.has_input(GqaInput.PAST_KEY) != ctx.has_input(GqaInput.PAST_VALUE):
        raise ctx.error("past_key and past_value must be given together")
    if ctx.attr_int("sliding_window_cache", 0):
        _check_windowed(ctx)


def _check_windowed(ctx: NodeCtx) -> None:
    """onnxruntime-genai's windowed cache: past and present are fixed buffers of `capacity` rows.
    onnxruntime requires capacity >= local_window_size; for a larger capacity its placement of the
    rows is not a plain window shift (rows are dropped early), so only capacity == window is accepted."""
    window = ctx.attr_int("local_window_size", -1)
    if not ctx.has_input(GqaInput.PAST_KEY):
        raise ctx.error("sliding_window_cache=1 needs past_key and past_value (the fixed-size cache buffers)")
    capacity = ctx.input_dims(GqaInput.PAST_KEY)[2]
    if window <= 0 or (isinstance(capacity, int) and capacity != window):
        raise unsupported(
            ctx,
            f"sliding_window_cache=1 with a cache of {capacity} rows and local_window_size {window}: only a "
            "capacity equal to the window is implemented (hint: bind the past_sliding_length dim to the window)",
        )


def unsupported(ctx: NodeCtx, message: str) -> UnsupportedOpError:
    return UnsupportedOpError(f"node '{ctx.node.name}' (GroupQueryAttention, domain com.microsoft): {message}")


@dataclass(frozen=True)
class CacheLayout:
    """The cache shapes planning works with. `past` is past_key's rows per head (0 without a past;
    a windowed or resident cache's capacity); attention reads an extended cache of `rows` rows per head:
    the kept past rows, then the new ones (see onyxia::kv_rows). A resident cache (gqa_resident) is its
    own extended cache: `rows` is its capacity, and its rows sit in the slots `resident.rows` names."""

    heads: Heads
    batch: SymbolicDim
    seq: SymbolicDim
    past: SymbolicDim
    windowed: bool
    in_place: bool  # past_key/value share present_key/value's buffers: append the new rows only
    resident: ResidentKv | None = None  # the session's slot-addressed cache (gqa_resident)

    @property
    def rows(self) -> SymbolicDim:
        return self.past if self.resident is not None else self.past + self.seq


def cache_layout(ctx: NodeCtx, shares_storage: tuple[bool, bool], resident: ResidentKv | None = None) -> CacheLayout:
    heads = heads_of(ctx)
    batch, seq, _ = ctx.input_dims(GqaInput.QUERY)
    past = ctx.input_dims(GqaInput.PAST_KEY)[2] if ctx.has_input(GqaInput.PAST_KEY) else 0
    if resident is not None:  # every row at a fixed stride: in place for any batch and kv heads
        return CacheLayout(heads, batch, seq, past, False, True, resident)
    windowed = bool(ctx.attr_int("sliding_window_cache", 0))
    if shares_storage[0] != shares_storage[1]:
        raise PlanningError(f"node '{ctx.node.name}' (GroupQueryAttention): only one of the two caches is aliased")
    in_place = shares_storage[0] and not windowed  # a windowed present is rewritten whole in any case
    if in_place and (heads.kv != 1 or (isinstance(batch, int) and batch != 1)):
        raise PlanningError(
            f"node '{ctx.node.name}' (GroupQueryAttention): present aliases past, but with batch {batch} and "
            f"kv_num_heads {heads.kv} the past rows are not a prefix of the present buffer (both must be 1)"
        )
    return CacheLayout(heads, batch, seq, past, windowed, in_place)
