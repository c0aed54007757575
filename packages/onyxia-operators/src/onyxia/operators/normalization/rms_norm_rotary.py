"""com.onyxia RmsNormRotary: a per-head RMSNorm then com.microsoft RotaryEmbedding, one dispatch; and
RmsNormRotaryPair, the same for two tensors rotated at the same positions (a layer's q and k), one dispatch.

``RmsNormRotary(x, position_ids, cos_cache, sin_cache, scale; epsilon, interleaved, num_heads,
rotary_embedding_dim)`` is ``RotaryEmbedding(rms(x) * scale, position_ids, cos_cache, sin_cache)`` where rms
normalises every head (HEAD consecutive elements, HEAD being RotaryEmbedding's head size) with float32
statistics, as SimplifiedLayerNormalization over the last axis of x viewed as [..., HEAD]. Inputs 0-3 and the
rotary attributes are RotaryEmbedding's, with its every position-id format, so the rotation uses the graph's
explicit positions whatever they are. The norm computes in float32 (any scale dtype) and its result is
rounded to x's dtype, the output's, before the rotation. 3-D x only.

``RmsNormRotaryPair(x, position_ids, cos_cache, sin_cache, scale, x2, scale2)`` returns (y, y2): y as above,
y2 the same for x2 and scale2 with x2's own head count (its heads have x's size; batch and sequence are x's).

The `FuseRmsNormIntoRotary` pass makes RmsNormRotary from Gemma 3's q_norm / k_norm: ``Reshape(x, [0, -1, HEAD])``,
SimplifiedLayerNormalization (between Casts to float32 and back in the float16 exports), ``Reshape`` back,
RotaryEmbedding; `FuseRmsNormRotaryPair` pairs a layer's two (`normalization.rotary_pair_fusions`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, TensorType, load_wgsl
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import node_literal, type_defs
from onyxia.operators.normalization.checks import require_equal_dim
from onyxia.operators.normalization.layer_norm import normalize_rows, row_lanes
from onyxia.operators.normalization.rotary import (
    RotaryGeometry,
    angle_cache,
    is_interleaved,
    rotary_geometry,
    rotary_numpy,
    rotary_tables,
)
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["RMS_NORM_ROTARY", "RmsNormRotaryOp"]

_SOURCE = load_wgsl(__package__, "rms_norm_rotary.wgsl")
_SCALE = 4
_X2, _SCALE2 = 5, 6
_DEFAULT_EPSILON = 1e-5  # SimplifiedLayerNormalization's


@dataclass(frozen=True)
class RmsNormRotaryOp:
    name: str = "RmsNormRotary"
    pair: bool = False  # RmsNormRotaryPair: inputs 5 and 6 are a second x and its scale, output 1 its result

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        _checked(ctx, self.pair)
        return [TensorType(ctx.input_dtype(i), ctx.input_shape(i)) for i in ((0, _X2) if self.pair else (0,))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = ctx.known_values()
        if values is None or any(v.dtype == object for v in values):
            return None
        geo, geo2 = _checked(ctx, self.pair)
        x, pos, cos, sin, scale = values[:5]
        tensors = [(x, scale, geo), *([(values[_X2], values[_SCALE2], geo2)] if self.pair else [])]
        dtype = ctx.output_numpy_dtype(0)
        outputs = []
        for x, scale, g in tensors:
            normed = normalize_rows({"x": x.reshape(-1, g.head), "scale": scale}, 1, _epsilon(ctx), rms=True)["y"]
            tables = rotary_tables(ctx, cos, sin)
            y = rotary_numpy(normed.astype(dtype).reshape(x.shape), pos, *tables, g, is_interleaved(ctx))
            outputs.append(y.astype(dtype))
        return outputs

    def plan(self, ctx: PlanCtx) -> None:
        geo, geo2 = _checked(ctx, self.pair)
        for i, role in ((0, "input"), (2, "cos_cache"), (3, "sin_cache"), (_SCALE, "scale")):
            require_dtype(ctx, ctx.input_dtype(i), FLOATS, f"input {i} ({role})")
        n = dims_product(ctx.input_dims(0))
        if n == 0 or (self.pair and dims_product(ctx.input_dims(_X2)) == 0):
            return  # the fusion pairs tensors of one sequence: both empty or neither
        types = type_defs(X_T=ctx.input_dtype(0), COS_T=ctx.input_dtype(2), SIN_T=ctx.input_dtype(3))
        defs: dict[str, object] = {
            **types,
            **type_defs(SCALE_T=ctx.input_dtype(_SCALE), Y_T=ctx.output_tensor(0).dtype),
        }
        defs |= {
            **row_lanes(geo.head),
            "EPSILON": node_literal(ctx, DataType.FLOAT, _epsilon(ctx), "attribute 'epsilon'"),
        }
        defs["INTERLEAVED"] = is_interleaved(ctx)
        if angle_cache(ctx):
            defs["ANGLE_CACHE"] = True
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
        reads, writes, groups = [ctx.input(i) for i in range(5)], [ctx.output(0)], heads
        out_binding = len(reads) + 2 * self.pair
        defs["B_Y"] = out_binding
        if self.pair:
            heads2 = dims_product(ctx.input_dims(_X2)) // geo.head
            defs.update(PAIR=True, B_Y2=out_binding + 1)
            dims.update(HEADS_TOTAL2=heads2, ROW2=geo2.heads * geo.head, BATCH2=geo.seq * geo2.heads * geo.head)
            reads, writes, groups = (
                [*reads, ctx.input(_X2), ctx.input(_SCALE2)],
                [*writes, ctx.output(1)],
                heads + heads2,
            )
        shader = ctx.compile_shader("normalization/rms_norm_rotary", _SOURCE, defs, dims)
        ctx.dispatch(shader, reads, writes, groups)


def _epsilon(ctx: NodeCtx) -> float:
    return float(np.float32(ctx.attr_float("epsilon", _DEFAULT_EPSILON)))


def _checked(ctx: NodeCtx, pair: bool) -> tuple[RotaryGeometry, RotaryGeometry]:
    """RotaryEmbedding's geometry of inputs 0-3, for 3-D x and a scale of one head's length; with `pair`, x2's
    too (x's head size, batch and sequence; its own head count). Without, the second is the first."""
    count = 7 if pair else 5
    if ctx.num_inputs != count or not all(ctx.has_input(i) for i in range(count)):
        extra = ", x2, scale2" if pair else ""
        raise ctx.error(f"expected inputs (x, position_ids, cos_cache, sin_cache, scale{extra})")
    geo = rotary_geometry(ctx)
    if geo.four_d:
        raise ctx.error("input 0 must be 3-D [batch, sequence, heads * head_size]")
    for i in (_SCALE, _SCALE2) if pair else (_SCALE,):
        if dims_product(ctx.input_dims(i)) != geo.head:
            raise ctx.error(
                f"input {i} (scale) has shape {ctx.input_shape(i)}; expected {geo.head} elements (one head)"
            )
    if not pair:
        return geo, geo
    return geo, _second_geometry(ctx, geo)


def _second_geometry(ctx: NodeCtx, geo: RotaryGeometry) -> RotaryGeometry:
    dims = ctx.input_dims(_X2)
    same = len(dims) == 3 and require_equal_dim(ctx, dims[0], geo.batch, "x2 batch")
    same = same and require_equal_dim(ctx, dims[1], geo.seq, "x2 sequence")
    hidden = dims[2] if len(dims) == 3 else None
    if not same or not isinstance(hidden, int) or hidden % geo.head:
        raise ctx.error(
            f"input 5 (x2) has shape {ctx.input_shape(_X2)}; expected [{geo.batch}, {geo.seq}, heads * {geo.head}]"
        )
    if ctx.input_dtype(_X2) != ctx.input_dtype(0) or ctx.input_dtype(_SCALE2) != ctx.input_dtype(_SCALE):
        raise ctx.error("x2 and scale2 must have the dtypes of x and scale")
    return geo._replace(heads=hidden // geo.head)


RMS_NORM_ROTARY: dict[str, RmsNormRotaryOp] = {
    "RmsNormRotary": RmsNormRotaryOp(),
    "RmsNormRotaryPair": RmsNormRotaryOp("RmsNormRotaryPair", pair=True),
}
