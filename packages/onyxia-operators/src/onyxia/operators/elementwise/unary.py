"""`UnaryElementwiseOp`: Cos, Sqrt, Neg, Gelu, Relu, BitwiseNot ... one row each, one shader (`EXPR` in `x`).

A row's `expr` is a format string: ``{T}`` is the WGSL storage type and each attribute the row
declares in `attrs` (name -> spec default) is substituted by its value, so Gelu's `approximate`
or LeakyRelu's `alpha` stay data; numbers go in as typed literals of ``{T}`` (`wgsl_literal`), so
``alpha=inf`` or ``nan`` compiles and computes as in onnxruntime. Math WGSL lacks (erf, a NaN-safe
tanh) comes from onyxia::math; onyxia::special keeps C's accuracy where WGSL's builtins or the
textbook formulas lose it (asinh/acosh/atanh through log1p, sinh/cosh past e^x's overflow, asin/acos
through atan, a softplus that neither overflows nor cancels for Mish). Rows computing in f32 whatever
the storage type (as onnxruntime's float16 kernels cast to float and back) set `attr_type` to FLOAT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, TensorType, ceil_div, load_wgsl
from onyxia.core.plan_ctx import ErrorSlotUse
from onyxia.core.shapes import dims_product
from onyxia.operators.elementwise.broadcast import emit_broadcast
from onyxia.operators.elementwise.numpy_math import (
    celu,
    elu,
    erf,
    gelu,
    is_inf,
    mish,
    selu,
    shrink,
    sigmoid,
    softplus,
    softsign,
    thresholded_relu,
)
from onyxia.operators.elementwise.widened import narrowed
from onyxia.operators.family import named_rows
from onyxia.operators.int64_checks import checked_defs, checked_unary
from onyxia.operators.layout import WORKGROUP_SIZE, node_literal, type_defs
from onyxia.operators.typesets import BOOL, FLOATS, INTS, NUMERIC, SIGNED, require_dtype

__all__ = ["UNARY", "UnaryElementwiseOp", "emit_unary"]

_SOURCE = load_wgsl(__package__, "unary.wgsl")


@dataclass(frozen=True)
class UnaryElementwiseOp:
    expr: str
    fold: Callable[..., np.ndarray]
    dtypes: frozenset[DataType] = FLOATS
    attrs: dict[str, float | str] = field(default_factory=dict)  # name -> ONNX default
    out: DataType | None = None  # None: same as the input
    name: str = "unary"
    choices: dict[str, tuple[str, ...]] = field(default_factory=dict)  # a string attribute's spec values
    attr_type: DataType | None = None  # the type numeric attributes are written in; None: the storage type

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        self.attr_values(ctx)  # a string attribute outside the spec fails here, not in the WGSL compiler
        return [TensorType(self.out or ctx.input_dtype(0), ctx.input_shape(0))]

    def attr_values(self, ctx: NodeCtx) -> dict[str, object]:
        values = {k: ctx.attr_str(k, v) if isinstance(v, str) else ctx.attr(k, v) for k, v in self.attrs.items()}
        for name, allowed in self.choices.items():
            if values[name] not in allowed:
                raise ctx.error(f"attribute {name}={values[name]!r} is not one of {', '.join(allowed)}")
        return {k: type(self.attrs[k])(v) for k, v in values.items()}

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        attrs = self.attr_values(ctx)
        return ctx.unary_fold(lambda x: self.fold(x, **attrs))

    def expression(self, ctx: NodeCtx, dtype: DataType) -> str:
        """The row's `expr` for input `dtype`, its result narrowed to an 8/16-bit output's width (`widened`)."""
        expr = self.expr.format(
            T=dtype.wgsl, **{k: self._literal(ctx, dtype, k, v) for k, v in self.attr_values(ctx).items()}
        )
        return narrowed(expr, self.out or dtype)

    def _literal(self, ctx: NodeCtx, dtype: DataType, name: str, value: object) -> str:
        """A string attribute as is, a flag (declared with a bool default) as a WGSL bool, a number
        as a literal of `attr_type` (rows computing in f32 whatever the storage) or the storage type."""
        if isinstance(value, str):
            return value
        if isinstance(value, bool):
            return "true" if value else "false"
        return node_literal(ctx, self.attr_type or dtype, value, f"attribute '{name}'")

    def plan(self, ctx: PlanCtx) -> None:
        x = ctx.input_tensor(0)
        require_dtype(ctx, x.dtype, self.dtypes)
        checked = checked_unary(ctx.node.op_type, x.dtype)
        if checked is not None:  # int64 Neg/Abs of -2^31 leaves the i32 range: reported, not wrapped
            emit_unary(ctx, checked, ctx.error_slot())
        else:
            emit_unary(ctx, self.expression(ctx, x.dtype))


def emit_unary(ctx: PlanCtx, expr: str, errors: ErrorSlotUse | None = None) -> None:
    """One dispatch of ``y[i] = expr(x[i])`` from input 0 to output 0 (shared with Cast); with
    `errors`, `expr` may call onyxia::errors' checked functions (`onyxia.operators.int64_checks`)."""
    n = dims_product(ctx.output_dims(0))
    defs = {**type_defs(X_T=ctx.input_dtype(0), Y_T=ctx.output_tensor(0).dtype), "EXPR": expr}
    defs["WORKGROUP_SIZE"] = WORKGROUP_SIZE
    defs.update(checked_defs(errors, 2))
    immediates = None if errors is None else errors.immediates
    shader = ctx.compile_shader("elementwise/unary", _SOURCE, defs, {"N": n}, immediates)
    writes = [ctx.output(0)] if errors is None else [ctx.output(0), errors.ref]
    ctx.dispatch(shader, [ctx.input(0)], writes, ceil_div(n, WORKGROUP_SIZE))


