"""ONNX QuantizeLinear: y = saturate(round_half_even(x / y_scale) + y_zero_point), per tensor, axis or block.

The output dtype is the zero point's, else `output_dtype`, else uint8 (the spec's default), and may be
int4/uint4 (written packed), int8/uint8 or int16/uint16; float8 outputs have no WebGPU form. As in
onnxruntime (MLAS): the quotient is the correctly rounded f32 division (WGSL's `/` may be 2.5 ULP off,
which would move a value lying next to a half, so the kernel uses onyxia::dynamic_quant's
`round_quotient`), rounded half to even, the zero point added, then clamped to the dtype's range.
float16 x and scales compute in f32, as onnxruntime converts them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, OperatorBase, PlanCtx, TensorType
from onyxia.operators.quantized.linear_quant import (
    QUANTIZED_RANGE,
    dtype_attribute,
    emit_linear_quant,
    expand_params,
    known_params,
    param_layout,
)
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["QuantizeLinearOp"]

_OUTPUTS = frozenset(QUANTIZED_RANGE)


def _output_dtype(ctx: NodeCtx) -> DataType:
    """The output dtype from the zero point or `output_dtype` (which must agree), after checking the inputs."""
    require_dtype(ctx, ctx.input_dtype(0), FLOATS, "input 0 (x)")
    require_dtype(ctx, ctx.input_dtype(1), FLOATS, "input 1 (y_scale)")
    attribute = dtype_attribute(ctx, "output_dtype")
    if ctx.has_input(2):
        zero = ctx.input_dtype(2)
        if attribute is not None and attribute != zero:
            raise ctx.error(
                f"attribute 'output_dtype' is {attribute.name.lower()} but input 2 (y_zero_point) is "
                f"{zero.name.lower()}; they must agree"
            )
        attribute = zero
    out = attribute or DataType.UINT8
    require_dtype(ctx, out, _OUTPUTS, "output")
    return out


def quantize(x: np.ndarray, scale: np.ndarray, zero: np.ndarray | int, dtype: DataType) -> np.ndarray:
    """The host form of the kernel: f32 quotient (numpy's is correctly rounded), half to even, saturated."""
    with np.errstate(divide="ignore", invalid="ignore", over="ignore"):
        quotient = x.astype(np.float32) / scale.astype(np.float32)
        q = np.rint(quotient).astype(np.float64) + np.asarray(zero, np.float64)
    lo, hi = QUANTIZED_RANGE[dtype]
    return np.clip(np.nan_to_num(q, nan=0.0), lo, hi).astype(dtype.numpy)


@dataclass(frozen=True)
class QuantizeLinearOp(OperatorBase):
    name: str = "QuantizeLinear"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        out = _output_dtype(ctx)
        param_layout(ctx)
        return [TensorType(out, ctx.input_shape(0))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        params = known_params(ctx)
        if params is None:
            return None
        x, scale, zero_point, layout = params
        zero = expand_params(zero_point, layout, x.shape) if zero_point is not None else 0
        return [quantize(x, expand_params(scale, layout, x.shape), zero, _output_dtype(ctx))]

    def plan(self, ctx: PlanCtx) -> None:
        _output_dtype(ctx)
        emit_linear_quant(ctx, param_layout(ctx), quantize=True)
