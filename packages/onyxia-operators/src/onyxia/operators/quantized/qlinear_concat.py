"""com.microsoft QLinearConcat: inputs (Y_scale, Y_zero_point, then X, X_scale, X_zero_point per tensor) joined
along `axis`, every tensor requantized to Y's scale and zero point as onnxruntime's lookup tables do
(qlinear_concat.wgsl). One dispatch per input writes its slab of the output. Scales and zero points are per
tensor, and every X shares Y_zero_point's 8-bit dtype.
"""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.core import (
    InferenceCtx,
    NodeCtx,
    OperatorBase,
    PlanCtx,
    SymbolicDim,
    TensorType,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.family import named_rows
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.quantized.linear_quant import QUANTIZED_RANGE
from onyxia.operators.quantized.qlinear_params import byte_operand, one_element, same_dtype, scale_input

__all__ = ["QLINEAR_CONCAT_MS", "QLinearConcatOp"]

_SOURCE = load_wgsl(__package__, "qlinear_concat.wgsl")


@dataclass(frozen=True)
class QLinearConcatOp(OperatorBase):
    name: str = "QLinearConcat"

    def _check(self, ctx: NodeCtx) -> int:
        """The axis, after checking every input."""
        if ctx.num_inputs < 5 or (ctx.num_inputs - 2) % 3:
            raise ctx.error(
                f"has {ctx.num_inputs} inputs; expected Y_scale, Y_zero_point, then (X, X_scale, X_zero_point) triples"
            )
        byte_operand(ctx, 1, "Y_zero_point")
        scale_input(ctx, 0, "Y_scale")
        one_element(ctx, 0, "Y_scale")
        one_element(ctx, 1, "Y_zero_point")
        rank = ctx.input_rank(2)
        axis = ctx.normalize_axis(ctx.attr_int("axis"), rank)
        for x in range(2, ctx.num_inputs, 3):
            same_dtype(ctx, x, 1, f"X ({(x - 2) // 3})")
            same_dtype(ctx, x + 2, 1, f"X_zero_point ({(x - 2) // 3})")
            scale_input(ctx, x + 1, "X_scale")
            one_element(ctx, x + 1, "X_scale")
            one_element(ctx, x + 2, "X_zero_point")
            dims, first = list(ctx.input_dims(x)), list(ctx.input_dims(2))
            if len(dims) != rank or any(d != f for k, (d, f) in enumerate(zip(dims, first)) if k != axis):
                raise ctx.error(f"input {x} has dims {dims}; expected input 2's {first} except along axis {axis}")
        return axis

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        axis = self._check(ctx)
        dims = list(ctx.input_dims(2))
        dims[axis] = sum((ctx.input_dims(x)[axis] for x in range(5, ctx.num_inputs, 3)), dims[axis])
        return [TensorType(ctx.input_dtype(1), shape_of(dims))]

    def plan(self, ctx: PlanCtx) -> None:
        axis = self._check(ctx)
        out = list(ctx.output_dims(0))
        inner = dims_product(out[axis + 1 :])
        lo, hi = QUANTIZED_RANGE[ctx.input_dtype(1)]
        defs = {**type_defs(T=ctx.input_dtype(1), S_T=ctx.input_dtype(0)), "LO": f"{lo}.0", "HI": f"{hi}.0"}
        defs["WORKGROUP_SIZE"] = WORKGROUP_SIZE
        offset: SymbolicDim = 0
        for x in range(2, ctx.num_inputs, 3):
            dims = list(ctx.input_dims(x))
            total = dims_product(dims)
            if total != 0:
                sizes = {"TOTAL": total, "SLAB": dims[axis] * inner, "ROW": out[axis] * inner, "OFFSET": offset * inner}
                shader = ctx.compile_shader("quantized/QLinearConcat", _SOURCE, defs, sizes)
                reads = [ctx.input(x), ctx.input(x + 1), ctx.input(x + 2), ctx.input(0), ctx.input(1)]
                ctx.dispatch(shader, reads, [ctx.output(0)], ceil_div(total, WORKGROUP_SIZE))
            offset = offset + dims[axis]


QLINEAR_CONCAT_MS: dict[str, QLinearConcatOp] = named_rows({"QLinearConcat": QLinearConcatOp()})  # com.microsoft
