"""`MovementOp`: Reshape, Squeeze, Unsqueeze, Flatten and Identity, one row each.

None of them moves an element: the output is the input's buffer under new dims. So the family
plans no step when `BufferAliasingPass` made the output a view of the input, else one buffer copy
(no shader), and folds with a numpy reshape, which also carries symbolic values (object arrays
of dims) through ``Unsqueeze``/``Reshape`` in shape-computation chains.
Rows differ only in their shape rule (`shape_rules`) and in the opsets they serve (axes moved
from an attribute to an input in opset 13), so keys carry version ranges and rows their names.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import FoldCtx, InferenceCtx, PlanCtx, Static, TensorType, ceil_div, shape_of
from onyxia.core.shapes import dims_product
from onyxia.operators.shape.shape_rules import (
    ShapeRule,
    flatten_dims,
    identity_dims,
    reshape_dims,
    squeeze_dims_attr,
    squeeze_dims_input,
    unsqueeze_dims_attr,
    unsqueeze_dims_input,
)
from onyxia.operators.typesets import ALL_GPU, require_dtype

__all__ = ["RESHAPE", "MovementOp"]


@dataclass(frozen=True)
class MovementOp:
    rule: ShapeRule
    name: str = "movement"
    folds_as_view = True  # of an initializer, at any size: a lazy reshape of its data (`ConstantFoldingPass`)

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        return [TensorType(ctx.input_dtype(0), shape_of(self.rule(ctx, ctx.input_dims(0))))]

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        value = ctx.input_value(0)
        if value is None:
            return None
        shape = ctx.output_tensor(0).shape
        assert isinstance(shape, Static), "folding only runs on static outputs"
        return [value.reshape(shape.dims)]

    def plan(self, ctx: PlanCtx) -> None:
        dtype = ctx.input_dtype(0)
        require_dtype(ctx, dtype, ALL_GPU)
        if ctx.shares_storage(0, 0):  # a view (BufferAliasingPass): the runtime serves both from one buffer
            ctx.input(0), ctx.output(0)  # registered, so the plan keeps the alias
            return
        size = dims_product(ctx.output_dims(0)) * dtype.gpu_numpy.itemsize
        if dtype.gpu_numpy.itemsize % 4:
            # buffer copies move whole 4-byte words; buffers are padded to 4 bytes, so an odd f16 count rounds up
            size = ceil_div(size, 4) * 4
        if size != 0:  # an empty tensor has nothing to copy
            ctx.copy(ctx.input(0), ctx.output(0), size)


RESHAPE: dict[str | tuple[str, int, int | None], MovementOp] = {
    ("Reshape", 5, None): MovementOp(reshape_dims, "Reshape"),
    ("Unsqueeze", 1, 12): MovementOp(unsqueeze_dims_attr, "Unsqueeze"),
    ("Unsqueeze", 13, None): MovementOp(unsqueeze_dims_input, "Unsqueeze"),
    ("Squeeze", 1, 12): MovementOp(squeeze_dims_attr, "Squeeze"),
    ("Squeeze", 13, None): MovementOp(squeeze_dims_input, "Squeeze"),
    "Flatten": MovementOp(flatten_dims, "Flatten"),
    "Identity": MovementOp(identity_dims, "Identity"),
}
