"""Emit one broadcasting elementwise dispatch; shared by the binary, ternary and variadic rows."""

from __future__ import annotations

from collections.abc import Sequence

from onyxia.core import BufferRef, DataType, PlanCtx, SymbolicDim, ceil_div, load_wgsl
from onyxia.core.plan_ctx import ErrorSlotUse
from onyxia.core.shader_dims import DimValue
from onyxia.core.shapes import dims_product
from onyxia.operators.int64_checks import checked_defs
from onyxia.operators.layout import WORKGROUP_SIZE, collapse_broadcast, type_defs

__all__ = ["Operand", "emit_broadcast"]

_SOURCE = load_wgsl(__package__, "binary.wgsl")
_NAMES = "ABC"

Operand = tuple[BufferRef, Sequence[SymbolicDim], DataType]


def emit_broadcast(
    ctx: PlanCtx, expr: str, operands: Sequence[Operand], out: Operand, errors: ErrorSlotUse | None = None
) -> None:
    """``out = expr(a, b[, c])`` with numpy broadcasting; equal shapes skip index arithmetic. With
    `errors`, `expr` may call onyxia::errors' checked functions (`onyxia.operators.int64_checks`)."""
    out_ref, out_dims_raw, out_dtype = out
    out_dims = list(out_dims_raw) or [1]
    n = dims_product(out_dims)
    types = {f"{_NAMES[i]}_T": dtype for i, (_, _, dtype) in enumerate(operands)}
    defs = {**type_defs(**types, Y_T=out_dtype), "WORKGROUP_SIZE": WORKGROUP_SIZE, "EXPR": expr}
    if len(operands) == 3:
        defs["TERNARY"] = True
    defs.update(checked_defs(errors, len(operands) + 1))
    dims: dict[str, DimValue] = {"N": n}
    in_dims = [list(d) or [1] for _, d, _ in operands]
    if any(d != out_dims for d in in_dims):
        axes, strides = collapse_broadcast(in_dims, out_dims)  # fewer axes: fewer divisions per element
        defs.update(BROADCAST=True, RANK=len(axes))
        dims["OUT_DIMS"] = axes
        for i, input_strides in enumerate(strides):
            dims[f"{_NAMES[i]}_STRIDES"] = input_strides
    shader = ctx.compile_shader(
        "elementwise/binary", _SOURCE, defs, dims, None if errors is None else errors.immediates
    )
    writes = [out_ref] if errors is None else [out_ref, errors.ref]
    ctx.dispatch(shader, [ref for ref, _, _ in operands], writes, ceil_div(n, WORKGROUP_SIZE))
