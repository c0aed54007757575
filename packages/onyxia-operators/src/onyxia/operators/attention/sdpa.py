"""com.onyxia ScaledDotProductAttention: plain attention (optimum's exports) as one dispatch.

``ScaledDotProductAttention(q, k, v, mask?, valid_keys?; q_scale, k_scale, scale, divisor, softcap,
mask_true, mask_false, zero_nan_rows, transpose_output, causal, offset_from_valid, window_left,
window_right, mask_pads_keys, empty_rows_zero, qk_mode) -> y[, qk]`` is, per batch row b and query head n, with kv head ``n // (heads / kv_heads)`` of k
and of v (grouped heads read their kv head; no repeated copy)::

    x = ((q * q_scale) @ (k * k_scale)^T) * scale / divisor       # each factor only when not 1
    x = softcap * tanh(x / softcap)                                # only when softcap > 0
    y = softmax(x + mask, axis=-1) @ v                             # mask broadcast to [B, N, S, T]

A float mask is added as it is; a bool mask adds ``where(mask, mask_true, mask_false)`` (the graph's
``Where(cond, 0, finfo.min)``, folded without materialising the float mask per layer).

q is [B, N, S, H], k [B, KVK, T, H], v [B, KVV, T, Hv]; y is [B, N, S, Hv], or [B, S, N, Hv] with
transpose_output (the graph's Transpose(0, 2, 1, 3) after attention, folded); with q_bsnh q is read as
[B, S, N, H] (a Transpose in front of it, folded: `attention.onnx_attention_fusions`). Scores stay f32 whatever the
storage (f32 or f16: the fusion from plain ops declines f16 graphs, which round at every step; ai.onnx
Attention, lowered to this op by `attention.onnx_attention`, states no rounding).

ai.onnx Attention's masks, none of them stored: key j of batch row b exists iff ``j < valid_keys[b]``
(nonpad_kv_seqlen); with `mask_pads_keys` the mask's last dim may be shorter than T and the keys past it
are hidden (the spec pads it with -inf); with `causal` query s sees keys ``j <= p``, and with
`window_left` / `window_right` (-1: unbounded) keys ``p - left <= j <= p + right``, where p is s, or with
`offset_from_valid` ``s + valid - S - offset_trim`` (valid: valid_keys[b], else T; the bottom-right
alignment of a cache: with past_key, T - S - trim is the past length when trim = new keys - S). A hidden key weighs exactly 0; with `empty_rows_zero` a row whose every key is hidden or has a
-inf bias outputs 0 (the spec's fully-masked-row guard). `qk_mode` 0-3 asks for the score matrix as the
second output (`attention.sdpa_scores`: a kernel of its own, planned only when the output exists).

Softmax follows onnxruntime's CPU kernel, exp(x - max) / sum over all T keys (masked keys included:
a finite mask such as finfo.min leaves a fully masked row a softmax over all keys, as onnxruntime
computes it). A row whose max is not finite or whose sum is NaN (all keys -inf, a +inf or NaN logit)
is all NaN in onnxruntime; such a row's output is NaN, or 0 with zero_nan_rows, which the graph's
``Where(IsNaN(p), 0, p)`` after the Softmax asks for. Keys at -inf contribute exactly 0.

k and v in the LLM session's resident layout (`PlanCtx.resident_kv`: [slots, KV, capacity, H] buffers
shared with the caches' KvAppend) are read in place: row b's key j at row j of slot ``rows[b, 0]``; its keys
past its own length are stale, hidden by its mask (the session's, right-padded per row). Same kernels.

Two kernels as GroupQueryAttention plans them (attention/sdpa.wgsl): rows for prompts (one
invocation per query row, an online softmax) and decode (one workgroup per head for a one-token
step); a symbolic query length plans both and the workgroup counts pick one at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.core import (
    BufferRef,
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    PlanningError,
    SymbolicDim,
    TensorType,
    ceil_div,
    load_wgsl,
)
from onyxia.core.plan_ctx import ResidentKv
from onyxia.core.shapes import Absent, dims_product, shape_of
from onyxia.operators.attention.gqa_cache import binding_defs
from onyxia.operators.layout import broadcast_strides, node_literal, type_defs
from onyxia.operators.typesets import FLOATS

__all__ = [
    "SDPA",
    "SdpaGeometry",
    "ScaledDotProductAttentionOp",
    "sdpa_defs",
    "sdpa_dims",
    "sdpa_geometry",
    "sdpa_reads",
]

_SOURCE = load_wgsl(__package__, "sdpa.wgsl")
_ROWS_WORKGROUP = 16  # query rows per workgroup (one invocation each)
_DECODE_WORKGROUP = 64  # invocations splitting one query row's keys
_FACTORS = ("q_scale", "k_scale", "scale", "divisor")


@dataclass(frozen=True)
class SdpaGeometry:
    """Static head counts and sizes, the symbolic batch, query and key lengths."""

    batch: SymbolicDim
    heads: int
    seq: SymbolicDim
    keys: SymbolicDim
    head_size: int
    value_size: int
    k_heads: int
    v_heads: int


def sdpa_geometry(ctx: NodeCtx) -> SdpaGeometry:
    """Validate the inputs; every shape fact the kernels rely on is checked here."""
    _check_dtypes(ctx)
    dims = [list(ctx.input_dims(i)) for i in range(3)]
    if any(len(d) != 4 for d in dims):
        raise ctx.error(f"q, k and v must be 4-D [batch, heads, rows, head size]; found {ctx.describe_inputs()}")
    if ctx.attr_int("q_bsnh", 0):  # q read as [B, S, N, H]
        dims[0] = [dims[0][0], dims[0][2], dims[0][1], dims[0][3]]
    (batch, heads, seq, head), (kb, kh, keys, kd), (vb, vh, vkeys, vd) = dims
    static = (heads, head, kh, kd, vh, vd)
    if not all(isinstance(d, int) and d > 0 for d in static):
        raise ctx.error(f"head counts and head sizes must be static and positive; found {ctx.describe_inputs()}")
    assert isinstance(heads, int) and isinstance(head, int) and isinstance(kh, int) and isinstance(vh, int)
    assert isinstance(vd, int)
    if kb != batch or vb != batch or vkeys != keys or kd != head:
        raise ctx.error(f"q [B, N, S, H], k [B, KV, T, H] and v [B, KV, T, Hv] disagree: {ctx.describe_inputs()}")
    if heads % kh or heads % vh:
        raise ctx.error(f"{heads} query heads are not a multiple of the kv heads ({kh} in k, {vh} in v)")
    if ctx.has_input(3):
        mask, scores = list(ctx.input_dims(3)), [batch, heads, seq, keys]
        # with mask_pads_keys the last dim is any length up to T (the keys past it are hidden)
        padded = bool(ctx.attr_int("mask_pads_keys", 0)) and len(mask) > 0
        compared = (mask[:-1], scores[:-1]) if padded else (mask, scores)
        too_long = padded and isinstance(mask[-1], int) and isinstance(keys, int) and mask[-1] > keys
        broadcasts = all(m in (1, d) for m, d in zip(compared[0][::-1], compared[1][::-1]))
        if len(mask) > 4 or too_long or not broadcasts:
            raise ctx.error(f"the mask {mask} does not broadcast to the scores {scores}")
    if ctx.num_inputs > 4 and ctx.has_input(4) and list(ctx.input_dims(4)) not in ([batch], [1]):
        raise ctx.error(f"input 4 (valid_keys) has shape {ctx.input_shape(4)}; expected [{batch}]")
    return SdpaGeometry(batch, heads, seq, keys, head, vd, kh, vh)


def _check_dtypes(ctx: NodeCtx) -> None:
    dtype = ctx.input_dtype(0)
    for i, role in ((0, "q"), (1, "k"), (2, "v"), (3, "mask"), (4, "valid_keys")):
        if i >= ctx.num_inputs or not ctx.has_input(i):
            continue
        if isinstance(ctx.input_shape(i), Absent):
            raise ctx.error(f"input {i} ({role}) has no inferred shape")
        found = ctx.input_dtype(i)
        ok = {3: (dtype, DataType.BOOL), 4: (DataType.INT64, DataType.INT32)}.get(i, (dtype,))
        if dtype not in FLOATS or found not in ok:
            raise ctx.error(f"input {i} ({role}) is {found.short}; expected {' or '.join(d.short for d in ok)}")
    if (
        ctx.has_input(3)
        and ctx.input_dtype(3) == DataType.BOOL
        and not all(ctx.attr(a) is not None for a in ("mask_true", "mask_false"))
    ):
        raise ctx.error("a bool mask needs the attributes mask_true and mask_false (the values it selects)")


@dataclass(frozen=True)
class ScaledDotProductAttentionOp:
    name: str = "ScaledDotProductAttention"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        g = sdpa_geometry(ctx)
        dtype = ctx.input_dtype(0)
        dims = [g.batch, g.seq, g.heads] if ctx.attr_int("transpose_output", 0) else [g.batch, g.heads, g.seq]
        outputs = [TensorType(dtype, shape_of([*dims, g.value_size]))]
        if ctx.num_outputs > 1:
            if ctx.attr_int("qk_mode", -1) not in (0, 1, 2, 3):
                raise ctx.error(f"output 1 (qk) needs qk_mode 0-3; found {ctx.attr_int('qk_mode', -1)}")
            outputs.append(TensorType(dtype, shape_of([g.batch, g.heads, g.seq, g.keys])))
        return outputs

    def try_fold(self, ctx: FoldCtx) -> None:
        return None  # made from activations (a fusion, or ai.onnx Attention's lowering); never folded

    def plan(self, ctx: PlanCtx) -> None:
        g = sdpa_geometry(ctx)
        if dims_product([g.batch, g.seq]) == 0:
            return
        reads, names = sdpa_reads(ctx)
        reads = [reads[0], reads[1], ctx.input(2), *reads[2:]]
        names = [names[0], names[1], "V", *names[2:]]
        defs, dims = sdpa_defs(ctx, g), sdpa_dims(ctx, g)
        resident, wants_qk = _resident(ctx, g), ctx.num_outputs > 1 and ctx.has_output(1)
        if resident is not None and wants_qk:
            raise PlanningError(
                f"node '{ctx.node.name}' (ScaledDotProductAttention): output 1 (qk) over k/v in the "
                "session's resident KV layout is not supported (the scores kernel reads k unstrided)"
            )
        if resident is not None:
            defs |= resident[0]
            dims["KV_CAPACITY"] = resident[1].capacity
            reads.append(resident[1].rows)
            names.append("ROWS")
        names.append("OUT")
        decode = 2 // (g.seq + 1)  # 1 for a one-token step, 0 for longer ones
        if decode != 0:
            lanes = min(g.value_size, _DECODE_WORKGROUP)
            decode_defs = {**defs, **binding_defs([*names, "SCORES"]), "DECODE": True}
            decode_defs.update(WORKGROUP_SIZE=_DECODE_WORKGROUP, DIM_LANES=lanes, KEY_GROUPS=_DECODE_WORKGROUP // lanes)
            shader = ctx.compile_shader("attention/sdpa_decode", _SOURCE, decode_defs, dims)
            scores = ctx.alloc_scratch(dims_product([g.batch, g.heads, g.keys, 4]), "scores")
            ctx.dispatch(shader, reads, [ctx.output(0), scores], (decode, g.heads, g.batch))
        groups = ceil_div(g.seq, _ROWS_WORKGROUP) * (1 - decode)
        if groups != 0:
            rows_defs = {**defs, **binding_defs(names), "WORKGROUP_SIZE": _ROWS_WORKGROUP}
            shader = ctx.compile_shader("attention/sdpa", _SOURCE, rows_defs, dims)
            ctx.dispatch(shader, reads, [ctx.output(0)], (groups, g.heads, g.batch))
        if wants_qk:
            from onyxia.operators.attention.sdpa_scores import plan_scores

            plan_scores(ctx, g, defs, dims)


def _resident(ctx: PlanCtx, g: SdpaGeometry) -> tuple[dict[str, object], ResidentKv] | None:
    """The defs for k and/or v stored in the session's resident layout (`onyxia.core.resident_kv`) and
    that layout (its rows table, bound once for both); None when neither is."""
    found = {flag: r for flag, r in (("RESIDENT_K", ctx.resident_kv(1)), ("RESIDENT_V", ctx.resident_kv(2))) if r}
    if not found:
        return None
    layout = next(iter(found.values()))
    if isinstance(g.keys, int) and g.keys > layout.capacity:
        raise PlanningError(
            f"node '{ctx.node.name}' (ScaledDotProductAttention): {g.keys} keys over a resident KV cache of "
            f"{layout.capacity} rows per slot"
        )
    defs: dict[str, object] = {flag: True for flag in [*found, "KV_ROWS_INPUT"]}
    return defs, layout


def sdpa_reads(ctx: PlanCtx) -> tuple[list[BufferRef], list[str]]:
    """q, k, [mask], [valid_keys] and their binding names (v, which the scores kernel skips, is not among them)."""
    mask, valid = ctx.has_input(3), ctx.num_inputs > 4 and ctx.has_input(4)
    which = [(0, "Q"), (1, "K"), *([(3, "MASK")] if mask else []), *([(4, "VALID")] if valid else [])]
    return [ctx.input(i) for i, _ in which], [name for _, name in which]


def sdpa_dims(ctx: NodeCtx, g: SdpaGeometry) -> dict[str, SymbolicDim]:
    """SEQ, KEYS and the mask's strides (and, for a mask padded to the keys, its own key count)."""
    dims: dict[str, SymbolicDim] = {"SEQ": g.seq, "KEYS": g.keys}
    if ctx.has_input(3):
        mask = list(ctx.input_dims(3))
        padded = ctx.attr_int("mask_pads_keys", 0) and mask and mask[-1] != g.keys
        strides = broadcast_strides(mask, [g.batch, g.heads, g.seq, mask[-1] if padded else g.keys])
        dims.update(MASK_B=strides[0], MASK_N=strides[1], MASK_S=strides[2], MASK_J=strides[3])
        if padded:
            dims["MASK_KEYS"] = mask[-1]
    return dims


