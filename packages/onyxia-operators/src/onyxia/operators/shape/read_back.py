"""`ReadBackOp` (com.onyxia ReadBack): a small integer tensor computed on the GPU whose value sizes
something, read back mid-run so the rest of the plan runs at the sizes it holds.

`InsertValueReadbacksPass` puts one in front of an input slot that sizes an output (a Reshape
target, a Range limit: `onyxia.core.value_slots`) when the value there comes from tensor data rather
than from shapes or constants. Its output's value is one fresh dim symbol per element
(``<tensor>[i]``), which shape inference and folding carry like Shape-derived values; its plan is a
`ReadValues` step: the runtime submits what came before, reads these few words back, binds the
symbols and patches the rest of the plan (no recompilation; `onyxia.runtime.segments`). When the
value turns out to be known at compile time, the node folds to it and plans nothing.

A float value that is exactly ``Cast<float>`` of an integer (VITS' ``Range(0.0, Cast<float>(Cast<int64>
(CumSum(durations)[-1])), 1.0)``) is read back as that integer: the node then carries the Cast's
``to`` attribute, reads the integer and presents the symbols as that float type. Its consumer sees
integral float bounds, which is what onnxruntime computes from them while the integer stays within
float32's exact range (2**24), far above any length a read-back sizes.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, PlanCtx, Static, SymbolicExpr, TensorType
from onyxia.core.plan import ReadValues

__all__ = ["MAX_READ_BACK", "READ_BACK", "ReadBackOp"]

MAX_READ_BACK = 64
"""Most elements a read-back moves: a shape or a few bounds, never activations."""

_INTEGERS = (DataType.INT64, DataType.INT32)
_FLOATS = (DataType.FLOAT, DataType.DOUBLE)  # a Cast of the integer read back (`to`): exact to 2**24


@dataclass(frozen=True)
class ReadBackOp:
    name: str = "ReadBack"
    plans_folded = True  # its output's value is symbols that only its own plan (the read-back) binds

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dtype, shape = ctx.input_dtype(0), ctx.input_shape(0)
        if dtype not in _INTEGERS:
            raise ctx.error(
                f"a value that sizes an output is computed on the GPU as {dtype.name.lower()}; Onyxia reads such "
                "values back only as integers (int64, int32), else it must be known at compile time"
            )
        count = int(np.prod(shape.dims, dtype=np.int64)) if isinstance(shape, Static) else None
        if count is None or count > MAX_READ_BACK:
            raise ctx.error(
                f"a value that sizes an output is computed on the GPU with shape {shape}; Onyxia reads back "
                f"static shapes of at most {MAX_READ_BACK} elements, else it must be known at compile time"
            )
        to = ctx.attr("to")
        if to is not None and DataType(int(to)) not in _FLOATS:
            raise ctx.error(f"attribute 'to' is {DataType(int(to)).name.lower()}; expected float or double")
        return [TensorType(dtype if to is None else DataType(int(to)), shape)]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        value = ctx.input_value(0)
        if value is not None and (ctx.attr("to") is None or value.dtype == object):
            return [value]
        if value is not None:
            return [value.astype(ctx.output_tensor(0).dtype.numpy)]
        return None if ctx.output_tensor(0).value is not None else [_symbols(ctx)]

    def plan(self, ctx: PlanCtx) -> None:
        value = ctx.output_tensor(0).value
        mine = _symbols(ctx)
        if value is None or value.shape != mine.shape or list(value.flat) != list(mine.flat):
            return  # the value was known at compile time: nothing to read
        ctx.op.steps.append(ReadValues(ctx.input(0), tuple(str(s) for s in mine.flat)))


def _symbols(ctx: FoldCtx | PlanCtx) -> np.ndarray:
    """The output's dim symbols, ``<output>[i]`` per element: the output name is unique in the graph."""
    out = ctx.output_tensor(0)
    assert isinstance(out.shape, Static), "ReadBack outputs are static (infer_output_shapes)"
    count = int(np.prod(out.shape.dims, dtype=np.int64))
    symbols = np.empty(count, dtype=object)
    symbols[:] = [SymbolicExpr.name(f"{out.name}[{i}]") for i in range(count)]
    return symbols.reshape(out.shape.dims)


READ_BACK: dict[str, ReadBackOp] = {"ReadBack": ReadBackOp()}
