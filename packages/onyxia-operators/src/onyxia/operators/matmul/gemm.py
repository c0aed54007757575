"""ONNX Gemm (opset 7+: C optional from 11, unidirectionally broadcast to [M, N]).

A Gemm by a compile-time B (a classifier head, a dense layer of an OCR recogniser: ddddocr's 55 x 1024 x 8210
Gemm) runs on MatMulGroup's tiled kernel: B repacked into column panels at load (transposed there when transB),
C as the kernel's bias epilogue, when alpha is 1, A is not transposed and C is absent, ignored (beta 0) or a
[N] / [1, N] row added as is (beta 1); `panel_gemm` decides. Any other Gemm runs gemm.wgsl, one invocation
per output reading A and B in place (a ~50x slower kernel, but any layout and scale).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    NodeCtx,
    PlanCtx,
    SymbolicDim,
    TensorType,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.operators.layout import WORKGROUP_SIZE, node_literal, type_defs
from onyxia.operators.matmul.matmul_group import plan_weight_products
from onyxia.operators.matmul.weights import panels_fit
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["GEMM", "GemmOp", "panel_gemm"]

_SOURCE = load_wgsl(__package__, "gemm.wgsl")


def _mnk(ctx: NodeCtx) -> tuple[SymbolicDim, SymbolicDim, SymbolicDim]:
    a, b = ctx.input_dims(0), ctx.input_dims(1)
    if len(a) != 2 or len(b) != 2:
        raise ctx.error("A and B must be 2-D")
    m, k = (a[1], a[0]) if ctx.attr_int("transA", 0) else (a[0], a[1])
    k2, n = (b[1], b[0]) if ctx.attr_int("transB", 0) else (b[0], b[1])
    if isinstance(k, int) and isinstance(k2, int) and k != k2:
        raise ctx.error(f"inner dims differ: op(A) is [{m}, {k}], op(B) is [{k2}, {n}]")
    return m, n, k


def _c_strides(ctx: NodeCtx, m: SymbolicDim, n: SymbolicDim) -> tuple[SymbolicDim, SymbolicDim]:
    """C broadcasts to [M, N] from [], [N], [1, N], [M, 1] or [M, N]."""
    dims = [1] * (2 - ctx.input_rank(2)) + list(ctx.input_dims(2))
    rows, cols = dims
    if rows not in (1, m) or cols not in (1, n):
        raise ctx.error(f"C of shape {list(ctx.input_dims(2))} does not broadcast to [{m}, {n}]")
    return (0 if rows == 1 and m != 1 else cols), (0 if cols == 1 and n != 1 else 1)


def panel_gemm(ctx: PlanCtx) -> bool | None:
    """Whether this Gemm runs as a weight product: None if not, else whether C is added (see the docstring)."""
    _, n, k = _mnk(ctx)
    if ctx.attr_int("transA", 0) or ctx.attr_float("alpha", 1.0) != 1.0 or not isinstance(k, int):
        return None
    if not isinstance(n, int) or ctx.input_dtype(0) not in FLOATS or ctx.input_dtype(1) != ctx.input_dtype(0):
        return None
    beta = ctx.attr_float("beta", 1.0)
    bias = ctx.has_input(2) and beta != 0.0
    if bias and (beta != 1.0 or list(ctx.input_dims(2)) not in ([n], [1, n])):
        return None
    return bias if panels_fit(ctx, 1, k, n) else None


@dataclass(frozen=True)
class GemmOp:
    name: str = "Gemm"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        m, n, _ = _mnk(ctx)
        if ctx.has_input(2):
            _c_strides(ctx, m, n)
        return [TensorType(ctx.input_dtype(0), shape_of([m, n]))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        a, b = ctx.input_value(0), ctx.input_value(1)
        if a is None or b is None or not ctx.all_inputs_have_values():
            return None
        a = a.T if ctx.attr_int("transA", 0) else a
        b = b.T if ctx.attr_int("transB", 0) else b
        y = ctx.attr_float("alpha", 1.0) * (a.astype(np.float64) @ b.astype(np.float64))
        c = ctx.input_value(2) if ctx.has_input(2) else None
        if c is not None:
            y = y + ctx.attr_float("beta", 1.0) * c
        return [y.astype(ctx.output_numpy_dtype())]

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(0)
        require_dtype(ctx, dtype, FLOATS)
        m, n, k = _mnk(ctx)
        bias = panel_gemm(ctx)
        if bias is not None and isinstance(k, int) and isinstance(n, int):
            plan_weight_products(ctx, m, k, [n], bias=bias, transposed=bool(ctx.attr_int("transB", 0)))
            return
        defs: dict[str, object] = {**type_defs(T=dtype), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        for name in ("alpha", "beta"):  # the shader scales its f32 accumulator
            defs[name.upper()] = node_literal(ctx, DataType.FLOAT, ctx.attr_float(name, 1.0), f"attribute '{name}'")
        for flag in ("transA", "transB"):
            if ctx.attr_int(flag, 0):
                defs[f"TRANS_{flag[-1]}"] = True
        dims: dict[str, SymbolicDim] = {"M": m, "N": n, "K": k}
        reads = [ctx.input(0), ctx.input(1)]
        if ctx.has_input(2):
            defs["HAS_C"] = True
            dims["C_ROW_STRIDE"], dims["C_COL_STRIDE"] = _c_strides(ctx, m, n)
            reads.append(ctx.input(2))
        shader = ctx.compile_shader("matmul/gemm", _SOURCE, defs, dims)
        ctx.dispatch(shader, reads, [ctx.output(0)], ceil_div(m * n, WORKGROUP_SIZE))


GEMM: dict[str, GemmOp] = {"Gemm": GemmOp()}