def sdpa_defs(ctx: NodeCtx, g: SdpaGeometry) -> dict[str, object]:
    defs: dict[str, object] = {
        **type_defs(T=ctx.input_dtype(0)),
        "HEAD_SIZE": g.head_size,
        "V_SIZE": g.value_size,
        "NUM_HEADS": g.heads,
        "K_GROUP": g.heads // g.k_heads,
        "V_GROUP": g.heads // g.v_heads,
        "K_HEADS": g.k_heads,
        "V_HEADS": g.v_heads,
    }
    for name in _FACTORS:
        value = ctx.attr_float(name, 1.0)
        if value != 1.0:
            defs[name.upper()] = node_literal(ctx, DataType.FLOAT, value, f"attribute '{name}'")
    softcap = ctx.attr_float("softcap", 0.0)
    if softcap > 0:
        defs["SOFTCAP"] = node_literal(ctx, DataType.FLOAT, softcap, "attribute 'softcap'")
    if ctx.has_input(3):
        defs["MASK"] = True
        defs["MASK_T"] = ctx.input_dtype(3).wgsl
        if ctx.input_dtype(3) == DataType.BOOL:
            for name in ("mask_true", "mask_false"):
                defs[name.upper()] = node_literal(ctx, DataType.FLOAT, ctx.attr_float(name), f"attribute '{name}'")
        mask = ctx.input_dims(3)
        if ctx.attr_int("mask_pads_keys", 0) and mask and mask[-1] != g.keys:
            defs["MASK_SHORT"] = True
    defs.update(_structural_defs(ctx))
    for attr, flag in (("zero_nan_rows", "ZERO_NAN_ROWS"), ("transpose_output", "TRANSPOSE_OUT"), ("q_bsnh", "Q_BSNH")):
        if ctx.attr_int(attr, 0):
            defs[flag] = True
    return defs


def _structural_defs(ctx: NodeCtx) -> dict[str, object]:
    """ai.onnx Attention's hidden keys: valid_keys, the causal frontier, the window, the empty-row guard."""
    defs: dict[str, object] = {}
    if ctx.num_inputs > 4 and ctx.has_input(4):
        defs["VALID_KEYS"] = True
    for attr, flag in (
        ("causal", "CAUSAL"),
        ("offset_from_valid", "OFFSET_FROM_VALID"),
        ("empty_rows_zero", "EMPTY_ZERO"),
    ):
        if ctx.attr_int(attr, 0):
            defs[flag] = True
    defs["OFFSET_TRIM"] = f"{ctx.attr_int('offset_trim', 0)}i"
    for attr, name in (("window_left", "WINDOW_LEFT"), ("window_right", "WINDOW_RIGHT")):
        if ctx.attr_int(attr, -1) >= 0:
            defs[name] = f"{ctx.attr_int(attr, -1)}i"
    return defs


SDPA: dict[str, ScaledDotProductAttentionOp] = {"ScaledDotProductAttention": ScaledDotProductAttentionOp()}
