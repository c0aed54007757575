"""ONNX ConvInteger and QLinearConv: 8-bit convolution summed exactly in int32 (conv_integer.wgsl).

The window arithmetic (kernel_shape, strides, pads, dilations, auto_pad; 1-D to 3-D) is vision/geometry.py's
`forward_window`, the same as Conv's; the kernel is its own because the float Conv's is being rewritten for speed
and these sums must stay integer. W is [M, C / group, k...] with static dims (the kernel size is a shader
literal). onnxruntime pads x with x_zero_point, so a padded tap adds nothing. x_zero_point is per tensor;
w_zero_point per tensor or per output channel ([M]); QLinearConv's w_scale likewise, x/y scales and y_zero_point
per tensor, and the optional int32 bias [M] is added to the sum before onnxruntime's requantization
(`onyxia::requant`: multiplier x_scale * w_scale[m] / y_scale, rounded half to even, saturated).
"""

from __future__ import annotations

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
from onyxia.operators.layout import WORKGROUP_SIZE, type_defs
from onyxia.operators.quantized.qlinear_params import (
    byte_operand,
    one_element,
    range_defs,
    same_dtype,
    scale_input,
    vector_of,
)
from onyxia.operators.vision.geometry import Window, forward_window

__all__ = ["CONV_INTEGER", "IntegerConvOp"]

_SOURCE = load_wgsl(__package__, "conv_integer.wgsl")


@dataclass(frozen=True)
class IntegerConvOp(OperatorBase):
    """A row: where each input sits (-1: the op has none; QLinearConv has scales and requantizes)."""

    x_zp: int
    w: int
    w_zp: int
    x_scale: int = -1
    w_scale: int = -1
    y_scale: int = -1
    y_zp: int = -1
    bias: int = -1
    name: str = "ConvInteger"

    @property
    def requant(self) -> bool:
        return self.y_zp >= 0

    def _inputs(self) -> dict[str, int]:
        """Shader binding names -> input positions, in binding order."""
        names = {"X": 0, "X_SCALE": self.x_scale, "XZP": self.x_zp, "W": self.w, "W_SCALE": self.w_scale}
        return names | {"WZP": self.w_zp, "Y_SCALE": self.y_scale, "YZP": self.y_zp, "BIAS": self.bias}

    def _check(self, ctx: NodeCtx) -> tuple[Window, int, int, DataType]:
        """Geometry, output channels, group and output dtype, after checking every input."""
        byte_operand(ctx, 0, "x")
        byte_operand(ctx, self.w, "w")
        same_dtype(ctx, self.x_zp, 0, "x_zero_point")
        same_dtype(ctx, self.w_zp, self.w, "w_zero_point")
        x, w = ctx.input_dims(0), ctx.require_static(self.w)
        if len(x) < 3 or len(w) != len(x):
            raise ctx.error(
                f"input 0 (x) has rank {len(x)} and input {self.w} (w) rank {len(w)}; expected equal ranks >= 3"
            )
        kernel = list(w[2:])
        if ctx.attr("kernel_shape") is not None and ctx.attr_ints("kernel_shape") != kernel:
            raise ctx.error(f"attribute 'kernel_shape' {ctx.attr_ints('kernel_shape')} differs from w's {kernel}")
        group = ctx.attr_int("group", 1)
        if group < 1 or x[1] != w[1] * group or w[0] % group:
            raise ctx.error(
                f"input 0 (x) has {x[1]} channels and w {list(w)} with group={group}; expected {group} groups of "
                f"{w[1]} input channels and a multiple of {group} output channels"
            )
        one_element(ctx, self.x_zp, "x_zero_point")
        vector_of(ctx, self.w_zp, w[0], "w_zero_point", "channel")
        out = DataType.INT32
        if self.requant:
            for i, what in ((self.x_scale, "x_scale"), (self.w_scale, "w_scale"), (self.y_scale, "y_scale")):
                scale_input(ctx, i, what)
                if ctx.input_dtype(i) != ctx.input_dtype(self.x_scale):
                    raise ctx.error(
                        f"input {i} ({what}) has dtype {ctx.input_dtype(i).name.lower()}; expected x_scale's"
                    )
            for i, what in ((self.x_scale, "x_scale"), (self.y_scale, "y_scale"), (self.y_zp, "y_zero_point")):
                one_element(ctx, i, what)
            vector_of(ctx, self.w_scale, w[0], "w_scale", "channel")
            out = byte_operand(ctx, self.y_zp, "y_zero_point")
            if ctx.has_input(self.bias) and (
                ctx.input_dtype(self.bias) != DataType.INT32 or list(ctx.input_dims(self.bias)) != [w[0]]
            ):
                found = f"{ctx.input_dtype(self.bias).name.lower()} {list(ctx.input_dims(self.bias))}"
                raise ctx.error(f"input {self.bias} (B) is {found}; expected int32 [{w[0]}]")
        return forward_window(ctx, x[2:], kernel), w[0], group, out

    def infer_output_shapes(self, ctx: InferenceCtx) -> list[TensorType]:
        window, m, _, out = self._check(ctx)
        if any(isinstance(d, int) and d < 1 for d in window.out):
            raise ctx.error(f"output spatial dims {list(window.out)} are empty; the kernel exceeds the padded input")
        return [TensorType(out, shape_of([ctx.input_dims(0)[0], m, *window.out]))]

    def plan(self, ctx: PlanCtx) -> None:
        window, m, group, out = self._check(ctx)
        total = dims_product(ctx.output_dims(0))
        if total == 0:
            return
        types = {"X_T": ctx.input_dtype(0), "W_T": ctx.input_dtype(self.w), "Y_T": out}
        if self.requant:
            types["S_T"] = ctx.input_dtype(self.x_scale)
        defs: dict[str, object] = {**type_defs(**types), "WORKGROUP_SIZE": WORKGROUP_SIZE}
        bound = {name: i for name, i in self._inputs().items() if i >= 0 and ctx.has_input(i)}
        defs |= {f"BIND_{name}": slot for slot, name in enumerate([*bound, "Y"])}
        defs |= {name: True for name in ("XZP", "WZP", "BIAS") if name in bound}
        if vector_of(ctx, self.w_zp, m, "w_zero_point", "channel"):
            defs["WZP_CHANNELS"] = True
        if self.requant:
            defs |= {"REQUANT": True, **range_defs(out)}
            if vector_of(ctx, self.w_scale, m, "w_scale", "channel"):
                defs["WS_CHANNELS"] = True
        cg = ctx.input_dims(self.w)[1]
        dims: dict[str, SymbolicDim] = {"TOTAL": total, "C": ctx.input_dims(0)[1], "M": m, "CG": cg, "MG": m // group}
        shader = ctx.compile_shader(ctx.node.op_type, _SOURCE, defs, {**dims, **window.volume()})
        ctx.dispatch(shader, [ctx.input(i) for i in bound.values()], [ctx.output(0)], ceil_div(total, WORKGROUP_SIZE))


CONV_INTEGER: dict[str, IntegerConvOp] = named_rows(
    {
        "ConvInteger": IntegerConvOp(x_zp=2, w=1, w_zp=3),
        "QLinearConv": IntegerConvOp(x_zp=2, w=3, w_zp=5, x_scale=1, w_scale=4, y_scale=6, y_zp=7, bias=8),
    }
)
