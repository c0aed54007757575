"""`BinaryElementwiseOp`: Add, Sub, Mul, Div, Pow, Mod, And ... and comparison rows, one line each.

All rows share numpy broadcasting, folding through their numpy function, and one shader whose
`EXPR` def is the row's expression in `a` and `b` (``{T}`` is the input's WGSL type). A row may
give a separate `int_expr` where WGSL integer semantics need another spelling. Where is the
ternary row (same shader, a third input).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    TensorType,
    as_output_value,
    is_symbolic_value,
)
from onyxia.operators.elementwise.broadcast import emit_broadcast
from onyxia.operators.elementwise.widened import narrowed
from onyxia.operators.family import named_rows
from onyxia.operators.int64_checks import CARRIED, checked_binary
from onyxia.operators.typesets import (
    ALL_GPU,
    BOOL,
    FLOATS,
    INTS,
    NUMERIC,
    SIGNED,
    SIGNED_INTS,
    UNSIGNED_INTS,
    require_dtype,
)

__all__ = ["BINARY", "BinaryElementwiseOp", "ComparisonOp", "TernaryElementwiseOp"]


@dataclass(frozen=True)
class BinaryElementwiseOp:
    expr: str
    fold: Callable[..., np.ndarray]
    dtypes: frozenset[DataType] = NUMERIC
    int_expr: str | None = None
    same_dtype: bool = True  # Pow's exponent may have its own dtype
    name: str = "binary"
    bool_output = False
    arity = 2

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        dtypes = [ctx.input_dtype(i) for i in range(self.arity)]
        value_dtypes = dtypes[1:] if self.arity == 3 else dtypes
        if self.same_dtype and len(set(value_dtypes)) > 1:
            found = " and ".join(d.name.lower() for d in value_dtypes)
            raise ctx.error(f"inputs must share a dtype, found {found}")
        out = DataType.BOOL if self.bool_output else value_dtypes[0]
        return [TensorType(out, ctx.broadcast(*(ctx.input_dims(i) for i in range(self.arity))))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        if not ctx.all_inputs_have_values():
            return None
        values = [ctx.input_value(i) for i in range(self.arity)]
        symbolic = any(is_symbolic_value(v) for v in values)
        with np.errstate(all="ignore"):
            try:
                return [as_output_value(self.fold(*values, **self.fold_attrs(ctx)), ctx.output_numpy_dtype())]
            except TypeError:
                if symbolic:  # e.g. Greater(total_length, 64) (Phi-3's LongRoPE switch): decided per run, on the GPU
                    return None
                raise

    def fold_attrs(self, ctx: NodeCtx) -> dict[str, object]:
        return {}

    def expression(self, ctx: NodeCtx, dtype: DataType) -> str:
        """The row's expression for input `dtype`; an 8/16-bit result narrowed to its width (`widened`)."""
        expr = self.int_expr if self.int_expr is not None and dtype not in FLOATS else self.expr
        return expr.format(T=dtype.wgsl) if self.bool_output else narrowed(expr.format(T=dtype.wgsl), dtype)

    def plan(self, ctx: PlanCtx) -> None:
        value_dtype = ctx.input_dtype(self.arity - 2 if self.arity == 3 else 0)
        require_dtype(ctx, value_dtype, self.dtypes)
        expr = self.expression(ctx, value_dtype)
        if self.bool_output:
            expr = f"select(0u, 1u, {expr})"
        checked = checked_binary(ctx.node.op_type, value_dtype)
        operands = [(ctx.input(i), ctx.input_dims(i), ctx.input_dtype(i)) for i in range(self.arity)]
        output = (ctx.output(0), ctx.output_dims(0), ctx.output_tensor(0).dtype)
        if checked is not None:  # int64/uint64 Add/Sub/Mul can leave the 32-bit range: reported, not wrapped
            emit_broadcast(ctx, checked, operands, output, ctx.error_slot())
        else:
            emit_broadcast(ctx, expr, operands, output)


