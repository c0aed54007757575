"""ONNX DynamicQuantizeLinear: f32 -> uint8 with a per-tensor scale and zero point computed from the data.

What onnxruntime's `quantize_dynamic` puts before every MatMulInteger (the onnx-community ``_int8`` and
``_uint8`` files): the activation's range [min(x, 0), max(x, 0)] maps onto [0, 255]. Scale, zero point
and values follow onnxruntime's CPU kernel bit for bit (`dynamic_quantize`, and the shader's header): the
same float operations in the same order, divisions correctly rounded, rounding half to even
(`onyxia::dynamic_quant`, which DynamicQuantizeMatMul's kernel shares). One workgroup reduces and
quantizes, so a decode step's row costs one dispatch.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    BufferRef,
    DataType,
    FoldCtx,
    InferenceCtx,
    OperatorBase,
    PlanCtx,
    SymbolicDim,
    TensorType,
    load_wgsl,
    shape_of,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import WORKGROUP_SIZE

__all__ = ["DynamicQuantizeLinearOp", "dispatch_dynamic_quantize", "dynamic_quantize"]


def dynamic_quantize(x: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(y, scale, zero_point) as onnxruntime computes them (GetQuantizationParameter<uint8_t>, MLAS
    QuantizeLinear): float32 operations throughout, numpy's division and rounding being IEEE's."""
    x = np.asarray(x, np.float32)
    low = np.float32(min(float(x.min()) if x.size else 0.0, 0.0))
    high = np.float32(max(float(x.max()) if x.size else 0.0, 0.0))
    scale = np.float32(1.0) if high == low else np.float32(high - low) / np.float32(255.0)
    zero_point = np.round(np.clip(np.float32(0.0) - low / scale, np.float32(0.0), np.float32(255.0)))
    with np.errstate(over="ignore", invalid="ignore"):
        y = np.clip(np.round(x / scale) + zero_point, 0, 255)
    return y.astype(np.uint8), np.array(scale, np.float32), np.array(zero_point, np.uint8)


@dataclass(frozen=True)
class DynamicQuantizeLinearOp(OperatorBase):
    name: str = "DynamicQuantizeLinear"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        if ctx.input_dtype(0) != DataType.FLOAT:
            raise ctx.error(f"input 0 (x) has dtype {ctx.input_dtype(0).name.lower()}; expected float32")
        scalar = shape_of([])
        return [
            TensorType(DataType.UINT8, ctx.input_shape(0)),
            TensorType(DataType.FLOAT, scalar),
            TensorType(DataType.UINT8, scalar),
        ]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        x = ctx.input_value(0)
        if x is None or x.dtype == object:
            return None
        return list(dynamic_quantize(x))

    def plan(self, ctx: PlanCtx) -> None:
        n = dims_product(ctx.input_dims(0))
        dispatch_dynamic_quantize(ctx, ctx.input(0), n, [ctx.output(0), ctx.output(1), ctx.output(2)])


def dispatch_dynamic_quantize(
    ctx: PlanCtx, x: BufferRef, n: SymbolicDim, writes: list[BufferRef], share: SymbolicDim = 1
) -> None:
    """Quantize the `n` f32 of `x` into `writes`: (y, scale, zero point), or only (scale, zero point) for a
    product that quantizes its rows itself (DynamicQuantizeMatMul); `share` (1, or 0 or 1 at run time) scales
    the one workgroup."""
    defs: dict[str, object] = {"WORKGROUP_SIZE": WORKGROUP_SIZE}
    if len(writes) == 2:
        defs["PARAMS_ONLY"] = True
    source = load_wgsl(__package__, "dynamic_quantize_linear.wgsl")
    shader = ctx.compile_shader("DynamicQuantizeLinear", source, defs, {"N": n})
    ctx.dispatch(shader, [x], writes, share)
