"""`UnaryElementwiseOp`: Cos, Sqrt, Neg ... one row each, one shader (`EXPR` in `x`)."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, PlanCtx, TensorType, ceil_div, load_wgsl
from onyxia.core.shapes import dims_product
from onyxia.operators.family import named_rows
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.typesets import FLOATS, SIGNED, require_dtype

__all__ = ["UNARY", "UnaryElementwiseOp"]

_SOURCE = load_wgsl(__package__, "unary.wgsl")


@dataclass(frozen=True)
class UnaryElementwiseOp:
    expr: str
    fold: Callable[[np.ndarray], np.ndarray]
    dtypes: frozenset[DataType] = FLOATS
    name: str = "unary"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        return [TensorType(ctx.input_dtype(0), ctx.input_shape(0))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        return ctx.unary_fold(self.fold)

    def plan(self, ctx: PlanCtx) -> None:
        x = ctx.input_tensor(0)
        require_dtype(ctx, x.dtype, self.dtypes)
        n = dims_product(ctx.output_dims(0))
        defs = {**type_defs(X_T=x.dtype, Y_T=ctx.output_tensor(0).dtype), "EXPR": self.expr}
        defs["WORKGROUP_SIZE"] = WORKGROUP_SIZE
        shader = ctx.compile_shader("elementwise/unary", _SOURCE, defs, {"N": n})
        ctx.dispatch(shader, [ctx.input(0)], [ctx.output(0)], ceil_div(n, WORKGROUP_SIZE))


UNARY: dict[str, UnaryElementwiseOp] = named_rows(
    {
        "Cos": UnaryElementwiseOp("cos(x)", np.cos),
        "Sqrt": UnaryElementwiseOp("sqrt(x)", np.sqrt),
        "Neg": UnaryElementwiseOp("-x", np.negative, SIGNED),
    }
)
