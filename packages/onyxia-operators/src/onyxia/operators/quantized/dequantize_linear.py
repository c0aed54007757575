"""ONNX DequantizeLinear: y = (x - x_zero_point) * x_scale, per tensor or per axis.

onnxruntime's `quantize_dynamic` quantizes a Gather's table (the onnx-community ``_int8`` / ``_uint8``
embedding) and puts DequantizeLinear after the gathered rows, and after the tied lm head's Transpose of
the same table. onnxruntime computes ``float(int32(x) - int32(zero_point)) * scale``; the difference of
two 8-bit (or zero-point-free int32) values is exact in f32, so the broadcasting elementwise kernel's
``(f32(x) - f32(zp)) * scale`` is the same number. Blocked quantization (``block_size`` > 0) is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, OperatorBase, PlanCtx, SymbolicDim, TensorType
from onyxia.operators.elementwise.broadcast import emit_broadcast
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["DequantizeLinearOp"]

_VALUES = frozenset({DataType.UINT8, DataType.INT8, DataType.INT32})


def _scale_dims(ctx: NodeCtx) -> list[SymbolicDim]:
    """The scale's (and zero point's) dims aligned to x's for broadcasting: per tensor, or [C, 1, ...] at `axis`."""
    if ctx.attr_int("block_size", 0) != 0:
        raise ctx.error(
            f"attribute 'block_size' = {ctx.attr_int('block_size', 0)}: blocked dequantization is not implemented"
        )
    scale = list(ctx.input_dims(1))
    if len(scale) == 0 or (len(scale) == 1 and scale[0] == 1):
        return [1]
    rank = ctx.input_rank(0)
    axis = ctx.normalize_axis(ctx.attr_int("axis", 1), rank)
    if len(scale) != 1 or scale[0] != ctx.input_dims(0)[axis]:
        raise ctx.error(
            f"input 1 (x_scale) has dims {scale}; expected [] or [{ctx.input_dims(0)[axis]}] (x dim {axis})"
        )
    return [scale[0], *[1] * (rank - 1 - axis)]


def _check(ctx: NodeCtx) -> None:
    require_dtype(ctx, ctx.input_dtype(0), _VALUES, "input 0 (x)")
    require_dtype(ctx, ctx.input_dtype(1), FLOATS, "input 1 (x_scale)")
    if ctx.has_input(2):
        if ctx.input_dtype(2) != ctx.input_dtype(0):
            found, expected = ctx.input_dtype(2).name.lower(), ctx.input_dtype(0).name.lower()
            raise ctx.error(f"input 2 (x_zero_point) has dtype {found}; expected {expected}, the dtype of x")
        if list(ctx.input_dims(2)) != list(ctx.input_dims(1)):
            raise ctx.error(
                f"input 2 (x_zero_point) has dims {list(ctx.input_dims(2))}; expected x_scale's {list(ctx.input_dims(1))}"
            )


@dataclass(frozen=True)
class DequantizeLinearOp(OperatorBase):
    name: str = "DequantizeLinear"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        _check(ctx)
        _scale_dims(ctx)
        return [TensorType(ctx.input_dtype(1), ctx.input_shape(0))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        known = [ctx.input_value(i) for i in range(ctx.num_inputs) if ctx.has_input(i)]
        values = [v for v in known if v is not None and v.dtype != object]
        if len(values) < len(known):
            return None
        x, scale = values[0], values[1]
        shape = [int(d) for d in _scale_dims(ctx) if isinstance(d, int)]  # folded inputs have static dims
        zero = values[2].reshape(shape).astype(np.int64) if len(values) > 2 else 0
        y = (x.astype(np.int64) - zero).astype(np.float32) * scale.reshape(shape).astype(np.float32)
        return [y.astype(scale.dtype)]

    def plan(self, ctx: PlanCtx) -> None:
        _check(ctx)
        dims = _scale_dims(ctx)
        y_t = ctx.input_dtype(1).wgsl
        operands = [(ctx.input(0), ctx.input_dims(0), ctx.input_dtype(0)), (ctx.input(1), dims, ctx.input_dtype(1))]
        expr = f"{y_t}(f32(a) * f32(b))"
        if ctx.has_input(2):
            operands.append((ctx.input(2), dims, ctx.input_dtype(2)))
            expr = f"{y_t}((f32(a) - f32(c)) * f32(b))"
        emit_broadcast(ctx, expr, operands, (ctx.output(0), ctx.output_dims(0), ctx.input_dtype(1)))
