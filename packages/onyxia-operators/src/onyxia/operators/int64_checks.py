"""int64 on the GPU is i32 (uint64 u32): the ops whose results can leave that range check them.

Onyxia stores int64 as i32 (WGSL has no 64-bit integers), which is exact while values fit; folding
on the host works in int64 numpy and refuses a constant that does not fit (`PlanBuilder`). Computed
on the GPU, Add, Sub, Mul, Neg and Abs, the sum and product reductions, CumSum and a Cast from
float32 or uint32 can leave the range where onnxruntime computes in 64 bits. Their int64 forms call
onyxia::errors' checked functions (``add_i64(a, b)`` ...) instead of wrapping: the node's error slot
is set and `run()` raises "int64 value out of the 32-bit range Onyxia computes in", naming the node.
A reduction checks every partial result, so a sum whose partials leave the range is refused even if
the total would fit again (never a wrapped value returned). A FusedElementwise body with such a
member binds the error word too (so the fusion leaves one of its eight bindings free for it).

uint64 is carried the same way, as u32 (values below 2^32, checked at upload): its Add, Sub, Mul,
sum and product reductions, CumSum, left BitShift, and a Cast to it from a signed (int4 included)
or float type call the ``*_u64`` twins, which report a result past 2^32 - 1 or below 0 ("uint64
value out of the 32-bit range") where onnxruntime would hold it in 64 bits (or wrap a negative one
near 2^64); a Cast from it to int64 is checked as uint32's is. The other ops that take uint64 (data
movement, comparisons, Div, Mod, Min/Max, Abs, the bitwise ops, other Casts from it) cannot leave
the range and run as uint32 does; the scatters' add and mul reductions, which have no checked
form, refuse it (`typesets.WRAPPING_NUMERIC`).
"""

from __future__ import annotations

from onyxia.core import DataType, IrGraph, IrNode, PlanCtx
from onyxia.core.plan_ctx import ErrorSlotUse

__all__ = [
    "CARRIED",
    "checked_binary",
    "checked_cast",
    "checked_combine",
    "checked_defs",
    "checked_expression",
    "checked_unary",
    "checks_int64",
    "int64_errors",
]

_I64, _U64 = DataType.INT64, DataType.UINT64
CARRIED = frozenset({_I64, _U64})  # 64-bit integers carried in 32 bits: their arithmetic is checked
_BINARY = {
    _I64: {"Add": "add_i64(a, b)", "Sub": "sub_i64(a, b)", "Mul": "mul_i64(a, b)"},
    _U64: {"Add": "add_u64(a, b)", "Sub": "sub_u64(a, b)", "Mul": "mul_u64(a, b)"},
}
_UNARY = {_I64: {"Neg": "neg_i64(x)", "Abs": "abs_i64(x)"}}
_COMBINE = {
    _I64: {"a + b": "add_i64(a, b)", "a * b": "mul_i64(a, b)", "x * x": "mul_i64(x, x)"},
    _U64: {"a + b": "add_u64(a, b)", "a * b": "mul_u64(a, b)", "x * x": "mul_u64(x, x)"},
}
_TO_I64 = {DataType.FLOAT: "f32_to_i64(x)", DataType.DOUBLE: "f32_to_i64(x)", DataType.UINT32: "u32_to_i64(x)"}
_TO_U64 = {t: "i32_to_u64(x)" for t in (DataType.INT4, DataType.INT8, DataType.INT16, DataType.INT32, _I64)}
_CASTS = {
    _I64: {**_TO_I64, _U64: "u32_to_i64(x)"},
    _U64: {**_TO_U64, **{t: "f32_to_u64(f32(x))" for t in (DataType.FLOAT, DataType.DOUBLE, DataType.FLOAT16)}},
}


def checked_cast(x: DataType, y: DataType) -> str | None:
    """The checked conversion of a stored `x` value to int64 or uint64, or None when every value fits."""
    return _CASTS.get(y, {}).get(x)


def checked_binary(op_type: str, dtype: DataType) -> str | None:
    """The checked form of a binary row computing in `dtype`, in ``a`` and ``b``."""
    return _BINARY.get(dtype, {}).get(op_type)


def checked_unary(op_type: str, dtype: DataType) -> str | None:
    """The checked form of a unary row computing in `dtype`, in ``x``."""
    return _UNARY.get(dtype, {}).get(op_type)


def checked_combine(expr: str, dtype: DataType) -> str:
    """A reduction's map or combine expression in its checked form for `dtype` (itself when none)."""
    return _COMBINE.get(dtype, {}).get(expr, expr)


def checked_expression(op_type: str, x: DataType, y: DataType) -> str | None:
    """The checked WGSL form of an elementwise `op_type` from input dtype `x` to output `y`, or None
    when the op cannot leave the 32-bit range there."""
    if op_type in ("Cast", "CastLike"):
        return checked_cast(x, y)
    return checked_binary(op_type, y) or checked_unary(op_type, y)


def checks_int64(graph: IrGraph, node: IrNode) -> bool:
    """Whether `node` runs a checked int64 form on the GPU (its kernel binds the error word)."""
    if node.domain != "" or not node.inputs or node.inputs[0] is None or not node.outputs or node.outputs[0] is None:
        return False
    x, y = graph.tensor(node.inputs[0]).dtype, graph.tensor(node.outputs[0]).dtype
    return checked_expression(node.op_type, x, y) is not None


def int64_errors(ctx: PlanCtx, dtype: DataType) -> ErrorSlotUse | None:
    """The node's error slot when it computes in int64 or uint64, else None."""
    return ctx.error_slot() if dtype in CARRIED else None


def checked_defs(errors: ErrorSlotUse | None, binding: int) -> dict[str, object]:
    """Shader defs for a kernel whose ``#ifdef CHECKED`` imports onyxia::errors at `binding`."""
    return {} if errors is None else {"CHECKED": True, "ERRORS_BINDING": binding}
