"""`BinaryElementwiseOp`: Add, Sub, Mul, Div ... and the comparison rows, one line each.

All rows share numpy broadcasting, folding through their numpy function, and one shader whose
`EXPR` def is the row's expression in `a` and `b`. Equal-shape inputs skip index arithmetic.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, PlanCtx, TensorType, ceil_div, load_wgsl
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import WORKGROUP_SIZE, broadcast_strides, type_defs
from onyxia.operators.family import named_rows
from onyxia.operators.typesets import ALL_GPU, NUMERIC, require_dtype

__all__ = ["BINARY", "BinaryElementwiseOp", "ComparisonOp"]

_SOURCE = load_wgsl(__package__, "binary.wgsl")


@dataclass(frozen=True)
class BinaryElementwiseOp:
    expr: str
    fold: Callable[[np.ndarray, np.ndarray], np.ndarray]
    dtypes: frozenset[DataType] = NUMERIC
    name: str = "binary"
    bool_output = False

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        a, b = ctx.input_dtype(0), ctx.input_dtype(1)
        if a != b:
            raise ctx.error(f"inputs must share a dtype, found {a.name.lower()} and {b.name.lower()}")
        out = DataType.BOOL if self.bool_output else a
        return [TensorType(out, ctx.broadcast(ctx.input_dims(0), ctx.input_dims(1)))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        return ctx.binary_fold(self.fold)

    def plan(self, ctx: PlanCtx) -> None:
        a, y = ctx.input_tensor(0), ctx.output_tensor(0)
        require_dtype(ctx, a.dtype, self.dtypes)
        out_dims = list(ctx.output_dims(0)) or [1]
        a_dims, b_dims = list(ctx.input_dims(0)) or [1], list(ctx.input_dims(1)) or [1]
        n = dims_product(out_dims)
        defs = {**type_defs(A_T=a.dtype, B_T=ctx.input_dtype(1), Y_T=y.dtype), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        defs["EXPR"] = f"select(0u, 1u, {self.expr})" if self.bool_output else self.expr
        dims: dict[str, object] = {"N": n}
        if a_dims != out_dims or b_dims != out_dims:
            defs.update(BROADCAST=True, RANK=len(out_dims))
            dims.update(
                OUT_DIMS=out_dims,
                A_STRIDES=broadcast_strides(a_dims, out_dims),
                B_STRIDES=broadcast_strides(b_dims, out_dims),
            )
        shader = ctx.compile_shader("elementwise/binary", _SOURCE, defs, dims)  # type: ignore[arg-type]
        ctx.dispatch(shader, [ctx.input(0), ctx.input(1)], [ctx.output(0)], ceil_div(n, WORKGROUP_SIZE))


@dataclass(frozen=True)
class ComparisonOp(BinaryElementwiseOp):
    """Rows whose result is bool (stored as u32 0/1 on the GPU)."""

    dtypes: frozenset[DataType] = NUMERIC
    bool_output = True


def _onnx_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # ONNX integer Div truncates toward zero (as WGSL `/` on i32 does); numpy's `//` floors.
    if a.dtype == object:  # symbolic shape arithmetic: dims are non-negative, so floor == trunc
        return a // b
    if np.issubdtype(a.dtype, np.integer):
        return np.trunc(np.true_divide(a, b)).astype(a.dtype)
    return np.divide(a, b)


BINARY: dict[str, BinaryElementwiseOp] = named_rows({
    "Add": BinaryElementwiseOp("a + b", np.add),
    "Sub": BinaryElementwiseOp("a - b", np.subtract),
    "Mul": BinaryElementwiseOp("a * b", np.multiply),
    "Div": BinaryElementwiseOp("a / b", _onnx_div),
    "Equal": ComparisonOp("a == b", np.equal, ALL_GPU),
    "Less": ComparisonOp("a < b", np.less),
    "LessOrEqual": ComparisonOp("a <= b", np.less_equal),
    "Greater": ComparisonOp("a > b", np.greater),
    "GreaterOrEqual": ComparisonOp("a >= b", np.greater_equal),
})
