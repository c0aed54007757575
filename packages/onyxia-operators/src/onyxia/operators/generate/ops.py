"""Generators: ConstantOfShape and Range (values from the index alone), and Trilu (a mask of x).

They are mostly folded; they reach the GPU when a size is symbolic — optimum's Gemma export
builds its causal mask from ``ConstantOfShape``/``Range`` over the sequence length.
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
    SymbolicDim,
    SymbolicExpr,
    TensorType,
    TensorValue,
    ceil_div,
    load_wgsl,
    shape_of,
    static_dims,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.family import named_rows
from onyxia.operators.layout import WORKGROUP_SIZE, node_literal, type_defs
from onyxia.operators.typesets import ALL_GPU, NUMERIC, require_dtype

__all__ = ["GENERATE", "GeneratorOp"]

_SOURCE = load_wgsl(__package__, "generate.wgsl")

_Shader = tuple[dict[str, object], dict[str, SymbolicDim]]  # a row's defs, and the dims they name
_Scalar = float | SymbolicExpr  # a Range argument: a number, or a dim that shape arithmetic folded into it


@dataclass(frozen=True)
class GeneratorOp:
    """A row gives the output type, a numpy fold, and the WGSL expression (or Trilu's flags)."""

    output: Callable[[NodeCtx], TensorType]
    fold: Callable[[NodeCtx], np.ndarray | None]
    expr: Callable[[NodeCtx, DataType], _Shader]
    reads_input: bool = False
    name: str = "generator"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        return [self.output(ctx)]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        value = self.fold(ctx)
        return None if value is None else [value]

    def plan(self, ctx: PlanCtx) -> None:
        out = ctx.output_tensor(0)
        require_dtype(ctx, out.dtype, ALL_GPU, "output")
        n = dims_product(ctx.output_dims(0))
        row_defs, row_dims = self.expr(ctx, out.dtype)
        defs = {**type_defs(Y_T=out.dtype), "WORKGROUP_SIZE": WORKGROUP_SIZE, **row_defs}
        shader = ctx.compile_shader("generate", _SOURCE, defs, {"N": n, **row_dims})
        reads = [ctx.input(0)] if self.reads_input else []
        reads += [ctx.input(1)] if row_defs.get("K_INPUT") else []  # Trilu's k, known only at run time
        ctx.dispatch(shader, reads, [ctx.output(0)], ceil_div(n, WORKGROUP_SIZE))


# ----- ConstantOfShape -----------------------------------------------------------------------------
def _fill_value(ctx: NodeCtx) -> np.ndarray:
    value = ctx.attr("value", None)
    return value.numpy().reshape(-1)[:1] if isinstance(value, TensorValue) else np.zeros(1, np.float32)


def _fill_dims(ctx: NodeCtx) -> list[SymbolicDim]:
    shape = ctx.require_value(0, "shape").reshape(-1)
    return [d if isinstance(d, SymbolicExpr) else int(d) for d in shape]


def _fill_type(ctx: NodeCtx) -> TensorType:
    return TensorType(DataType.from_numpy(_fill_value(ctx).dtype), shape_of(_fill_dims(ctx)))


def _fill_fold(ctx: NodeCtx) -> np.ndarray | None:
    dims = static_dims(_fill_dims(ctx))
    return None if dims is None else np.full(dims, _fill_value(ctx)[0], dtype=_fill_value(ctx).dtype)


# ----- Range ---------------------------------------------------------------------------------------
def _range_args(ctx: NodeCtx) -> tuple[_Scalar, _Scalar, float]:
    start, limit, delta = (
        ctx.require_value(i, name).reshape(-1)[0] for i, name in enumerate(("start", "limit", "delta"))
    )
    if isinstance(delta, SymbolicExpr):
        raise ctx.error(f"Range needs a constant delta, found the symbolic {delta}")
    return start, limit, delta


def _range_type(ctx: NodeCtx) -> TensorType:
    start, limit, delta = _range_args(ctx)
    count: SymbolicDim
    if isinstance(limit, SymbolicExpr) or isinstance(start, SymbolicExpr):
        if int(delta) <= 0:
            raise ctx.error("Range over a symbolic limit needs a constant positive delta")
        if any(not isinstance(v, SymbolicExpr) and float(v) != int(v) for v in (start, delta)):
            raise ctx.error(f"Range over a symbolic bound needs integral start and delta, found {start} and {delta}")
        count = (_as_dim(limit) - _as_dim(start) + (int(delta) - 1)) // int(delta)
    else:
        count = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)
    return TensorType(ctx.input_dtype(0), shape_of([count]))


def _as_dim(value: _Scalar) -> SymbolicDim:
    return value if isinstance(value, SymbolicExpr) else int(value)


def _range_fold(ctx: NodeCtx) -> np.ndarray | None:
    start, limit, delta = _range_args(ctx)
    if isinstance(start, SymbolicExpr) or isinstance(limit, SymbolicExpr):
        return None
    return np.arange(start, limit, delta, dtype=ctx.input_dtype(0).numpy)


def _range_expr(ctx: NodeCtx, dtype: DataType) -> _Shader:
    start, _, delta = _range_args(ctx)
    if isinstance(start, SymbolicExpr):
        return {"SYMBOLIC_START": True, "DELTA": node_literal(ctx, dtype, delta, "input 2 (delta)")}, {"START": start}
    first, step = node_literal(ctx, dtype, start, "input 0 (start)"), node_literal(ctx, dtype, delta, "input 2 (delta)")
    return {"EXPR": f"{first} + {dtype.wgsl}(i) * {step}"}, {}


# ----- Trilu ---------------------------------------------------------------------------------------
def _trilu_k(ctx: NodeCtx) -> int | None:
    """The diagonal offset; None when input 1 is known only at run time (the shader reads it)."""
    if not ctx.has_input(1):
        return 0
    if dims_product(ctx.input_dims(1)) != 1:
        raise ctx.error(f"input 1 (k) has shape {ctx.input_shape(1)}; expected one element")
    k = ctx.input_value(1)
    return None if k is None else int(np.asarray(k).reshape(-1)[0])


def _trilu_fold(ctx: NodeCtx) -> np.ndarray | None:
    x, k = ctx.input_value(0), _trilu_k(ctx)
    if x is None or k is None:
        return None
    return np.triu(x, k) if ctx.attr_int("upper", 1) else np.tril(x, k)


def _trilu_expr(ctx: NodeCtx, dtype: DataType) -> _Shader:
    require_dtype(ctx, dtype, NUMERIC)
    dims = ctx.input_dims(0)
    if len(dims) < 2:
        raise ctx.error("Trilu needs an input of rank >= 2")
    flags: dict[str, object] = {"TRILU": True}
    if ctx.attr_int("upper", 1):
        flags["UPPER"] = True
    k = _trilu_k(ctx)
    if k is None:
        return {**flags, "K_INPUT": True}, {"ROWS": dims[-2], "COLS": dims[-1]}
    return flags, {"ROWS": dims[-2], "COLS": dims[-1], "K": k}


GENERATE: dict[str, GeneratorOp] = named_rows(
    {
        "ConstantOfShape": GeneratorOp(
            _fill_type,
            _fill_fold,
            lambda ctx, dt: ({"EXPR": node_literal(ctx, dt, _fill_value(ctx)[0], "attribute 'value'")}, {}),
        ),
        "Range": GeneratorOp(_range_type, _range_fold, _range_expr),
        "Trilu": GeneratorOp(
            lambda ctx: TensorType(ctx.input_dtype(0), ctx.input_shape(0)), _trilu_fold, _trilu_expr, True
        ),
    }
)
