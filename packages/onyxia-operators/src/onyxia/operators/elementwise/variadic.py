"""`VariadicElementwiseOp`: Sum, Mean, Max, Min over 1..N broadcasting inputs.

Planned as a left fold of broadcasting binary dispatches through scratch buffers (exporters use
two or three inputs, so one shader with N bindings would buy nothing); Mean divides in the last
step. A single input is a copy.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from functools import reduce

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, TensorType, as_output_value
from onyxia.core.shapes import dims_product
from onyxia.operators.elementwise.broadcast import emit_broadcast
from onyxia.operators.elementwise.widened import narrowed
from onyxia.operators.family import named_rows
from onyxia.operators.typesets import FLOATS, NUMERIC, require_dtype

__all__ = ["VARIADIC", "VariadicElementwiseOp"]


@dataclass(frozen=True)
class VariadicElementwiseOp:
    expr: str  # in `a` (the running result) and `b`
    fold: Callable[[np.ndarray, np.ndarray], np.ndarray]
    dtypes: frozenset[DataType] = NUMERIC
    mean: bool = False
    name: str = "variadic"

    def _inputs(self, ctx: NodeCtx) -> list[int]:
        return [i for i in range(ctx.num_inputs) if ctx.has_input(i)]

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        inputs = self._inputs(ctx)
        if not inputs:
            raise ctx.error("needs at least one input")
        dtypes = {ctx.input_dtype(i) for i in inputs}
        if len(dtypes) > 1:
            raise ctx.error(f"inputs must share a dtype, found {sorted(d.name.lower() for d in dtypes)}")
        return [TensorType(dtypes.pop(), ctx.broadcast(*(ctx.input_dims(i) for i in inputs)))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = [v for i in self._inputs(ctx) if (v := ctx.input_value(i)) is not None]
        if len(values) < len(self._inputs(ctx)):
            return None
        result = reduce(self.fold, values)
        if self.mean:
            result = result / len(values)
        return [as_output_value(result, ctx.output_numpy_dtype())]

    def plan(self, ctx: PlanCtx) -> None:
        inputs = self._inputs(ctx)
        dtype = ctx.input_dtype(inputs[0])
        require_dtype(ctx, dtype, self.dtypes if not self.mean else FLOATS)
        out_dims = ctx.output_dims(0)
        if len(inputs) == 1:
            ctx.copy(ctx.input(inputs[0]), ctx.output(0), dims_product(out_dims) * dtype.gpu_numpy.itemsize)
            return
        acc_ref, acc_dims = ctx.input(inputs[0]), ctx.input_dims(inputs[0])
        for step, i in enumerate(inputs[1:], start=2):
            last = step == len(inputs)
            dims = out_dims if last else ctx.broadcast(acc_dims, ctx.input_dims(i)).dims
            ref = ctx.output(0) if last else ctx.alloc_scratch(dims_product(dims) * dtype.gpu_numpy.itemsize, "acc")
            expr = narrowed(self.expr.format(T=dtype.wgsl), dtype)  # Sum of uint8 wraps at 256 (`widened`)
            if last and self.mean:
                expr = f"({expr}) / {dtype.wgsl}({len(inputs)})"
            operands = [(acc_ref, acc_dims, dtype), (ctx.input(i), ctx.input_dims(i), dtype)]
            emit_broadcast(ctx, expr, operands, (ref, dims, dtype))
            acc_ref, acc_dims = ref, dims


VARIADIC: dict[str, VariadicElementwiseOp] = named_rows(
    {
        "Sum": VariadicElementwiseOp("a + b", np.add),
        "Mean": VariadicElementwiseOp("a + b", np.add, mean=True),
        "Max": VariadicElementwiseOp("max(a, b)", np.maximum),
        "Min": VariadicElementwiseOp("min(a, b)", np.minimum),
    }
)
