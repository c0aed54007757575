"""ONNX ConvInteger and QLinearConv: 8-bit convolution summed exactly in int32, on the float Conv's kernels.

The window arithmetic (kernel_shape, strides, pads, dilations, auto_pad; 1-D to 3-D) is vision/geometry.py's
`forward_window`, and the kernel is the one the conv variant table (vision/conv_variants.py) picks for Conv, run
with INTEGER: the implicit GEMM (vision/conv_gemm.wgsl, W's bytes packed at load, four channels to a u32) or the
depthwise kernel, which sum in i32 (wrapping like onnxruntime's accumulator). The table's `direct` row runs
conv_integer.wgsl, one invocation per output, for what those cannot take: a W computed at run time (the GEMM reads
W packed at load) and spatial dims that are not compile-time numbers. This op is the kernels'
`ConvEpilogue`: onyxia::conv_integer_epilogue's zero points, int32 bias and requantization.

W is [M, C / group, k...] with static dims (the kernel size is a shader literal). onnxruntime pads x with
x_zero_point, so a padded tap adds nothing. x_zero_point is per tensor; w_zero_point per tensor or per output
channel ([M]); QLinearConv's w_scale likewise, x/y scales and y_zero_point per tensor, and the optional int32 bias
[M] is added to the sum before onnxruntime's requantization (`onyxia::requant`: multiplier x_scale * w_scale[m] /
y_scale, rounded half to even, saturated).
"""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.core import (
    BufferRef,
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
from onyxia.operators.vision.conv_gemm import conv_shape, plan_tiled
from onyxia.operators.vision.conv_variants import choose_variant
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

    @property
    def weight(self) -> int:
        return self.w

    @property
    def weight_zero_point(self) -> int:
        return self.w_zp

    def bind(self, ctx: PlanCtx, reads: list[BufferRef], defs: dict[str, object]) -> None:
        """onyxia::conv_integer_epilogue's reads after x and W, and its defs."""
        m = ctx.input_dims(self.w)[0]
        out = ctx.output_tensor(0).dtype
        types = {"X_T": ctx.input_dtype(0), "W_T": ctx.input_dtype(self.w), "Y_T": out}
        if self.requant:
            types["S_T"] = ctx.input_dtype(self.x_scale)
        defs |= {**type_defs(**types), "INTEGER": True}
        names = {"XZP": self.x_zp, "WZP": self.w_zp, "X_SCALE": self.x_scale}
        names |= {"W_SCALE": self.w_scale, "Y_SCALE": self.y_scale, "YZP": self.y_zp, "BIAS": self.bias}
        for name, i in names.items():
            if i >= 0 and ctx.has_input(i):
                defs[f"BIND_{name}"] = len(reads)
                reads.append(ctx.input(i))
                defs[name] = True
        defs["BIND_Y"] = len(reads)
        if "WZP" in defs and vector_of(ctx, self.w_zp, m, "w_zero_point", "channel"):
            defs["WZP_CHANNELS"] = True
        if self.requant:
            defs |= {"REQUANT": True, **range_defs(out)}
            if vector_of(ctx, self.w_scale, m, "w_scale", "channel"):
                defs["WS_CHANNELS"] = True

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
        window, m, group, _ = self._check(ctx)
        total = dims_product(ctx.output_dims(0))
        if total == 0:
            return
        cg = ctx.require_static(self.w)[1]
        shape = conv_shape(ctx, window, cg, m // group, False, weight=self.w)
        variant = choose_variant(shape, f"node '{ctx.node.name}' ({ctx.node.op_type})")
        if variant.kernel != "direct":
            plan_tiled(ctx, window, group, variant, self)
            return
        defs: dict[str, object] = {"WORKGROUP_SIZE": WORKGROUP_SIZE}
        reads = [ctx.input(0), ctx.input(self.w)]
        self.bind(ctx, reads, defs)
        dims: dict[str, SymbolicDim] = {"TOTAL": total, "C": ctx.input_dims(0)[1], "M": m, "CG": cg, "MG": m // group}
        shader = ctx.compile_shader(
            f"quantized/conv_integer@{variant.name}", _SOURCE, defs, {**dims, **window.volume()}
        )
        ctx.dispatch(shader, reads, [ctx.output(0)], ceil_div(total, WORKGROUP_SIZE))


CONV_INTEGER: dict[str, IntegerConvOp] = named_rows(
    {
        "ConvInteger": IntegerConvOp(x_zp=2, w=1, w_zp=3),
        "QLinearConv": IntegerConvOp(x_zp=2, w=3, w_zp=5, x_scale=1, w_scale=4, y_scale=6, y_zp=7, bias=8),
    }
)
