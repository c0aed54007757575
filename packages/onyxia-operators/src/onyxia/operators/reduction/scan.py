"""`CumSumOp`: ONNX CumSum (axis as input 1, `exclusive` and `reverse` attributes).

Exporters emit CumSum for position ids (``cumsum(attention_mask) - 1``), usually on a tensor of
symbolic shape, so the GPU plan walks each line serially (scan.wgsl) and the fold also runs on
symbolic values (object arrays: `SymbolicExpr` supports ``+``).
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
    TensorType,
    as_output_value,
    ceil_div,
    load_wgsl,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.gather_scatter.addressing import INDEX_TYPES
from onyxia.operators.int64_checks import checked_defs, int64_errors
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.typesets import NUMERIC, require_dtype

__all__ = ["CUMSUM", "CumSumOp"]

_SOURCE = load_wgsl(__package__, "scan.wgsl")


@dataclass(frozen=True)
class CumSumOp:
    name: str = "CumSum"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        _axis(ctx)
        return [TensorType(ctx.input_dtype(0), ctx.input_shape(0))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        x = ctx.input_value(0)
        if x is None:
            return None
        axis = _axis(ctx)
        work = x.astype(np.float32) if x.dtype == np.float16 else x
        if ctx.attr_int("reverse", 0):
            work = np.flip(work, axis)
        y = np.cumsum(work, axis=axis)
        if ctx.attr_int("exclusive", 0):
            y = _shift_forward(y, axis)
        if ctx.attr_int("reverse", 0):
            y = np.flip(y, axis)
        return [as_output_value(y, ctx.output_numpy_dtype())]

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(0)
        require_dtype(ctx, dtype, NUMERIC)
        dims, axis = ctx.input_dims(0), _axis(ctx)
        n = dims_product(dims)
        if n == 0:
            return
        lines = dims_product([*dims[:axis], *dims[axis + 1 :]])
        defs = {**type_defs(T=dtype), "ACC_T": "f32" if dtype == DataType.FLOAT16 else dtype.wgsl}
        defs["WORKGROUP_SIZE"] = WORKGROUP_SIZE
        defs.update({flag: True for flag in ("EXCLUSIVE", "REVERSE") if ctx.attr_int(flag.lower(), 0)})
        errors = int64_errors(ctx, dtype)  # an int64 running sum can leave the i32 range: reported, not wrapped
        defs.update(checked_defs(errors, 2))
        sizes = {"LINES": lines, "AXIS_DIM": dims[axis], "INNER": dims_product(dims[axis + 1 :])}
        shader = ctx.compile_shader(
            "reduction/scan", _SOURCE, defs, sizes, None if errors is None else errors.immediates
        )
        writes = [ctx.output(0)] if errors is None else [ctx.output(0), errors.ref]
        ctx.dispatch(shader, [ctx.input(0)], writes, ceil_div(lines, WORKGROUP_SIZE))


def _axis(ctx: NodeCtx) -> int:
    if ctx.input_dtype(1) not in INDEX_TYPES:
        raise ctx.error(f"axis (input 1) must be int32 or int64, found {ctx.input_dtype(1).name.lower()}")
    value = ctx.require_value(1, "axis")
    if value.size != 1 or value.dtype == object:
        raise ctx.error(f"axis (input 1) must hold one integer, found {value.tolist()}")
    rank = ctx.input_rank(0)
    if rank == 0:
        raise ctx.error("x (input 0) must have rank >= 1")
    return ctx.normalize_axis(int(value.reshape(-1)[0]), rank)


def _shift_forward(y: np.ndarray, axis: int) -> np.ndarray:
    """The exclusive sum: each line's inclusive sums moved one step on, with 0 first."""
    out = np.zeros_like(y)
    dst, src = [slice(None)] * y.ndim, [slice(None)] * y.ndim
    dst[axis], src[axis] = slice(1, None), slice(None, -1)
    out[tuple(dst)] = y[tuple(src)]
    return out


CUMSUM: dict[str, CumSumOp] = {"CumSum": CumSumOp()}