@dataclass(frozen=True)
class _ClipOp(UnaryElementwiseOp):
    """Clip's bounds are inputs 1 and 2 (attributes before opset 11). Known at compile time, as
    exporters leave them, they become literals of the expression, so Clip stays a unary row that
    fuses; fed at run time, the kernel reads them from their buffers (a broadcast dispatch of x and
    the one-element bounds), so a bound never has to be a constant."""

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        for i, role in ((1, "min"), (2, "max")):
            if ctx.has_input(i) and dims_product(ctx.input_dims(i)) != 1:
                raise ctx.error(f"input {i} ({role}) has shape {ctx.input_shape(i)}; expected one element")
        return [TensorType(ctx.input_dtype(0), ctx.input_shape(0))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        return None if _run_time_bounds(ctx) else super().try_fold(ctx)

    def attr_values(self, ctx: NodeCtx) -> dict[str, object]:
        dtype = ctx.input_dtype(0)
        info = np.finfo(dtype.gpu_numpy) if dtype in FLOATS else np.iinfo(dtype.gpu_numpy)
        lo = ctx.input_value(1) if ctx.has_input(1) else ctx.attr("min", None)
        hi = ctx.input_value(2) if ctx.has_input(2) else ctx.attr("max", None)
        if _run_time_bounds(ctx):  # callers check first: the literal forms need both values
            raise ctx.error("Clip bounds read at run time have no literal form")
        lo_v = info.min if lo is None else np.asarray(lo).item()
        hi_v = info.max if hi is None else np.asarray(hi).item()
        return {"lo": lo_v, "hi": hi_v}

    def expression(self, ctx: NodeCtx, dtype: DataType) -> str:
        bounds = self.attr_values(ctx)
        if dtype not in FLOATS:  # an int64 bound beyond i32 clips every value the i32 storage holds alike
            info = np.iinfo(dtype.gpu_numpy)
            bounds = {k: min(max(int(np.asarray(v)), int(info.min)), int(info.max)) for k, v in bounds.items()}
        lo = node_literal(ctx, dtype, bounds["lo"], "input 1 (min)")
        hi = node_literal(ctx, dtype, bounds["hi"], "input 2 (max)")
        if dtype not in FLOATS:
            return f"clamp(x, {lo}, {hi})"
        # a NaN input stays NaN as in onnxruntime (WGSL leaves clamp's NaN result to the GPU)
        return f"select(clamp(x, {lo}, {hi}), x, isnan_f32(f32(x)))"

    def plan(self, ctx: PlanCtx) -> None:
        if not _run_time_bounds(ctx):
            super().plan(ctx)
            return
        x = ctx.input_dtype(0)
        require_dtype(ctx, x, self.dtypes)
        # x is `a`; the bounds given follow as `b` (and `c`): max(x, lo) then min(.., hi), onnxruntime's
        # order, so lo > hi gives hi (WGSL's clamp leaves that case to the implementation)
        given = [(i, f) for i, f in ((1, "max"), (2, "min")) if ctx.has_input(i)]
        expr = "a"
        for name, (_, f) in zip("bc", given):
            expr = f"{f}({expr}, {name})"
        if x in FLOATS:
            expr = f"select({expr}, a, isnan_f32(f32(a)))"
        operands = [(ctx.input(i), ctx.input_dims(i), ctx.input_dtype(i)) for i in (0, *(i for i, _ in given))]
        emit_broadcast(ctx, expr, operands, (ctx.output(0), ctx.output_dims(0), ctx.output_tensor(0).dtype))


def _run_time_bounds(ctx: NodeCtx) -> bool:
    """Whether a Clip bound is an input whose value is only known at run time."""
    return any(ctx.has_input(i) and ctx.input_value(i) is None for i in (1, 2))


def _clip(x: np.ndarray, lo: float, hi: float) -> np.ndarray:
    return np.clip(x, lo, hi)


_F32 = "{T}({f}(f32(x)))"  # math done in f32 whatever the storage type
# uint64 is stored as u32 (values below 2^32), and ~x of such a value is 2^64 - 1 - x, beyond that storage
_COMPLEMENTABLE = INTS - {DataType.UINT64}
_F = DataType.FLOAT


def _in_f32(f: str) -> str:
    """`f`'s result, computed in f32 from x in f32, in the storage type (onnxruntime's float16
    kernels for these ops cast to float and back)."""
    return _F32.replace("{f}", f)


UNARY: dict[str, UnaryElementwiseOp] = named_rows(
    {
        "Cos": UnaryElementwiseOp("cos(x)", np.cos),
        "Sin": UnaryElementwiseOp("sin(x)", np.sin),
        "Tanh": UnaryElementwiseOp(_F32.replace("{f}", "tanh_f32"), np.tanh),
        "Sqrt": UnaryElementwiseOp("sqrt(x)", np.sqrt),
        "Exp": UnaryElementwiseOp("exp(x)", np.exp),
        "Log": UnaryElementwiseOp("log(x)", np.log),
        "Erf": UnaryElementwiseOp(_F32.replace("{f}", "erf_f32"), erf),
        "Sigmoid": UnaryElementwiseOp(_F32.replace("{f}", "sigmoid_f32"), sigmoid),
        "Reciprocal": UnaryElementwiseOp("{T}(1) / x", np.reciprocal),
        "Floor": UnaryElementwiseOp("floor(x)", np.floor),
        "Ceil": UnaryElementwiseOp("ceil(x)", np.ceil),
        "Round": UnaryElementwiseOp("round(x)", np.round),  # both round half to even
        "Neg": UnaryElementwiseOp("-x", np.negative, SIGNED),
        "Abs": UnaryElementwiseOp("abs(x)", np.abs, NUMERIC),
        "Sign": UnaryElementwiseOp("select(sign(x), x, isnan_f32(f32(x)))", np.sign, SIGNED),  # NaN stays NaN
        # NaN stays NaN, as in onnxruntime. Without the bit test an H200 (NVIDIA's Vulkan driver) gave 0 for NaN
        # and +0 for -0, as if the select were max(x, 0): Vulkan lets a driver assume no NaN unless the SPIR-V
        # asks otherwise (naga's does not), so only an integer test of the bits (isnan_f32) is sure to see one
        "Relu": UnaryElementwiseOp(
            "select(x, {T}(0), x < {T}(0) && !isnan_f32(f32(x)))", lambda x: np.maximum(x, 0).astype(x.dtype), SIGNED
        ),
        "Not": UnaryElementwiseOp("1u - x", np.logical_not, BOOL),
        # ~x sets the high bits of a widened uint8/uint16; `expression` masks them (elementwise/widened.py)
        "BitwiseNot": UnaryElementwiseOp("~x", np.bitwise_not, _COMPLEMENTABLE),
        "IsNaN": UnaryElementwiseOp("select(0u, 1u, isnan_f32(f32(x)))", np.isnan, out=DataType.BOOL),
        "Gelu": UnaryElementwiseOp(
            "{T}(gelu_{approximate}(f32(x)))",
            gelu,
            attrs={"approximate": "none"},
            choices={"approximate": ("none", "tanh")},
        ),
        "LeakyRelu": UnaryElementwiseOp(
            "select({alpha} * x, x, x >= {T}(0))",
            lambda x, alpha: np.where(x >= 0, x, x * np.asarray(alpha, x.dtype)),
            attrs={"alpha": 0.01},
        ),
        "Softplus": UnaryElementwiseOp("select({T}(log(1.0 + exp(f32(x)))), x, x > {T}(20))", softplus),
        # onnxruntime's order: alpha * x + beta, then min 1, then max 0 (MobileNetV3, PaddleOCR); NaN stays NaN
        # there, while WGSL's min and max drop it (1 on lavapipe)
        "HardSigmoid": UnaryElementwiseOp(
            "select(max(min({alpha} * x + {beta}, {T}(1)), {T}(0)), x, isnan_f32(f32(x)))",
            lambda x, alpha, beta: np.maximum(np.minimum(alpha * x + beta, 1), 0).astype(x.dtype),
            attrs={"alpha": 0.2, "beta": 0.5},
        ),
        # x * HardSigmoid(x, 1/6, 1/2), the function body ONNX gives it
        "HardSwish": UnaryElementwiseOp(
            "x * max(min({T}(0.16666666666666666) * x + {T}(0.5), {T}(1)), {T}(0))",
            lambda x: (x * np.maximum(np.minimum(np.float32(1 / 6) * x + np.float32(0.5), 1), 0)).astype(x.dtype),
        ),
        "Clip": _ClipOp("", _clip, NUMERIC),
        "Tan": UnaryElementwiseOp(_in_f32("tan"), np.tan),
        "Atan": UnaryElementwiseOp(_in_f32("atan"), np.arctan),
        "Asin": UnaryElementwiseOp(_in_f32("asin_f32"), np.arcsin),
        "Acos": UnaryElementwiseOp(_in_f32("acos_f32"), np.arccos),
        "Sinh": UnaryElementwiseOp(_in_f32("sinh_f32"), np.sinh),
        "Cosh": UnaryElementwiseOp(_in_f32("cosh_f32"), np.cosh),
        "Asinh": UnaryElementwiseOp(_in_f32("asinh_f32"), np.arcsinh),
        "Acosh": UnaryElementwiseOp(_in_f32("acosh_f32"), np.arccosh),
        "Atanh": UnaryElementwiseOp(_in_f32("atanh_f32"), np.arctanh),
        "Mish": UnaryElementwiseOp(_in_f32("mish_f32"), mish),
        "Softsign": UnaryElementwiseOp("{T}(f32(x) / (1.0 + abs(f32(x))))", softsign),
        "Elu": UnaryElementwiseOp("{T}(elu_f32(f32(x), {alpha}))", elu, attrs={"alpha": 1.0}, attr_type=_F),
        "Celu": UnaryElementwiseOp("{T}(celu_f32(f32(x), {alpha}))", celu, attrs={"alpha": 1.0}, attr_type=_F),
        "Selu": UnaryElementwiseOp(
            "{T}(selu_f32(f32(x), {alpha}, {gamma}))",
            selu,
            attrs={"alpha": 1.67326319217681884765625, "gamma": 1.05070102214813232421875},
            attr_type=_F,
        ),
        "ThresholdedRelu": UnaryElementwiseOp(
            "select({T}(0), x, f32(x) > {alpha})", thresholded_relu, attrs={"alpha": 1.0}, attr_type=_F
        ),
        "Shrink": UnaryElementwiseOp(
            "{T}(shrink_f32(f32(x), {lambd}, {bias}))",
            shrink,
            NUMERIC,
            attrs={"lambd": 0.5, "bias": 0.0},
            attr_type=_F,
        ),
        "IsInf": UnaryElementwiseOp(
            "select(0u, 1u, isinf_f32(f32(x)) && select({detect_negative}, {detect_positive}, f32(x) > 0.0))",
            is_inf,
            attrs={"detect_positive": True, "detect_negative": True},
            out=DataType.BOOL,
        ),
    }
)
