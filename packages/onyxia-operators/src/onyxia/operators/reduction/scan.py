"""`CumSumOp`: ONNX CumSum (axis as input 1, `exclusive` and `reverse` attributes).

Exporters emit CumSum for position ids (``cumsum(attention_mask) - 1``), usually on a tensor of
symbolic shape, so the GPU plan walks each line serially (scan.wgsl) and the fold also runs on
symbolic values (object arrays: `SymbolicExpr` supports ``+``). An axis known only at run time (a
graph input) is read by the shader, which derives the line length and stride from it and the
dims; an axis outside [-rank, rank) is reported through the node's error slot, as onnxruntime
rejects it.
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
from onyxia.core.plan_ctx import ErrorSlotUse
from onyxia.core.shader_dims import DimValue
from onyxia.core.shapes import dims_product
from onyxia.operators.gather_scatter.addressing import INDEX_TYPES
from onyxia.operators.int64_checks import checked_binary, checked_defs, int64_errors
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
        x, axis = ctx.input_value(0), _axis(ctx)
        if x is None or axis is None:
            return None
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
        defs = {**type_defs(T=dtype), "ACC_T": "f32" if dtype == DataType.FLOAT16 else dtype.wgsl}
        defs["WORKGROUP_SIZE"] = WORKGROUP_SIZE
        defs.update({flag: True for flag in ("EXCLUSIVE", "REVERSE") if ctx.attr_int(flag.lower(), 0)})
        reads = [ctx.input(0)]
        errors: ErrorSlotUse | None = None
        sizes: dict[str, DimValue]
        if axis is None:  # read at run time: the shader checks it (the error slot) and derives the lines
            errors = ctx.error_slot(f"axis (input 1) of a rank-{len(dims)} input")
            defs.update(AXIS_INPUT=True, RANK=len(dims))
            sizes = {"N": n, "DIMS": list(dims)}
            reads.append(ctx.input(1))
            lines = n  # an upper bound: the shader's element_count() is N / the axis's dim
        else:
            lines = dims_product([*dims[:axis], *dims[axis + 1 :]])
            sizes = {"LINES": lines, "AXIS_DIM": dims[axis], "INNER": dims_product(dims[axis + 1 :])}
        checked_add = checked_binary("Add", dtype)
        if checked_add is not None:  # an int64/uint64 running sum can leave 32 bits: reported, not wrapped
            errors = int64_errors(ctx, dtype)
            defs["CHECKED_ADD"] = checked_add
        defs.update(checked_defs(errors, len(reads) + 1))
        shader = ctx.compile_shader(
            "reduction/scan", _SOURCE, defs, sizes, None if errors is None else errors.immediates
        )
        writes = [ctx.output(0)] if errors is None else [ctx.output(0), errors.ref]
        ctx.dispatch(shader, reads, writes, ceil_div(lines, WORKGROUP_SIZE))


def _axis(ctx: NodeCtx) -> int | None:
    """The normalised axis; None when it is known only at run time."""
    if ctx.input_dtype(1) not in INDEX_TYPES:
        raise ctx.error(f"axis (input 1) must be int32 or int64, found {ctx.input_dtype(1).name.lower()}")
    rank = ctx.input_rank(0)
    if rank == 0:
        raise ctx.error("x (input 0) must have rank >= 1")
    value = ctx.input_value(1)
    if value is None:
        if dims_product(ctx.input_dims(1)) != 1:
            raise ctx.error(f"axis (input 1) must hold one integer, found shape {ctx.input_shape(1)}")
        return None
    if value.size != 1 or value.dtype == object:
        raise ctx.error(f"axis (input 1) must hold one integer, found {value.tolist()}")
    return ctx.normalize_axis(int(value.reshape(-1)[0]), rank)


def _shift_forward(y: np.ndarray, axis: int) -> np.ndarray:
    """The exclusive sum: each line's inclusive sums moved one step on, with 0 first."""
    out = np.zeros_like(y)
    dst, src = [slice(None)] * y.ndim, [slice(None)] * y.ndim
    dst[axis], src[axis] = slice(1, None), slice(None, -1)
    out[tuple(dst)] = y[tuple(src)]
    return out


CUMSUM: dict[str, CumSumOp] = {"CumSum": CumSumOp()}
