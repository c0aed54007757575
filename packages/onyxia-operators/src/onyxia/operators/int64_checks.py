"""int64 on the GPU is i32: the ops whose int64 results can leave that range check them.

Onyxia stores int64 as i32 (WGSL has no 64-bit integers), which is exact while values fit; folding
on the host works in int64 numpy and refuses a constant that does not fit (`PlanBuilder`). Computed
on the GPU, Add, Sub, Mul, Neg and Abs, the sum and product reductions, CumSum and a Cast from
float32 or uint32 can leave the range where onnxruntime computes in 64 bits. Their int64 forms call
onyxia::errors' checked functions (``add_i64(a, b)`` ...) instead of wrapping: the node's error slot
is set and `run()` raises "int64 value out of the 32-bit range Onyxia computes in", naming the node.
A reduction checks every partial result, so a sum whose partials leave the range is refused even if
the total would fit again (never a wrapped value returned). A FusedElementwise body with such a
member binds the error word too (so the fusion leaves one of its eight bindings free for it).
"""

from __future__ import annotations

from onyxia.core import DataType, IrGraph, IrNode, PlanCtx
from onyxia.core.plan_ctx import ErrorSlotUse

__all__ = [
    "CHECKED_BINARY",
    "CHECKED_COMBINE",
    "CHECKED_UNARY",
    "checked_cast",
    "checked_defs",
    "checked_expression",
    "checks_int64",
    "int64_errors",
]

CHECKED_BINARY = {"Add": "add_i64(a, b)", "Sub": "sub_i64(a, b)", "Mul": "mul_i64(a, b)"}
CHECKED_UNARY = {"Neg": "neg_i64(x)", "Abs": "abs_i64(x)"}
CHECKED_COMBINE = {"a + b": "add_i64(a, b)", "a * b": "mul_i64(a, b)", "x * x": "mul_i64(x, x)"}
_CASTS = {DataType.FLOAT: "f32_to_i64(x)", DataType.DOUBLE: "f32_to_i64(x)", DataType.UINT32: "u32_to_i64(x)"}


def checked_cast(x: DataType, y: DataType) -> str | None:
    """The checked conversion of a stored `x` value to int64, or None when every value fits."""
    return _CASTS.get(x) if y == DataType.INT64 else None


def checked_expression(op_type: str, x: DataType, y: DataType) -> str | None:
    """The checked WGSL form of an elementwise `op_type` from input dtype `x` to output `y`, or None
    when the op cannot leave the i32 range there."""
    if op_type in ("Cast", "CastLike"):
        return checked_cast(x, y)
    if y != DataType.INT64:
        return None
    return CHECKED_BINARY.get(op_type) or CHECKED_UNARY.get(op_type)


def checks_int64(graph: IrGraph, node: IrNode) -> bool:
    """Whether `node` runs a checked int64 form on the GPU (its kernel binds the error word)."""
    if node.domain != "" or not node.inputs or node.inputs[0] is None or not node.outputs or node.outputs[0] is None:
        return False
    x, y = graph.tensor(node.inputs[0]).dtype, graph.tensor(node.outputs[0]).dtype
    return checked_expression(node.op_type, x, y) is not None


def int64_errors(ctx: PlanCtx, dtype: DataType) -> ErrorSlotUse | None:
    """The node's error slot when it computes in int64, else None."""
    return ctx.error_slot() if dtype == DataType.INT64 else None


def checked_defs(errors: ErrorSlotUse | None, binding: int) -> dict[str, object]:
    """Shader defs for a kernel whose ``#ifdef CHECKED`` imports onyxia::errors at `binding`."""
    return {} if errors is None else {"CHECKED": True, "ERRORS_BINDING": binding}
