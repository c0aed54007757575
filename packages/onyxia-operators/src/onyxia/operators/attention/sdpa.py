"""com.onyxia ScaledDotProductAttention: plain attention (optimum's exports) as one dispatch.

``ScaledDotProductAttention(q, k, v, mask?; q_scale, k_scale, scale, divisor, softcap, mask_true,
mask_false, zero_nan_rows, transpose_output)`` is, per batch row b and query head n, with kv head ``n // (heads / kv_heads)`` of k
and of v (grouped heads read their kv head; no repeated copy)::

    x = ((q * q_scale) @ (k * k_scale)^T) * scale / divisor       # each factor only when not 1
    x = softcap * tanh(x / softcap)                                # only when softcap > 0
    y = softmax(x + mask, axis=-1) @ v                             # mask broadcast to [B, N, S, T]

A float mask is added as it is; a bool mask adds ``where(mask, mask_true, mask_false)`` (the graph's
``Where(cond, 0, finfo.min)``, folded without materialising the float mask per layer).

q is [B, N, S, H], k [B, KVK, T, H], v [B, KVV, T, Hv]; y is [B, N, S, Hv], or [B, S, N, Hv] with
transpose_output (the graph's Transpose(0, 2, 1, 3) after attention, folded). Float32 only: the fused
kernel keeps scores in f32, which a float16 graph would round at every step.

Softmax follows onnxruntime's CPU kernel, exp(x - max) / sum over all T keys (masked keys included:
a finite mask such as finfo.min leaves a fully masked row a softmax over all keys, as onnxruntime
computes it). A row whose max is not finite or whose sum is NaN (all keys -inf, a +inf or NaN logit)
is all NaN in onnxruntime; such a row's output is NaN, or 0 with zero_nan_rows, which the graph's
``Where(IsNaN(p), 0, p)`` after the Softmax asks for. Keys at -inf contribute exactly 0.

Two kernels as GroupQueryAttention plans them (attention/sdpa.wgsl): rows for prompts (one
invocation per query row, an online softmax) and decode (one workgroup per head for a one-token
step); a symbolic query length plans both and the workgroup counts pick one at run time.
"""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, SymbolicDim, TensorType, ceil_div, load_wgsl
from onyxia.core.shapes import Absent, dims_product, shape_of
from onyxia.operators.attention.gqa_cache import binding_defs
from onyxia.operators.layout import broadcast_strides, node_literal

__all__ = ["SDPA", "SdpaGeometry", "ScaledDotProductAttentionOp", "sdpa_geometry"]

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
    for i, role in ((0, "q"), (1, "k"), (2, "v"), (3, "mask")):
        if i < 3 or ctx.has_input(i):
            if ctx.input_dtype(i) != DataType.FLOAT and not (i == 3 and ctx.input_dtype(i) == DataType.BOOL):
                raise ctx.error(f"input {i} ({role}) is {ctx.input_dtype(i).short}; expected f32")
            if isinstance(ctx.input_shape(i), Absent):
                raise ctx.error(f"input {i} ({role}) has no inferred shape")
    if (
        ctx.has_input(3)
        and ctx.input_dtype(3) == DataType.BOOL
        and not all(ctx.attr(a) is not None for a in ("mask_true", "mask_false"))
    ):
        raise ctx.error("a bool mask needs the attributes mask_true and mask_false (the values it selects)")
    dims = [ctx.input_dims(i) for i in range(3)]
    if any(len(d) != 4 for d in dims):
        raise ctx.error(f"q, k and v must be 4-D [batch, heads, rows, head size]; found {ctx.describe_inputs()}")
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
        mask = ctx.input_dims(3)
        scores = [batch, heads, seq, keys]
        if len(mask) > 4 or any(m not in (1, s) for m, s in zip(mask[::-1], scores[::-1])):
            raise ctx.error(f"the mask {list(mask)} does not broadcast to the scores {scores}")
    return SdpaGeometry(batch, heads, seq, keys, head, vd, kh, vh)


@dataclass(frozen=True)
class ScaledDotProductAttentionOp:
    name: str = "ScaledDotProductAttention"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        g = sdpa_geometry(ctx)
        dims = [g.batch, g.seq, g.heads] if ctx.attr_int("transpose_output", 0) else [g.batch, g.heads, g.seq]
        return [TensorType(DataType.FLOAT, shape_of([*dims, g.value_size]))]

    def try_fold(self, ctx: FoldCtx) -> None:
        return None  # made by a fusion from activations; never constant

    def plan(self, ctx: PlanCtx) -> None:
        g = sdpa_geometry(ctx)
        if dims_product([g.batch, g.seq]) == 0:
            return
        mask = ctx.has_input(3)
        names = ["Q", "K", "V", *(["MASK"] * mask), "OUT"]
        defs = _defs(ctx, g)
        dims: dict[str, SymbolicDim] = {"SEQ": g.seq, "KEYS": g.keys}
        if mask:
            strides = broadcast_strides(ctx.input_dims(3), [g.batch, g.heads, g.seq, g.keys])
            dims.update(MASK_B=strides[0], MASK_N=strides[1], MASK_S=strides[2], MASK_J=strides[3])
        reads = [ctx.input(i) for i in range(3 + mask)]
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


def _defs(ctx: PlanCtx, g: SdpaGeometry) -> dict[str, object]:
    defs: dict[str, object] = {
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
    if ctx.attr_int("zero_nan_rows", 0):
        defs["ZERO_NAN_ROWS"] = True
    if ctx.attr_int("transpose_output", 0):
        defs["TRANSPOSE_OUT"] = True
    return defs


SDPA: dict[str, ScaledDotProductAttentionOp] = {"ScaledDotProductAttention": ScaledDotProductAttentionOp()}
