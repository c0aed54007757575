"""com.onyxia RmsNormRotary: a per-head RMSNorm then com.microsoft RotaryEmbedding, one dispatch.

``RmsNormRotary(x, position_ids, cos_cache, sin_cache, scale; epsilon, interleaved, num_heads,
rotary_embedding_dim)`` is ``RotaryEmbedding(rms(x) * scale, position_ids, cos_cache, sin_cache)`` where rms
normalises every head (HEAD consecutive elements, HEAD being RotaryEmbedding's head size) with float32
statistics, as SimplifiedLayerNormalization over the last axis of x viewed as [..., HEAD]. Inputs 0-3 and the
rotary attributes are RotaryEmbedding's, with its every position-id format, so the rotation uses the graph's
explicit positions whatever they are. The norm computes in float32 (any scale dtype) and its result is
rounded to x's dtype, the output's, before the rotation. 3-D x only.

The `FuseRmsNormIntoRotary` pass makes it from Gemma 3's q_norm / k_norm: ``Reshape(x, [0, -1, HEAD])``,
SimplifiedLayerNormalization (between Casts to float32 and back in the float16 exports), ``Reshape`` back,
RotaryEmbedding.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, TensorType, load_wgsl
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import node_literal, type_defs
from onyxia.operators.normalization.layer_norm import normalize_rows, row_workgroup_size
from onyxia.operators.normalization.rotary import RotaryGeometry, is_interleaved, rotary_geometry, rotary_numpy
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["RMS_NORM_ROTARY", "RmsNormRotaryOp"]

_SOURCE = load_wgsl(__package__, "rms_norm_rotary.wgsl")
_SCALE = 4
_DEFAULT_EPSILON = 1e-5  # SimplifiedLayerNormalization's


@dataclass(frozen=True)
class RmsNormRotaryOp:
    name: str = "RmsNormRotary"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        _checked(ctx)
        return [TensorType(ctx.input_dtype(0), ctx.input_shape(0))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = ctx.known_values()
        if values is None or any(v.dtype == object for v in values):
            return None
        geo = _checked(ctx)
        x, pos, cos, sin, scale = values
        heads = x.reshape(-1, geo.head)
        normed = normalize_rows({"x": heads, "scale": scale}, 1, _epsilon(ctx), rms=True)["y"]
        normed = normed.astype(ctx.output_numpy_dtype(0)).reshape(x.shape)
        y = rotary_numpy(normed, pos, cos, sin, geo, is_interleaved(ctx))
        return [y.astype(ctx.output_numpy_dtype(0))]

    def plan(self, ctx: PlanCtx) -> None:
        geo = _checked(ctx)
        for i, role in ((0, "input"), (2, "cos_cache"), (3, "sin_cache"), (_SCALE, "scale")):
            require_dtype(ctx, ctx.input_dtype(i), FLOATS, f"input {i} ({role})")
        n = dims_product(ctx.input_dims(0))
        if n == 0:
            return
        types = type_defs(X_T=ctx.input_dtype(0), COS_T=ctx.input_dtype(2), SIN_T=ctx.input_dtype(3))
        defs: dict[str, object] = {
            **types,
            **type_defs(SCALE_T=ctx.input_dtype(_SCALE), Y_T=ctx.output_tensor(0).dtype),
        }
        defs |= {
            "WORKGROUP_SIZE": row_workgroup_size(geo.head),
            "EPSILON": node_literal(ctx, DataType.FLOAT, _epsilon(ctx), "attribute 'epsilon'"),
        }
        defs["INTERLEAVED"] = is_interleaved(ctx)
        if ctx.output_tensor(0).dtype == DataType.FLOAT16:
            defs["Y_F16"] = True
        if geo.pos_offset:
            defs["POS_OFFSET"] = True
        max_pos, cache_w = ctx.input_dims(2)
        heads = n // geo.head
        dims = {
            "HEADS_TOTAL": heads,
            "HEAD": geo.head,
            "ROTARY": geo.rotary,
            "ROW": geo.heads * geo.head,
            "S": geo.seq,
            "BATCH": geo.seq * geo.heads * geo.head,
            "POS_B_STRIDE": geo.pos_batch_stride,
            "CACHE_W": cache_w,
            "MAX_POS": max_pos,
        }
        shader = ctx.compile_shader("normalization/rms_norm_rotary", _SOURCE, defs, dims)
        ctx.dispatch(shader, [ctx.input(i) for i in range(5)], [ctx.output(0)], heads)


def _epsilon(ctx: NodeCtx) -> float:
    return float(np.float32(ctx.attr_float("epsilon", _DEFAULT_EPSILON)))


def _checked(ctx: NodeCtx) -> RotaryGeometry:
    """RotaryEmbedding's geometry of inputs 0-3, for 3-D x and a scale of one head's length."""
    if ctx.num_inputs != 5 or not all(ctx.has_input(i) for i in range(5)):
        raise ctx.error("expected inputs (x, position_ids, cos_cache, sin_cache, scale)")
    geo = rotary_geometry(ctx)
    if geo.four_d:
        raise ctx.error("input 0 must be 3-D [batch, sequence, heads * head_size]")
    if dims_product(ctx.input_dims(_SCALE)) != geo.head:
        raise ctx.error(f"input 4 (scale) has shape {ctx.input_shape(_SCALE)}; expected {geo.head} elements (one head)")
    return geo


RMS_NORM_ROTARY: dict[str, RmsNormRotaryOp] = {"RmsNormRotary": RmsNormRotaryOp()}
