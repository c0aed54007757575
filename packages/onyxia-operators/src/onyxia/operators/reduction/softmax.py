"""`SoftmaxOp`: Softmax, LogSoftmax and Hardmax (1 at a row's first maximum), for both ONNX axis
conventions.

Opset 13 made the axis a true axis (default -1); before that the input is coerced to 2-D at
`axis` (default 1) and normalised over everything from `axis` on. Both become (outer, L, inner)
for the one shader, so the difference lives in `_row_layout` only.
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

import numpy as np

from onyxia.core import FoldCtx, InferenceCtx, NodeCtx, PlanCtx, SymbolicDim, TensorType, ceil_div, load_wgsl
from onyxia.core.shapes import dims_product, static_dims
from onyxia.operators.layout import type_defs
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["SOFTMAX_OPS", "SoftmaxOp"]

_SOURCE = load_wgsl(__package__, "softmax.wgsl")
_WORKGROUP = 64
_MIN_WORKGROUP = 8  # one SIMD chunk on lavapipe: a short row gets a workgroup no wider than it needs
# rows up to this long take an invocation each (ROW_LANES): RivaGAN's channel softmax, 65536 rows of 32, took 130 ms
# as a workgroup per row on lavapipe (two barrier-bound workgroup reductions per row)
_ROW_LANES_MAX_LENGTH = 64


@dataclass(frozen=True)
class SoftmaxOp:
    log: bool = False
    hard: bool = False  # Hardmax: 1 at each row's first maximum, else 0
    coerce_2d: bool = False  # opset < 13 semantics
    name: str = "softmax"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        self._row_layout(ctx)  # validates the axis
        return [TensorType(ctx.input_dtype(0), ctx.input_shape(0))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        x = ctx.input_value(0)
        if x is None or x.dtype == object:
            return None
        layout = static_dims(self._row_layout(ctx))
        assert layout is not None, f"node '{ctx.node.name}': input 0 has a value, so its dims are static"
        rows = x.astype(np.float32).reshape(layout)
        if self.hard:
            winners = np.argmax(rows, axis=1)[:, None, :]  # first maximum of each (outer, inner) row
            return [(np.arange(layout[1])[None, :, None] == winners).reshape(x.shape).astype(x.dtype)]
        shifted = rows - np.max(rows, axis=1, keepdims=True, initial=-np.inf)
        total = np.sum(np.exp(shifted), axis=1, keepdims=True)
        result = shifted - np.log(total) if self.log else np.exp(shifted) / total
        return [result.reshape(x.shape).astype(x.dtype)]

    def plan(self, ctx: PlanCtx) -> None:
        x = ctx.input_tensor(0)
        require_dtype(ctx, x.dtype, FLOATS)
        outer, length, inner = self._row_layout(ctx)
        rows = outer * inner
        if rows == 0 or length == 0:
            return  # an empty output: nothing to write
        row_lanes = isinstance(length, int) and length <= _ROW_LANES_MAX_LENGTH
        workgroup = (
            min(_WORKGROUP, max(_MIN_WORKGROUP, 1 << (length - 1).bit_length()))
            if isinstance(length, int) and not row_lanes
            else _WORKGROUP
        )
        defs = {**type_defs(X_T=x.dtype, Y_T=ctx.output_tensor(0).dtype), "WORKGROUP_SIZE": workgroup}
        if row_lanes:
            defs["ROW_LANES"] = True
        if self.log:
            defs["LOG"] = True
        if self.hard:
            defs["HARD"] = True
        shader = ctx.compile_shader("reduction/softmax", _SOURCE, defs, {"ROWS": rows, "L": length, "INNER": inner})
        ctx.dispatch(shader, [ctx.input(0)], [ctx.output(0)], ceil_div(rows, workgroup) if row_lanes else rows)

    def _row_layout(self, ctx: NodeCtx) -> tuple[SymbolicDim, SymbolicDim, SymbolicDim]:
        dims = ctx.input_dims(0)
        axis = ctx.normalize_axis(ctx.attr_int("axis", 1 if self.coerce_2d else -1), len(dims))
        if self.coerce_2d:
            return dims_product(dims[:axis]), dims_product(dims[axis:]), 1
        return dims_product(dims[:axis]), dims[axis], dims_product(dims[axis + 1 :])


def _versions(name: str, row: SoftmaxOp) -> dict[tuple[str, int, int | None], SoftmaxOp]:
    return {
        (name, 1, 12): dataclasses.replace(row, name=name, coerce_2d=True),
        (name, 13, None): dataclasses.replace(row, name=name, coerce_2d=False),
    }


SOFTMAX_OPS: dict[tuple[str, int, int | None], SoftmaxOp] = {
    **_versions("Softmax", SoftmaxOp()),
    **_versions("LogSoftmax", SoftmaxOp(log=True)),
    **_versions("Hardmax", SoftmaxOp(hard=True)),
}
