"""com.microsoft QLinearGlobalAveragePool: the mean of each channel of an 8-bit image, requantized as onnxruntime's
MLAS does it (qlinear_global_average_pool.wgsl): an exact int32 sum, then the multiplier
x_scale / (y_scale * image_size). `channels_last` reads [N, spatial..., C] and writes [N, 1..., C]; otherwise
[N, C, spatial...] -> [N, C, 1...]. Scales and zero points are per tensor. Like onnxruntime, images of 2^24
elements or more are refused; onnxruntime also refuses a multiplier outside [2^-32, 256) at run time, where
this kernel applies the same requantization to any multiplier.
"""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.core import InferenceCtx, NodeCtx, OperatorBase, PlanCtx, TensorType, ceil_div, load_wgsl, shape_of
from onyxia.core.shapes import dims_product
from onyxia.operators.family import named_rows
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.quantized.qlinear_params import byte_operand, one_element, range_defs, same_dtype, scale_input

__all__ = ["QLINEAR_GLOBAL_AVERAGE_POOL_MS", "QLinearGlobalAveragePoolOp"]

_SOURCE = load_wgsl(__package__, "qlinear_global_average_pool.wgsl")


@dataclass(frozen=True)
class QLinearGlobalAveragePoolOp(OperatorBase):
    name: str = "QLinearGlobalAveragePool"

    def _check(self, ctx: NodeCtx) -> bool:
        """Whether channels come last, after checking the inputs."""
        byte_operand(ctx, 0, "X")
        if ctx.input_rank(0) < 3:
            raise ctx.error(f"input 0 (X) has rank {ctx.input_rank(0)}; expected [N, C, spatial...] (rank >= 3)")
        for scale, zp, what in ((1, 2, "x"), (3, 4, "y")):
            scale_input(ctx, scale, f"{what}_scale")
            one_element(ctx, scale, f"{what}_scale")
            one_element(ctx, zp, f"{what}_zero_point")
            if not ctx.has_input(zp):
                raise ctx.error(f"input {zp} ({what}_zero_point) is required")
            same_dtype(ctx, zp, 0, f"{what}_zero_point")
        return ctx.attr_int("channels_last", 0) != 0

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        channels_last = self._check(ctx)
        dims = list(ctx.input_dims(0))
        if channels_last:
            out = [dims[0], *([1] * (len(dims) - 2)), dims[-1]]
        else:
            out = [dims[0], dims[1], *([1] * (len(dims) - 2))]
        return [TensorType(ctx.input_dtype(0), shape_of(out))]

    def plan(self, ctx: PlanCtx) -> None:
        channels_last = self._check(ctx)
        dims = list(ctx.input_dims(0))
        channels = dims[-1] if channels_last else dims[1]
        image = dims_product(dims[1:-1] if channels_last else dims[2:])
        if isinstance(image, int) and image >= 1 << 24:
            raise ctx.error(f"input 0 (X) has {image} elements per channel; onnxruntime allows fewer than 2^24")
        total = dims_product(ctx.output_dims(0))
        if total == 0:
            return
        dtype = ctx.input_dtype(0)
        defs: dict[str, object] = {**type_defs(T=dtype, S_T=ctx.input_dtype(1)), **range_defs(dtype)}
        defs["WORKGROUP_SIZE"] = WORKGROUP_SIZE
        if channels_last:
            defs["CHANNELS_LAST"] = True
        shader = ctx.compile_shader(
            "quantized/QLinearGlobalAveragePool", _SOURCE, defs, {"TOTAL": total, "C": channels, "IMAGE": image}
        )
        reads = [ctx.input(i) for i in range(5)]
        ctx.dispatch(shader, reads, [ctx.output(0)], ceil_div(total, WORKGROUP_SIZE))


QLINEAR_GLOBAL_AVERAGE_POOL_MS: dict[str, QLinearGlobalAveragePoolOp] = named_rows(  # com.microsoft
    {"QLinearGlobalAveragePool": QLinearGlobalAveragePoolOp()}
)