@dataclass(frozen=True)
class ComparisonOp(BinaryElementwiseOp):
    """Rows whose result is bool (stored as u32 0/1 on the GPU)."""

    bool_output = True


@dataclass(frozen=True)
class TernaryElementwiseOp(BinaryElementwiseOp):
    """Where(condition, x, y): the condition is bool; x and y share the output dtype."""

    arity = 3


@dataclass(frozen=True)
class _ModOp(BinaryElementwiseOp):
    """Mod: `fmod=1` is C fmod (sign of the dividend); `fmod=0` takes the divisor's sign (Python)."""

    def fold_attrs(self, ctx: NodeCtx) -> dict[str, object]:
        return {"fmod": ctx.attr_int("fmod", 0)}

    def expression(self, ctx: NodeCtx, dtype: DataType) -> str:
        if ctx.attr_int("fmod", 0) == 1:
            if dtype in FLOATS:
                return f"{dtype.wgsl}(fmod_f32(f32(a), f32(b)))"
            # rem_i32, not `%`: NVIDIA's Vulkan driver evaluates i32 `%` as unsigned (onyxia::math)
            return f"{dtype.wgsl}(rem_i32(i32(a), i32(b)))" if dtype in SIGNED_INTS else "a % b"
        if dtype in FLOATS:
            return f"{dtype.wgsl}(mod_floor_f32(f32(a), f32(b)))"
        return "a % b" if dtype not in SIGNED else f"{dtype.wgsl}(mod_floor_i32(i32(a), i32(b)))"


@dataclass(frozen=True)
class _PReluOp(BinaryElementwiseOp):
    """PRelu broadcasts its slope one way, to x's shape (MTCNN's per-channel slopes of shape [C, 1, 1])."""

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        out = super().infer_output_shapes(ctx)[0]
        x = ctx.input_shape(0)
        if out.shape != x:
            raise ctx.error(f"input 1 (slope) has shape {ctx.input_shape(1)}; expected it to broadcast to x's {x}")
        return [out]


@dataclass(frozen=True)
class _BitShiftOp(BinaryElementwiseOp):
    """BitShift (`direction` LEFT or RIGHT), as opset 28 defines it: a right shift of a signed type
    is arithmetic; bits shifted past the type's width (its sign bit included) are dropped, though
    the u32/i32 storage is wider; a shift by a negative amount or by the width or more gives the
    sign fill (-1 for a right shift of a negative value, else 0), where WGSL would shift by the
    amount modulo 32. int64 is stored as i32 and uint64 as u32: their left shift is checked
    (onyxia::errors) and a result outside the 32-bit range is reported, never wrapped."""

    def fold_attrs(self, ctx: NodeCtx) -> dict[str, object]:
        return {"direction": self._direction(ctx)}

    def _direction(self, ctx: NodeCtx) -> str:
        direction = ctx.attr_str("direction", "")
        if direction not in ("LEFT", "RIGHT"):
            raise ctx.error(f"attribute direction={direction!r} is not one of LEFT, RIGHT")
        return direction

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        self._direction(ctx)
        return super().infer_output_shapes(ctx)

    def expression(self, ctx: NodeCtx, dtype: DataType) -> str:
        bits, left = 8 * dtype.numpy.itemsize, self._direction(ctx) == "LEFT"
        if dtype == DataType.UINT64:  # values below 2^32: a right shift by 32 or more is 0
            return "shl_u64(a, b)" if left else "select(0u, a >> b, b < 32u)"
        if dtype in UNSIGNED_INTS:
            shifted = f"(a << b) & {(1 << bits) - 1}u" if left else "a >> b"
            return f"select(0u, {shifted}, b < {bits}u)"
        if not left:  # a shift by 31 is the sign fill for every value the i32 storage holds
            return "a >> select(min(u32(b), 31u), 31u, b < 0)"
        if dtype == DataType.INT64:
            return "shl_i64(a, b)"
        pad = 32 - bits  # up to the sign bit of i32, and back: the bits past the type's width are gone
        return f"select(0, bitcast<i32>(bitcast<u32>(a) << (u32(b) + {pad}u)) >> {pad}u, b >= 0 && b < {bits})"

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(0)
        if dtype not in CARRIED or self._direction(ctx) != "LEFT":
            super().plan(ctx)
            return
        operands = [(ctx.input(i), ctx.input_dims(i), dtype) for i in range(2)]
        output = (ctx.output(0), ctx.output_dims(0), dtype)
        emit_broadcast(ctx, self.expression(ctx, dtype), operands, output, ctx.error_slot())


