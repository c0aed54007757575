"""``com.example::ScaledTanh``: ``y = alpha * tanh(beta * x)``, elementwise, float32.

The attributes and their defaults (alpha = beta = 1) follow the experimental ONNX op of the same
name that was removed from the standard; a custom domain keeps it from clashing with ``ai.onnx``.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import numpy as np

from onyxia.core import (
    DataType,
    FoldCtx,
    InferenceCtx,
    OperatorBase,
    PlanCtx,
    TensorType,
    UnsupportedOpError,
    ceil_div,
    load_wgsl,
)
from onyxia.core.shapes import dims_product

__all__ = ["DOMAIN", "WORKGROUP_SIZE", "ScaledTanh"]

DOMAIN = "com.example"
WORKGROUP_SIZE = 64


class ScaledTanh(OperatorBase):
    name = "ScaledTanh"

    def infer_output_shapes(self, ctx: InferenceCtx) -> Sequence[TensorType]:
        if ctx.input_dtype(0) != DataType.FLOAT:
            raise UnsupportedOpError(
                f"node '{ctx.node.name}' ({DOMAIN}::ScaledTanh): input 0 has dtype {ctx.input_dtype(0).name}; "
                "only FLOAT is implemented"
            )
        return [TensorType(DataType.FLOAT, ctx.input_shape(0))]

    def try_fold(self, ctx: FoldCtx) -> Sequence[np.ndarray] | None:
        alpha, beta = _attributes(ctx)
        return ctx.unary_fold(lambda x: alpha * np.tanh(beta * x))

    def plan(self, ctx: PlanCtx) -> None:
        alpha, beta = _attributes(ctx)
        numel = dims_product(ctx.output_dims(0))
        shader = ctx.compile_shader(
            "example::scaled_tanh",
            load_wgsl(__package__ or "onyxia_example_ops", "scaled_tanh.wgsl"),
            defs={"ALPHA": _f32(alpha), "BETA": _f32(beta), "WORKGROUP_SIZE": WORKGROUP_SIZE},
            dims={"N": numel},
        )
        ctx.dispatch(shader, reads=[ctx.input(0)], writes=[ctx.output(0)], workgroups=ceil_div(numel, WORKGROUP_SIZE))


def _attributes(ctx: InferenceCtx | FoldCtx | PlanCtx) -> tuple[float, float]:
    alpha, beta = ctx.attr_float("alpha", 1.0), ctx.attr_float("beta", 1.0)
    if not (math.isfinite(alpha) and math.isfinite(beta)):
        raise ctx.error(f"attributes alpha={alpha} and beta={beta} must be finite")
    return alpha, beta


def _f32(value: float) -> str:
    """A WGSL f32 literal; `repr` round-trips (``1e-05`` is valid WGSL once suffixed)."""
    return f"{float(value)!r}f"
