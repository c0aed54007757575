"""`ConvOp`: Conv and ConvTranspose (1-D to 3-D, grouped and depthwise), one row each, one shader.

The two differ in three places only: the window arithmetic (`forward_window` vs `transpose_window`),
where the weight tensor keeps its channels (Conv's W is ``[M, C/group, k...]``, ConvTranspose's is
``[C, M/group, k...]``), and the shader's tap rule (`MODE`). Weights must have static dims: the
kernel size is a shader literal, and exporters always store weights as initializers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from onyxia.core import (
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
from onyxia.operators.layout import WORKGROUP_SIZE
from onyxia.operators.typesets import FLOATS, require_dtype
from onyxia.operators.vision.conv_fusion import FUSED_ACTIVATIONS
from onyxia.operators.vision.conv_gemm import Epilogue, bind_epilogue, conv_shape, plan_tiled
from onyxia.operators.vision.conv_variants import choose_variant
from onyxia.operators.vision.geometry import Window, forward_window, transpose_window

__all__ = ["CONV", "CONV_ONYXIA", "ConvOp"]

_SOURCE = load_wgsl(__package__, "conv.wgsl")


@dataclass(frozen=True)
class _Channels:
    """Output channels, and input / output channels per group."""

    out: int
    in_per_group: int
    out_per_group: int


def _direct_channels(w: Sequence[int], group: int) -> _Channels:
    return _Channels(w[0], w[1], w[0] // group)


def _transpose_channels(w: Sequence[int], group: int) -> _Channels:
    return _Channels(w[1] * group, w[0] // group, w[1])


@dataclass(frozen=True)
class ConvOp(OperatorBase):
    window: Callable[[NodeCtx, Sequence[SymbolicDim], Sequence[int]], Window]
    channels: Callable[[Sequence[int], int], _Channels]
    mode: str  # the shader's MODE def
    fused: bool = False  # com.onyxia FusedConv: attributes activation (alpha, lo, hi), input 3 a residual
    name: str = "conv"

    def _geometry(self, ctx: NodeCtx) -> tuple[Window, _Channels]:
        x, w = ctx.input_dims(0), ctx.require_static(1)
        if len(x) < 3 or len(w) != len(x):
            raise ctx.error(f"input 0 has rank {len(x)} and input 1 (W) rank {len(w)}; expected equal ranks >= 3")
        kernel = list(w[2:])
        if ctx.attr("kernel_shape") is not None and ctx.attr_ints("kernel_shape") != kernel:
            raise ctx.error(f"attribute 'kernel_shape' {ctx.attr_ints('kernel_shape')} differs from W's {kernel}")
        group = ctx.attr_int("group", 1)
        channels = self.channels(w, group)
        if x[1] != channels.in_per_group * group or channels.out % group:
            raise ctx.error(
                f"input 0 has {x[1]} channels and W {list(w)} with group={group}; expected {group} groups "
                f"of {channels.in_per_group} input channels"
            )
        if ctx.has_input(2) and list(ctx.input_dims(2)) != [channels.out]:
            raise ctx.error(f"input 2 (B) has shape {ctx.input_shape(2)}; expected [{channels.out}]")
        return self.window(ctx, x[2:], kernel), channels

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        window, channels = self._geometry(ctx)
        if any(isinstance(d, int) and d < 1 for d in window.out):
            raise ctx.error(f"output spatial dims {list(window.out)} are empty; the kernel exceeds the padded input")
        dims = [ctx.input_dims(0)[0], channels.out, *window.out]
        return [TensorType(ctx.input_dtype(0), shape_of(dims))]

    def _epilogue(self, ctx: PlanCtx) -> Epilogue:
        """FusedConv's activation and residual (conv_fusion.py made them); a plain Conv has none."""
        if not self.fused:
            return Epilogue()
        activation = ctx.attr_str("activation", "none")
        if activation not in FUSED_ACTIVATIONS:
            raise ctx.error(f"has activation '{activation}'; expected one of {', '.join(FUSED_ACTIVATIONS)}")
        constants: tuple[tuple[str, float], ...] = ()
        if activation == "leaky_relu":
            constants = (("ALPHA", ctx.attr_float("alpha", 0.01)),)
        if activation == "clip":
            constants = (("LO", ctx.attr_float("lo")), ("HI", ctx.attr_float("hi")))
        residual = 3 if ctx.has_input(3) else None
        if residual is not None and list(ctx.input_dims(3)) != list(ctx.output_dims(0)):
            raise ctx.error(f"input 3 (residual) has shape {ctx.input_shape(3)}; expected the output's")
        return Epilogue(activation, constants, residual)

    def plan(self, ctx: PlanCtx) -> None:
        window, channels = self._geometry(ctx)
        for i in range(4):
            if ctx.has_input(i):
                require_dtype(ctx, ctx.input_dtype(i), FLOATS, f"input {i}")
        total = dims_product(ctx.output_dims(0))
        if total == 0:
            return
        epilogue = self._epilogue(ctx)
        shape = conv_shape(ctx, window, channels.in_per_group, channels.out_per_group, self.mode == "transpose")
        variant = choose_variant(shape, f"node '{ctx.node.name}' ({ctx.node.op_type})")
        if variant.kernel != "direct":
            plan_tiled(ctx, window, ctx.attr_int("group", 1), variant, epilogue)
            return
        defs: dict[str, object] = {"WORKGROUP_SIZE": WORKGROUP_SIZE, "MODE": self.mode}
        reads = [ctx.input(0), ctx.input(1)]
        bind_epilogue(ctx, epilogue, reads, defs)
        dims = {
            "TOTAL": total,
            "C": ctx.input_dims(0)[1],
            "M": channels.out,
            "CG": channels.in_per_group,
            "MG": channels.out_per_group,
            **window.volume(),
        }
        shader = ctx.compile_shader(f"vision/conv@{variant.name}", _SOURCE, defs, dims)
        ctx.dispatch(shader, reads, [ctx.output(0)], ceil_div(total, WORKGROUP_SIZE))


CONV: dict[str, ConvOp] = named_rows(
    {
        "Conv": ConvOp(forward_window, _direct_channels, "direct"),
        "ConvTranspose": ConvOp(transpose_window, _transpose_channels, "transpose"),
    }
)
CONV_ONYXIA: dict[str, ConvOp] = {"FusedConv": ConvOp(forward_window, _direct_channels, "direct", True, "FusedConv")}
