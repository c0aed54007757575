"""`PoolOp`: MaxPool, AveragePool, LpPool and their Global forms, one row each, one shader.

A row is the reduction over the window (the shader's `REDUCE`) and how the window is found: the
local pools read `kernel_shape`, `strides`, `pads`, `dilations`, `auto_pad` and `ceil_mode` over
1 to 3 spatial axes; a global pool is one window over the flattened spatial axes, so it serves any
spatial rank and symbolic spatial dims. MaxPool's optional Indices output is computed in the same
pass. MaxPool also takes 8-bit ints (opset 12): the shader's f32 accumulator holds them exactly.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from onyxia.core import (
    DataType,
    InferenceCtx,
    NodeCtx,
    OperatorBase,
    PlanCtx,
    SymbolicDim,
    TensorType,
    ceil_div,
    load_wgsl,
    shape_of,
)
from onyxia.core.shapes import dims_product
from onyxia.operators.family import named_rows
from onyxia.operators.layout import WORKGROUP_SIZE, node_literal, type_defs
from onyxia.operators.typesets import FLOATS, require_dtype
from onyxia.operators.vision.geometry import Window, forward_window, unsupported_attribute

__all__ = ["POOL", "PoolOp"]

_SOURCE = load_wgsl(__package__, "pool.wgsl")

_MAX_TYPES = FLOATS | {DataType.INT8, DataType.UINT8}
_Shape = tuple[Window, list[SymbolicDim]]  # the shader's window, and the output's spatial dims


def _local_window(ctx: NodeCtx, spatial: Sequence[SymbolicDim]) -> _Shape:
    kernel = ctx.attr_ints("kernel_shape")
    if len(kernel) != len(spatial):
        raise ctx.error(f"attribute 'kernel_shape' {kernel} has {len(kernel)} axes; input 0 has {len(spatial)}")
    ceil_mode = ctx.attr_int("ceil_mode", 0)
    if ceil_mode not in (0, 1):
        raise unsupported_attribute(ctx, "ceil_mode", ceil_mode, "0 or 1")
    window = forward_window(ctx, spatial, kernel, ceil_mode=bool(ceil_mode))
    return window, list(window.out)


def _global_window(ctx: NodeCtx, spatial: Sequence[SymbolicDim]) -> _Shape:
    size = dims_product(spatial)
    return Window((size,), (1,), (size,), (1,), (1,), (0,), (0,)), [1] * len(spatial)


@dataclass(frozen=True)
class PoolOp(OperatorBase):
    reduce: str  # the shader's REDUCE def: max | avg | lp
    window: Callable[[NodeCtx, Sequence[SymbolicDim]], _Shape] = _local_window
    indices: bool = False  # has MaxPool's optional Indices output
    dtypes: frozenset[DataType] = FLOATS
    name: str = "pool"

    def _shape(self, ctx: NodeCtx) -> _Shape:
        dims = ctx.input_dims(0)
        if len(dims) < 3:
            raise ctx.error(f"input 0 has rank {len(dims)}; expected (N, C, spatial...) with rank >= 3")
        if ctx.has_output(1) and not self.indices:
            raise ctx.error(f"has {ctx.num_outputs} outputs; expected 1")
        return self.window(ctx, dims[2:])

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        _, out = self._shape(ctx)
        if any(isinstance(d, int) and d < 1 for d in out):
            raise ctx.error(f"output spatial dims {out} are empty; the kernel exceeds the padded input")
        shape = shape_of([*ctx.input_dims(0)[:2], *out])
        types = [TensorType(ctx.input_dtype(0), shape)]
        if ctx.has_output(1):
            types.append(TensorType(DataType.INT64, shape))
        return types

    def plan(self, ctx: PlanCtx) -> None:
        window, _ = self._shape(ctx)
        require_dtype(ctx, ctx.input_dtype(0), self.dtypes)
        total = dims_product(ctx.output_dims(0))
        if total == 0:
            return
        shader = ctx.compile_shader("vision/pool", _SOURCE, self._defs(ctx), {"TOTAL": total, **window.volume()})
        writes = [ctx.output(i) for i in range(2) if ctx.has_output(i)]
        ctx.dispatch(shader, [ctx.input(0)], writes, ceil_div(total, WORKGROUP_SIZE))

    def _defs(self, ctx: PlanCtx) -> dict[str, object]:
        defs = {**type_defs(X_T=ctx.input_dtype(0), Y_T=ctx.output_tensor(0).dtype), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        defs["REDUCE"] = self.reduce
        p = ctx.attr_int("p", 2)  # LpPool's order; ignored by the other reductions
        defs["P"] = node_literal(ctx, DataType.FLOAT, p, "attribute 'p'")
        if ctx.attr_int("count_include_pad", 0):
            defs["COUNT_INCLUDE_PAD"] = True
        if ctx.has_output(1):
            order = ctx.attr_int("storage_order", 0)
            if order not in (0, 1):
                raise unsupported_attribute(ctx, "storage_order", order, "0 (row major) or 1 (column major)")
            defs["INDICES"], defs["STORAGE_ORDER"] = True, order
        return defs


POOL: dict[str, PoolOp] = named_rows(
    {
        "MaxPool": PoolOp("max", indices=True, dtypes=_MAX_TYPES),
        "AveragePool": PoolOp("avg"),
        "LpPool": PoolOp("lp"),
        "GlobalMaxPool": PoolOp("max", _global_window),
        "GlobalAveragePool": PoolOp("avg", _global_window),
        "GlobalLpPool": PoolOp("lp", _global_window),
    }
)
