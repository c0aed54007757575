"""`BiasedActivationOp`: the com.microsoft elementwise ops onnxruntime's transformer optimizer writes.

`onnxruntime.transformers.optimizer` folds a BERT/ViT/Whisper/T5 MLP's ``Add(bias)`` into the
activation after it (BiasGelu, FastGelu's optional bias), names the activations torch spelled out
(Gelu, QuickGelu's ``x * sigmoid(1.702 x)``), and fuses residual adds (BiasAdd: ``x + bias + skip``).
Each is "add the inputs given, broadcasting, then apply a unary activation": one row each, whose
`expr` is WGSL in ``{v}`` (the sum, in the storage type) with ``{T}`` and attributes as in the unary
rows. One input plans through the unary shader; two or three through the broadcasting one.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, TensorType, as_output_value
from onyxia.core.shapes import dims_product
from onyxia.operators.elementwise.broadcast import emit_broadcast
from onyxia.operators.elementwise.numpy_math import gelu, sigmoid
from onyxia.operators.elementwise.unary import emit_unary
from onyxia.operators.family import named_rows
from onyxia.operators.layout import node_literal
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["ELEMENTWISE_MS", "BiasedActivationOp"]


@dataclass(frozen=True)
class BiasedActivationOp:
    expr: str  # WGSL in {v}, the sum of the inputs given
    fold: Callable[..., np.ndarray]  # of the sum, with the attributes as keywords
    inputs: tuple[int, int]  # (required, at most)
    attrs: dict[str, float] = field(default_factory=dict)  # name -> onnxruntime's default
    name: str = "biased_activation"

    def _present(self, ctx: NodeCtx) -> list[int]:
        present = [i for i in range(ctx.num_inputs) if ctx.has_input(i)]
        low, high = self.inputs
        if present != list(range(len(present))) or not low <= len(present) <= high:
            given = ", ".join(str(i) for i in present) or "none"
            raise ctx.error(f"inputs given: {given}; expected inputs 0 to {low - 1} and at most {high} in all")
        return present

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        present = self._present(ctx)
        dtypes = {ctx.input_dtype(i) for i in present}
        if len(dtypes) > 1:
            raise ctx.error(f"inputs must share a dtype, found {' and '.join(sorted(d.short for d in dtypes))}")
        return [TensorType(dtypes.pop(), ctx.broadcast(*(ctx.input_dims(i) for i in present)))]

    def _attrs(self, ctx: NodeCtx) -> dict[str, float]:
        return {k: float(ctx.attr(k, v)) for k, v in self.attrs.items()}

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = [v for i in self._present(ctx) if (v := ctx.input_value(i)) is not None]
        if len(values) < len(self._present(ctx)):
            return None
        total = np.asarray(values[0])
        for v in values[1:]:
            total = total + np.asarray(v)
        return [as_output_value(self.fold(np.asarray(total), **self._attrs(ctx)), ctx.output_numpy_dtype())]

    def expression(self, ctx: NodeCtx, dtype: DataType, v: str) -> str:
        where = "attribute '{}'"
        literals = {k: node_literal(ctx, DataType.FLOAT, a, where.format(k)) for k, a in self._attrs(ctx).items()}
        return self.expr.format(T=dtype.wgsl, v=v, **literals)

    def plan(self, ctx: PlanCtx) -> None:
        present = self._present(ctx)
        dtype = ctx.input_dtype(0)
        require_dtype(ctx, dtype, FLOATS)
        if dims_product(ctx.output_dims(0)) == 0:
            return
        if len(present) == 1:
            emit_unary(ctx, self.expression(ctx, dtype, "x"))
            return
        names = "abc"[: len(present)]
        expr = self.expression(ctx, dtype, f"({' + '.join(names)})")
        operands = [(ctx.input(i), ctx.input_dims(i), dtype) for i in present]
        emit_broadcast(ctx, expr, operands, (ctx.output(0), ctx.output_dims(0), dtype))


def _gelu_tanh(v: np.ndarray) -> np.ndarray:
    return gelu(v, "tanh")


def _quick_gelu(v: np.ndarray, alpha: float) -> np.ndarray:
    return (v.astype(np.float64) * sigmoid(alpha * v.astype(np.float64))).astype(v.dtype)


def _identity(v: np.ndarray) -> np.ndarray:
    return v


ELEMENTWISE_MS: dict[str, BiasedActivationOp] = named_rows(
    {
        "Gelu": BiasedActivationOp("{T}(gelu_none(f32({v})))", gelu, (1, 1)),
        "BiasGelu": BiasedActivationOp("{T}(gelu_none(f32({v})))", gelu, (2, 2)),
        "FastGelu": BiasedActivationOp("{T}(gelu_tanh(f32({v})))", _gelu_tanh, (1, 2)),
        "QuickGelu": BiasedActivationOp(
            "{T}(f32({v}) * sigmoid_f32({alpha} * f32({v})))", _quick_gelu, (1, 1), {"alpha": 1.702}
        ),
        "BiasAdd": BiasedActivationOp("{v}", _identity, (3, 3)),
    }
)
"""Registered in the com.microsoft domain."""
