"""`BatchNormalizationOp`: BatchNormalization with running statistics (inference mode) only.

Training mode updates the running mean and variance, which needs batch statistics and extra
outputs; exported inference graphs never use it, so it is refused at compile time rather than
silently computed with the running statistics. Opsets 7-8 carry `spatial`; only the per-channel
form (spatial=1, the default) is implemented.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import DataType, FoldCtx, InferenceCtx, NodeCtx, PlanCtx, TensorType, ceil_div, load_wgsl
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import WORKGROUP_SIZE, node_literal, type_defs
from onyxia.operators.normalization.checks import unsupported_attribute
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["BATCH_NORM", "BatchNormalizationOp"]

_SOURCE = load_wgsl(__package__, "batch_norm.wgsl")
_PARAMS = ("scale", "bias", "mean", "var")


@dataclass(frozen=True)
class BatchNormalizationOp:
    epsilon: float = 1e-5
    name: str = "BatchNormalization"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        self._check(ctx)
        return [TensorType(ctx.input_dtype(0), ctx.input_shape(0))]

    def _check(self, ctx: NodeCtx) -> None:
        if (mode := ctx.attr_int("training_mode", 0)) != 0:
            raise unsupported_attribute(ctx, "training_mode", mode, "0 (inference with running statistics)")
        if (spatial := ctx.attr_int("spatial", 1)) != 1:
            raise unsupported_attribute(ctx, "spatial", spatial, "1 (per-channel statistics)")
        if ctx.num_outputs > 1:
            raise unsupported_attribute(ctx, "outputs", ctx.num_outputs, "1 (only Y; the others are training outputs)")
        dims = ctx.input_dims(0)
        if len(dims) < 2:
            raise ctx.error(f"input 0 has rank {len(dims)}; expected (N, C, ...) with rank >= 2")
        for i, role in enumerate(_PARAMS, start=1):
            if list(ctx.input_dims(i)) != [dims[1]]:
                raise ctx.error(f"input {i} ({role}) has shape {ctx.input_shape(i)}; expected [{dims[1]}] (channels)")

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = ctx.known_values()
        if values is None:
            return None
        x, scale, bias, mean, var = (v.astype(np.float32) for v in values)
        shape = (1, -1) + (1,) * (x.ndim - 2)
        gain = scale / np.sqrt(var + np.float32(self._epsilon(ctx)))
        y = (x - mean.reshape(shape)) * gain.reshape(shape) + bias.reshape(shape)
        return [y.astype(ctx.output_numpy_dtype(0))]

    def _epsilon(self, ctx: NodeCtx) -> float:
        return float(np.float32(ctx.attr_float("epsilon", self.epsilon)))

    def plan(self, ctx: PlanCtx) -> None:
        self._check(ctx)
        for i in range(5):
            require_dtype(ctx, ctx.input_dtype(i), FLOATS, f"input {i}")
        dims = ctx.input_dims(0)
        n = dims_product(dims)
        if n == 0:
            return  # an empty output: nothing to write
        names = ("X", "SCALE", "BIAS", "MEAN", "VAR")
        types = {f"{name}_T": ctx.input_dtype(i) for i, name in enumerate(names)}
        defs = {**type_defs(**types, Y_T=ctx.output_tensor(0).dtype), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        defs["EPSILON"] = node_literal(ctx, DataType.FLOAT, self._epsilon(ctx), "attribute 'epsilon'")
        shader = ctx.compile_shader(
            "normalization/batch_norm", _SOURCE, defs, {"N": n, "C": dims[1], "INNER": dims_product(dims[2:])}
        )
        ctx.dispatch(shader, [ctx.input(i) for i in range(5)], [ctx.output(0)], ceil_div(n, WORKGROUP_SIZE))


BATCH_NORM: dict[tuple[str, int, int | None], BatchNormalizationOp] = {
    ("BatchNormalization", 7, None): BatchNormalizationOp(),
}
