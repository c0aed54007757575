"""com.microsoft QLinearAdd, QLinearMul, QLinearSigmoid and QLinearLeakyRelu: elementwise ops on 8-bit tensors with
per-tensor scales and zero points, computed as onnxruntime's CPU kernels compute them (qlinear_elementwise.wgsl states the
arithmetic of each). QLinearAdd and QLinearMul broadcast as numpy does. Every scale and zero point holds one
element (onnxruntime's kernels take them so); an omitted zero point is 0 (a shared one-element constant).

Exactness: QLinearMul is integer products requantized as MLAS does, bit for bit. QLinearAdd follows MLAS's AVX2
kernel (the ratios a_scale / c_scale and b_scale / c_scale, two fused multiply-adds); WGSL's `fma` need not be
fused, and onnxruntime takes a scalar operand through a slightly different order, so an output could differ by
one where the sum lies within an ULP of a half: the tests measure 0 such elements over their random cases.
QLinearSigmoid evaluates 1 / (1 + exp(-x)) where onnxruntime tabulates MLAS's rational approximation of the
logistic function: the two differ by a few ULP, which moves an output by one only when sigmoid(x) / y_scale lies
that close to a half; the tests accept at most 1 in 1000 such elements against onnxruntime (measured: 0 of 51,200,
every byte value under 100 random parameter sets each for uint8 and int8). QLinearLeakyRelu's table transform
(v or v * alpha) is one correctly rounded product, so it is bit for bit.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    BufferRef,
    DataType,
    InferenceCtx,
    NodeCtx,
    OperatorBase,
    PlanCtx,
    SymbolicDim,
    TensorType,
    ceil_div,
    load_wgsl,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.family import named_rows
from onyxia.operators.layout import WORKGROUP_SIZE, broadcast_strides, node_literal, type_defs
from onyxia.operators.quantized.qlinear_params import byte_operand, one_element, range_defs, same_dtype, scale_input

__all__ = ["QLINEAR_ELEMENTWISE_MS", "QLinearElementwiseOp", "zero_or_input"]

_SOURCE = load_wgsl(__package__, "qlinear_elementwise.wgsl")


def zero_or_input(ctx: PlanCtx, i: int, like: int) -> BufferRef:
    """Input `i` (a zero point), or a one-element zero of input `like`'s dtype when the node omits it."""
    if ctx.has_input(i):
        return ctx.input(i)
    dtype = ctx.input_dtype(like)
    return ctx.constant(f"onyxia:zero:{dtype.name.lower()}", np.zeros(1, dtype.numpy))


@dataclass(frozen=True)
class QLinearElementwiseOp(OperatorBase):
    """A row: the shader's MODE and whether the op has a second operand (inputs 3, 4, 5)."""

    mode: str
    binary: bool
    name: str = "QLinearAdd"

    def _params(self) -> tuple[tuple[int, int, str], ...]:
        """(scale input, zero point input, tensor name) of each operand and of the output."""
        if self.binary:
            return ((1, 2, "A"), (4, 5, "B"), (6, 7, "C"))
        return ((1, 2, "X"), (3, 4, "Y"))

    def _check(self, ctx: NodeCtx) -> None:
        byte_operand(ctx, 0, self._params()[0][2])
        if self.binary:
            byte_operand(ctx, 3, "B")
            same_dtype(ctx, 3, 0, "B")
        for scale, zp, what in self._params():
            scale_input(ctx, scale, f"{what}_scale")
            same_dtype(ctx, zp, 0, f"{what}_zero_point")
            one_element(ctx, scale, f"{what}_scale")
            one_element(ctx, zp, f"{what}_zero_point")

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        self._check(ctx)
        shape = ctx.broadcast(ctx.input_dims(0), ctx.input_dims(3)) if self.binary else ctx.input_shape(0)
        return [TensorType(ctx.input_dtype(0), shape)]

    def plan(self, ctx: PlanCtx) -> None:
        self._check(ctx)
        out_dims = list(ctx.output_dims(0))
        total = dims_product(out_dims)
        if total == 0:
            return
        dtype, scale_t = ctx.input_dtype(0), ctx.input_dtype(1)
        reads = [ctx.input(0), ctx.input(1), zero_or_input(ctx, 2, 0)]
        if self.binary:
            reads += [ctx.input(3), ctx.input(4), zero_or_input(ctx, 5, 0), ctx.input(6), zero_or_input(ctx, 7, 0)]
        else:
            reads += [ctx.input(3), zero_or_input(ctx, 4, 0)]
        defs: dict[str, object] = {**type_defs(T=dtype, S_T=scale_t), **range_defs(dtype), "MODE": self.mode}
        if self.mode == "leaky_relu":
            alpha = ctx.attr_float("alpha", 0.01)
            defs["ALPHA"] = node_literal(ctx, DataType.FLOAT, alpha, "attribute 'alpha'")
        defs |= {"WORKGROUP_SIZE": WORKGROUP_SIZE, "RANK": max(len(out_dims), 1)}
        if self.binary:
            defs["BINARY"] = True
        shape: list[SymbolicDim] = out_dims or [1]
        b_dims = ctx.input_dims(3) if self.binary else ctx.input_dims(0)
        dims = {
            "TOTAL": total,
            "OUT_DIMS": shape,
            "A_STRIDES": broadcast_strides(ctx.input_dims(0), shape),
            "B_STRIDES": broadcast_strides(b_dims, shape),
        }
        shader = ctx.compile_shader(f"quantized/{ctx.node.op_type}", _SOURCE, defs, dims)
        ctx.dispatch(shader, reads, [ctx.output(0)], ceil_div(total, WORKGROUP_SIZE))


QLINEAR_ELEMENTWISE_MS: dict[str, QLinearElementwiseOp] = named_rows(  # com.microsoft
    {
        "QLinearAdd": QLinearElementwiseOp("add", binary=True),
        "QLinearMul": QLinearElementwiseOp("mul", binary=True),
        "QLinearSigmoid": QLinearElementwiseOp("sigmoid", binary=False),
        "QLinearLeakyRelu": QLinearElementwiseOp("leaky_relu", binary=False),
    }
)
