"""com.microsoft QLinearSoftmax, bit for bit as onnxruntime's CPU kernel computes it (qlinear_softmax.wgsl).

onnxruntime tabulates exp((i - 255 + shift) * x_scale) for the 256 byte offsets from the row's maximum, in double,
with shift = max(0, log(FLT_MAX / D) - 5) / x_scale so that a row's f32 sum cannot overflow; sums a row's entries
in f32 and scales each by floor(1 / y_scale) / sum. The table needs double precision, which WGSL lacks, so it is
built here on the host: x_scale must be a compile-time constant (exporters store it as an initializer) and D
static. x_zero_point does not matter (softmax is shift-invariant). `opset` (required) picks the reduction: below
13 over the dims from `axis` on (default 1), else over `axis` alone (default -1).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    InferenceCtx,
    NodeCtx,
    OperatorBase,
    PlanCtx,
    TensorType,
    UnsupportedOpError,
    ceil_div,
    load_wgsl,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.family import named_rows
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.quantized.qlinear_elementwise import zero_or_input
from onyxia.operators.quantized.qlinear_params import (
    byte_operand,
    one_element,
    range_defs,
    same_dtype,
    scale_input,
)

__all__ = ["QLINEAR_SOFTMAX_MS", "QLinearSoftmaxOp", "exp_table"]

_SOURCE = load_wgsl(__package__, "qlinear_softmax.wgsl")


def exp_table(x_scale: float, d: int) -> np.ndarray:
    """onnxruntime's 256 f32 entries (QlinearBuildLookupTableUint32), entry i for a byte 255 - i below the max."""
    scale = np.float32(x_scale)
    shift = max(0.0, float(np.log(np.float64(np.float32(np.finfo(np.float32).max) / np.float32(d)))) - 5.0)
    shift /= float(scale)
    i = np.arange(256, dtype=np.float64)
    return np.exp((i - 255 + shift) * np.float64(scale)).astype(np.float32)


@dataclass(frozen=True)
class QLinearSoftmaxOp(OperatorBase):
    name: str = "QLinearSoftmax"

    def _check(self, ctx: NodeCtx) -> tuple[int, int]:
        """(axis, opset) after checking the inputs."""
        byte_operand(ctx, 0, "X")
        for scale, zp, what in ((1, 2, "x"), (3, 4, "y")):
            scale_input(ctx, scale, f"{what}_scale")
            one_element(ctx, scale, f"{what}_scale")
            one_element(ctx, zp, f"{what}_zero_point")
            same_dtype(ctx, zp, 0, f"{what}_zero_point")
        if ctx.attr("opset") is None:
            raise ctx.error("attribute 'opset' is required (it picks the reduction's axes)")
        opset = ctx.attr_int("opset")
        axis = ctx.normalize_axis(ctx.attr_int("axis", 1 if opset < 13 else -1), ctx.input_rank(0))
        return axis, opset

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        self._check(ctx)
        return [TensorType(ctx.input_dtype(0), ctx.input_shape(0))]

    def plan(self, ctx: PlanCtx) -> None:
        axis, opset = self._check(ctx)
        dims = list(ctx.input_dims(0))
        total = dims_product(dims)
        if total == 0:
            return
        d = dims_product(dims[axis:]) if opset < 13 else dims[axis]
        inner = 1 if opset < 13 else dims_product(dims[axis + 1 :])
        x_scale = ctx.input_value(1)
        if not isinstance(d, int) or x_scale is None or x_scale.dtype == np.dtype(object):
            raise UnsupportedOpError(
                f"node '{ctx.node.name}' ({ctx.node.op_type}): input 1 (x_scale) must be a compile-time constant and "
                f"the reduced size ({d}) static: the exp table is built on the host, in double as onnxruntime does"
            )
        scale = float(np.asarray(x_scale, np.float32).reshape(-1)[0])
        table = ctx.constant(f"qlinear_softmax:{np.float32(scale).view(np.uint32)}:{d}", exp_table(scale, d))
        defs: dict[str, object] = {**type_defs(T=ctx.input_dtype(0), S_T=ctx.input_dtype(3))}
        defs |= {"WORKGROUP_SIZE": WORKGROUP_SIZE, **range_defs(ctx.input_dtype(0))}
        rows = total // d if isinstance(total, int) else dims_product(dims[:axis]) * inner
        shader = ctx.compile_shader("quantized/QLinearSoftmax", _SOURCE, defs, {"ROWS": rows, "D": d, "INNER": inner})
        reads = [ctx.input(0), table, ctx.input(3), zero_or_input(ctx, 4, 0)]
        ctx.dispatch(shader, reads, [ctx.output(0)], ceil_div(rows, WORKGROUP_SIZE))


QLINEAR_SOFTMAX_MS: dict[str, QLinearSoftmaxOp] = named_rows({"QLinearSoftmax": QLinearSoftmaxOp()})  # com.microsoft