def _onnx_bit_shift(a: np.ndarray, b: np.ndarray, direction: str) -> np.ndarray:
    # numpy shifts wrap in the dtype like ONNX, but a shift outside [0, width) is platform-defined
    bits = 8 * a.dtype.itemsize
    valid = (b >= 0) & (b < bits)
    amount = np.where(valid, b, 0).astype(a.dtype)
    if direction == "LEFT":
        return np.where(valid, a << amount, 0).astype(a.dtype)
    return np.where(valid, a >> amount, np.where(a < 0, -1, 0)).astype(a.dtype)


def _prelu(x: np.ndarray, slope: np.ndarray) -> np.ndarray:
    return np.where(x > 0, x, x * slope).astype(x.dtype)


def _onnx_div(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # ONNX integer Div truncates toward zero (as WGSL `/` on i32 does); numpy's `//` floors.
    if a.dtype == object:  # symbolic shape arithmetic: dims are non-negative, so floor == trunc
        return a // b
    if np.issubdtype(a.dtype, np.integer):
        return np.trunc(np.true_divide(a, b)).astype(a.dtype)
    return np.divide(a, b)


def _onnx_pow(a: np.ndarray, b: np.ndarray) -> np.ndarray:
    # The result keeps the base's dtype; numpy refuses integer bases with negative exponents.
    return np.power(a.astype(np.float64), b.astype(np.float64)).astype(a.dtype)


def _onnx_mod(a: np.ndarray, b: np.ndarray, fmod: int) -> np.ndarray:
    return np.fmod(a, b) if fmod else np.mod(a, b)


BINARY: dict[str, BinaryElementwiseOp] = named_rows(
    {
        "Add": BinaryElementwiseOp("a + b", np.add),
        "Sub": BinaryElementwiseOp("a - b", np.subtract),
        "Mul": BinaryElementwiseOp("a * b", np.multiply),
        "Div": BinaryElementwiseOp("a / b", _onnx_div),
        "Pow": BinaryElementwiseOp(
            "{T}(pow_f32(f32(a), f32(b)))", _onnx_pow, FLOATS | SIGNED, "{T}(pow_i32(i32(a), i32(b)))", False
        ),
        "Mod": _ModOp("", _onnx_mod),
        "And": BinaryElementwiseOp("a & b", np.logical_and, BOOL),
        "Or": BinaryElementwiseOp("a | b", np.logical_or, BOOL),
        "Xor": BinaryElementwiseOp("a ^ b", np.logical_xor, BOOL),
        "BitwiseAnd": BinaryElementwiseOp("a & b", np.bitwise_and, INTS),
        "BitwiseOr": BinaryElementwiseOp("a | b", np.bitwise_or, INTS),
        "BitwiseXor": BinaryElementwiseOp("a ^ b", np.bitwise_xor, INTS),
        "Equal": ComparisonOp("a == b", np.equal, ALL_GPU),
        "Less": ComparisonOp("a < b", np.less),
        "LessOrEqual": ComparisonOp("a <= b", np.less_equal),
        "Greater": ComparisonOp("a > b", np.greater),
        "GreaterOrEqual": ComparisonOp("a >= b", np.greater_equal),
        "PRelu": _PReluOp("select(a * b, a, a > {T}(0))", _prelu),
        "BitShift": _BitShiftOp("", _onnx_bit_shift, INTS),
        "Where": TernaryElementwiseOp("select(c, b, a != 0u)", np.where, ALL_GPU),
    }
)
