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
)
from onyxia.core.shapes import dims_product
from onyxia.operators.family import named_rows
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs, wgsl_literal
from onyxia.operators.typesets import ALL_GPU, NUMERIC, require_dtype

__all__ = ["GENERATE", "GeneratorOp"]

_SOURCE = load_wgsl(__package__, "generate.wgsl")


@dataclass(frozen=True)
class GeneratorOp:
    """A row gives the output type, a numpy fold, and the WGSL expression (or Trilu's flags)."""

    output: Callable[[NodeCtx], TensorType]
    fold: Callable[[NodeCtx], np.ndarray | None]
    expr: Callable[[NodeCtx, DataType], dict[str, object]]
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
        defs = {**type_defs(Y_T=out.dtype), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        dims: dict[str, object] = {"N": n}
        extra = self.expr(ctx, out.dtype)
        dims.update(extra.pop("dims", {}))  # type: ignore[arg-type]
        defs.update(extra)
        shader = ctx.compile_shader("generate", _SOURCE, defs, dims)  # type: ignore[arg-type]
        reads = [ctx.input(0)] if self.reads_input else []
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
    dims = _fill_dims(ctx)
    if not all(isinstance(d, int) for d in dims):
        return None
    return np.full(dims, _fill_value(ctx)[0], dtype=_fill_value(ctx).dtype)


# ----- Range ---------------------------------------------------------------------------------------
def _range_args(ctx: NodeCtx) -> tuple[object, object, object]:
    start, limit, delta = (
        ctx.require_value(i, name).reshape(-1)[0] for i, name in enumerate(("start", "limit", "delta"))
    )
    return start, limit, delta


def _range_type(ctx: NodeCtx) -> TensorType:
    start, limit, delta = _range_args(ctx)
    if isinstance(limit, SymbolicExpr) or isinstance(start, SymbolicExpr):
        if isinstance(delta, SymbolicExpr) or int(delta) <= 0:  # type: ignore[call-overload]
            raise ctx.error("Range over a symbolic limit needs a constant positive delta")
        count: SymbolicDim = (limit - start + (int(delta) - 1)) // int(delta)  # type: ignore[operator]
    else:
        count = max(int(np.ceil((float(limit) - float(start)) / float(delta))), 0)  # type: ignore[arg-type]
    return TensorType(ctx.input_dtype(0), shape_of([count]))


def _range_fold(ctx: NodeCtx) -> np.ndarray | None:
    start, limit, delta = _range_args(ctx)
    if any(isinstance(v, SymbolicExpr) for v in (start, limit, delta)):
        return None
    return np.arange(start, limit, delta, dtype=ctx.input_dtype(0).numpy)  # type: ignore[call-overload]


def _range_expr(ctx: NodeCtx, dtype: DataType) -> dict[str, object]:
    start, _, delta = _range_args(ctx)
    if isinstance(start, SymbolicExpr):
        return {"SYMBOLIC_START": True, "DELTA": wgsl_literal(dtype, delta), "dims": {"START": start}}
    return {"EXPR": f"{wgsl_literal(dtype, start)} + {dtype.wgsl}(i) * {wgsl_literal(dtype, delta)}"}


# ----- Trilu ---------------------------------------------------------------------------------------
def _trilu_k(ctx: NodeCtx) -> int:
    return int(ctx.require_value(1, "k").reshape(-1)[0]) if ctx.has_input(1) else 0


def _trilu_fold(ctx: NodeCtx) -> np.ndarray | None:
    x = ctx.input_value(0)
    if x is None:
        return None
    k = _trilu_k(ctx)
    return np.triu(x, k) if ctx.attr_int("upper", 1) else np.tril(x, k)


def _trilu_expr(ctx: NodeCtx, dtype: DataType) -> dict[str, object]:
    require_dtype(ctx, dtype, NUMERIC)
    dims = ctx.input_dims(0)
    if len(dims) < 2:
        raise ctx.error("Trilu needs an input of rank >= 2")
    flags: dict[str, object] = {"TRILU": True, "dims": {"ROWS": dims[-2], "COLS": dims[-1], "K": _trilu_k(ctx)}}
    if ctx.attr_int("upper", 1):
        flags["UPPER"] = True
    return flags


GENERATE: dict[str, GeneratorOp] = named_rows(
    {
        "ConstantOfShape": GeneratorOp(
            _fill_type, _fill_fold, lambda ctx, dt: {"EXPR": wgsl_literal(dt, _fill_value(ctx)[0])}
        ),
        "Range": GeneratorOp(_range_type, _range_fold, _range_expr),
        "Trilu": GeneratorOp(
            lambda ctx: TensorType(ctx.input_dtype(0), ctx.input_shape(0)), _trilu_fold, _trilu_expr, True
        ),
    }
)
