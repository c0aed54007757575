"""ONNX DequantizeLinear: y = (x - x_zero_point) * x_scale, per tensor, per axis or per block.

onnxruntime's `quantize_dynamic` quantizes a Gather's table (the onnx-community ``_int8`` / ``_uint8``
embedding) and puts DequantizeLinear after the gathered rows, and after the tied lm head's Transpose of
the same table; QDQ exports put it after int4/uint4 weights. onnxruntime computes
``float(int32(x) - int32(zero_point)) * scale``, and so does the kernel (`linear_quant`): the
difference is exact for every 4/8/16-bit x, and for int32 x as exact as onnxruntime's. x may be
int4/uint4 (read packed), int8/uint8, int16/uint16 or int32; the output is the scale's dtype, or
`output_dtype` (opset 23) when set.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, OperatorBase, PlanCtx, TensorType
from onyxia.operators.quantized.linear_quant import (
    dtype_attribute,
    emit_linear_quant,
    expand_params,
    known_params,
    param_layout,
)
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["DequantizeLinearOp"]

_VALUES = frozenset(
    {DataType.UINT4, DataType.INT4, DataType.UINT8, DataType.INT8, DataType.UINT16, DataType.INT16, DataType.INT32}
)


def _check(ctx: NodeCtx) -> DataType:
    """The output dtype, after checking the inputs' dtypes."""
    require_dtype(ctx, ctx.input_dtype(0), _VALUES, "input 0 (x)")
    require_dtype(ctx, ctx.input_dtype(1), FLOATS, "input 1 (x_scale)")
    if ctx.has_input(2) and ctx.input_dtype(2) != ctx.input_dtype(0):
        found, expected = ctx.input_dtype(2).name.lower(), ctx.input_dtype(0).name.lower()
        raise ctx.error(f"input 2 (x_zero_point) has dtype {found}; expected {expected}, the dtype of x")
    out = dtype_attribute(ctx, "output_dtype") or ctx.input_dtype(1)
    require_dtype(ctx, out, FLOATS, "attribute 'output_dtype'")
    return out


@dataclass(frozen=True)
class DequantizeLinearOp(OperatorBase):
    name: str = "DequantizeLinear"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        out = _check(ctx)
        param_layout(ctx)
        return [TensorType(out, ctx.input_shape(0))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        params = known_params(ctx)
        if params is None:
            return None
        x, scale, zero_point, layout = params
        zero = expand_params(zero_point, layout, x.shape).astype(np.int64) if zero_point is not None else 0
        difference = (x.astype(np.int64) - zero).astype(np.float32)
        y = difference * expand_params(scale, layout, x.shape).astype(np.float32)
        return [y.astype(_check(ctx).numpy)]

    def plan(self, ctx: PlanCtx) -> None:
        _check(ctx)
        emit_linear_quant(ctx, param_layout(ctx), quantize=False)
