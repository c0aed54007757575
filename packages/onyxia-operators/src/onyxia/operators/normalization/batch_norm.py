"""`BatchNormalizationOp`: BatchNormalization with running statistics (inference) or batch statistics
(``training_mode=1``, opset 14+).

Inference is one per-channel affine map. Training mode normalises with the batch's own mean and
(biased) variance per channel and also outputs the updated running statistics, ``running = input *
momentum + batch * (1 - momentum)``, as the ONNX spec and onnxruntime compute them: a first dispatch
reduces each channel (one invocation walks its N x INNER elements: two passes, mean then squared
deviations, in f32) into two scratch buffers and writes the running outputs; the affine map then
reads those in place of the running statistics. Opsets 7-13 signal training by extra outputs
(saved mean and variance too), which onnxruntime's inference build refuses; they stay refused, as
does `spatial=0` (opsets 7-8; only the per-channel form, the default, is implemented).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from onyxia.core import (
    BufferRef,
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
from onyxia.core.shapes import dims_product
from onyxia.operators.layout import WORKGROUP_SIZE, node_literal, type_defs
from onyxia.operators.normalization.checks import unsupported_attribute
from onyxia.operators.typesets import FLOATS, require_dtype

__all__ = ["BATCH_NORM", "BatchNormalizationOp"]

_SOURCE = load_wgsl(__package__, "batch_norm.wgsl")
_STATS_SOURCE = load_wgsl(__package__, "batch_norm_stats.wgsl")
_PARAMS = ("scale", "bias", "mean", "var")


@dataclass(frozen=True)
class BatchNormalizationOp:
    epsilon: float = 1e-5
    momentum: float = 0.9
    name: str = "BatchNormalization"

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        training = self._check(ctx)
        y = TensorType(ctx.input_dtype(0), ctx.input_shape(0))
        if not training:
            return [y]
        channels = shape_of([ctx.input_dims(0)[1]])
        return [y, *(TensorType(ctx.input_dtype(i), channels) for i in (3, 4))][: ctx.num_outputs]

    def _check(self, ctx: NodeCtx) -> bool:
        """Validate the node; whether it runs in training mode."""
        if (mode := ctx.attr_int("training_mode", 0)) not in (0, 1):
            raise unsupported_attribute(ctx, "training_mode", mode, "0 (inference) or 1 (training)")
        if (spatial := ctx.attr_int("spatial", 1)) != 1:
            raise unsupported_attribute(ctx, "spatial", spatial, "1 (per-channel statistics)")
        if mode == 0 and ctx.num_outputs > 1:
            raise unsupported_attribute(
                ctx,
                "outputs",
                ctx.num_outputs,
                "1 (before opset 14, extra outputs mean training: opset 14+'s training_mode)",
            )
        dims = ctx.input_dims(0)
        if len(dims) < 2:
            raise ctx.error(f"input 0 has rank {len(dims)}; expected (N, C, ...) with rank >= 2")
        for i, role in enumerate(_PARAMS, start=1):
            if list(ctx.input_dims(i)) != [dims[1]]:
                raise ctx.error(f"input {i} ({role}) has shape {ctx.input_shape(i)}; expected [{dims[1]}] (channels)")
        return mode == 1

    def try_fold(self, ctx: FoldCtx) -> list[np.ndarray] | None:
        values = ctx.known_values()
        if values is None:
            return None
        x, scale, bias, mean, var = (v.astype(np.float32) for v in values)
        shape = (1, -1) + (1,) * (x.ndim - 2)
        outputs = []
        if self._check(ctx):
            axes = tuple(a for a in range(x.ndim) if a != 1)
            batch_mean, batch_var = x.mean(axes), x.var(axes)
            momentum = np.float32(ctx.attr_float("momentum", self.momentum))
            outputs = [mean * momentum + batch_mean * (1 - momentum), var * momentum + batch_var * (1 - momentum)]
            mean, var = batch_mean, batch_var
        gain = scale / np.sqrt(var + np.float32(self._epsilon(ctx)))
        y = (x - mean.reshape(shape)) * gain.reshape(shape) + bias.reshape(shape)
        return [v.astype(ctx.output_numpy_dtype(i)) for i, v in enumerate([y, *outputs][: ctx.num_outputs])]

    def _epsilon(self, ctx: NodeCtx) -> float:
        return float(np.float32(ctx.attr_float("epsilon", self.epsilon)))

    def plan(self, ctx: PlanCtx) -> None:
        training = self._check(ctx)
        for i in range(5):
            require_dtype(ctx, ctx.input_dtype(i), FLOATS, f"input {i}")
        dims = ctx.input_dims(0)
        n = dims_product(dims)
        if n == 0:
            return  # an empty output: nothing to write
        sizes: dict[str, SymbolicDim] = {"N": n, "C": dims[1], "INNER": dims_product(dims[2:])}
        stats = [ctx.input(3), ctx.input(4)]
        stat_types = [ctx.input_dtype(3), ctx.input_dtype(4)]
        if training:
            stats = self._plan_batch_statistics(ctx, sizes)
            stat_types = [DataType.FLOAT, DataType.FLOAT]
        names = ("X", "SCALE", "BIAS", "MEAN", "VAR")
        types = {f"{name}_T": t for name, t in zip(names, [ctx.input_dtype(i) for i in range(3)] + stat_types)}
        defs = {**type_defs(**types, Y_T=ctx.output_tensor(0).dtype), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        defs["EPSILON"] = node_literal(ctx, DataType.FLOAT, self._epsilon(ctx), "attribute 'epsilon'")
        shader = ctx.compile_shader("normalization/batch_norm", _SOURCE, defs, sizes)
        reads = [ctx.input(i) for i in range(3)] + stats
        ctx.dispatch(shader, reads, [ctx.output(0)], ceil_div(n, WORKGROUP_SIZE))

    def _plan_batch_statistics(self, ctx: PlanCtx, sizes: dict[str, SymbolicDim]) -> list[BufferRef]:
        """One invocation per channel: the batch mean and variance into two f32 scratch buffers (returned,
        for the affine map), and the running statistics' updates into outputs 1 and 2 when present."""
        channels = sizes["C"]
        batch = [ctx.alloc_scratch(channels * 4, "batch_mean"), ctx.alloc_scratch(channels * 4, "batch_var")]
        running = [i for i in (1, 2) if ctx.has_output(i)]
        reads = [ctx.input(0)] + [ctx.input(i + 2) for i in running]  # the input statistics each output updates
        writes = batch + [ctx.output(i) for i in running]
        defs: dict[str, object] = {**type_defs(X_T=ctx.input_dtype(0)), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        momentum = ctx.attr_float("momentum", self.momentum)
        defs["MOMENTUM"] = node_literal(ctx, DataType.FLOAT, momentum, "attribute 'momentum'")
        defs["BATCH_MEAN_BINDING"], defs["BATCH_VAR_BINDING"] = len(reads), len(reads) + 1
        for k, i in enumerate(running):
            role = ("MEAN", "VAR")[i - 1]
            defs[f"RUNNING_{role}"] = True
            defs[f"IN_{role}_BINDING"], defs[f"OUT_{role}_BINDING"] = 1 + k, len(reads) + 2 + k
            defs.update(
                type_defs(**{f"IN_{role}_T": ctx.input_dtype(i + 2), f"OUT_{role}_T": ctx.output_tensor(i).dtype})
            )
        dims = {"C": channels, "BATCH": ctx.input_dims(0)[0], "INNER": sizes["INNER"]}
        shader = ctx.compile_shader("normalization/batch_norm_stats", _STATS_SOURCE, defs, dims)
        ctx.dispatch(shader, reads, writes, ceil_div(channels, WORKGROUP_SIZE))
        return batch


BATCH_NORM: dict[tuple[str, int, int | None], BatchNormalizationOp] = {
    ("BatchNormalization", 7, None): BatchNormalizationOp(),
}
