"""ConvInteger against onnxruntime, bit for bit: 1-D to 3-D, groups and depthwise, strides, pads, dilations,
auto_pad, per-tensor w_zero_point (per output channel, which onnxruntime refuses, against the ONNX
reference), a weight known at compile time; and ConvInteger's and QLinearConv's errors naming the input."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_op

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, ShapeInferenceError
from onyxia.operators import core_operator_registry

RNG = np.random.default_rng(160)

# name -> (x shape, w shape, attributes)
GEOMETRIES = {
    "1d": ((2, 3, 11), (4, 3, 3), {}),
    "2d_pads_strides": ((1, 2, 7, 6), (3, 2, 3, 2), {"pads": [1, 0, 2, 1], "strides": [2, 1]}),
    "2d_dilations": ((1, 3, 8, 8), (2, 3, 3, 3), {"dilations": [2, 1], "pads": [1, 1, 1, 1]}),
    "2d_groups": ((2, 4, 5, 5), (6, 2, 3, 3), {"group": 2, "pads": [1, 1, 1, 1]}),
    "2d_depthwise": ((1, 4, 6, 6), (4, 1, 3, 3), {"group": 4, "strides": [2, 2], "pads": [1, 1, 1, 1]}),
    "2d_same_upper": ((1, 2, 5, 7), (2, 2, 2, 3), {"auto_pad": "SAME_UPPER", "strides": [2, 2]}),
    "3d": ((1, 2, 4, 5, 3), (2, 2, 2, 3, 2), {"pads": [0, 1, 1, 1, 0, 0]}),
}


def u8(*shape: int) -> np.ndarray:
    return RNG.integers(0, 256, shape).astype(np.uint8)


# the ONNX reference applies a per-channel w_zero_point to 4-D weights only: per_channel runs the 2-D geometries
CASES = [
    (g, z) for g in sorted(GEOMETRIES) for z in ("none", "per_tensor", "per_channel") if z != "per_channel" or "2d" in g
]


@pytest.mark.parametrize(("geometry", "zero_points"), CASES)
def test_conv_integer(geometry: str, zero_points: str) -> None:
    x_shape, w_shape, attrs = GEOMETRIES[geometry]
    inputs: dict[str, np.ndarray | None] = {"x": u8(*x_shape), "w": u8(*w_shape)}
    if zero_points != "none":
        w_zp = u8(w_shape[0]) if zero_points == "per_channel" else u8()
        inputs |= {"x_zp": u8(), "w_zp": w_zp}
    # onnxruntime refuses a per-channel w_zero_point ("Non per-tensor quantization is not supported now"),
    # which the spec allows: those cases compare with the ONNX reference evaluator
    check_op("ConvInteger", inputs, attrs, reference="onnx" if zero_points == "per_channel" else "ort")


def test_conv_integer_with_a_constant_weight_and_large_sums() -> None:
    """255 * 255 products over 3 * 5 * 5 taps need 23 bits: int32 throughout; W is an initializer."""
    x, w = np.full((1, 3, 9, 9), 255, np.uint8), np.full((2, 3, 5, 5), 255, np.uint8)
    check_op("ConvInteger", {"x": x, "w": w}, {"pads": [2, 2, 2, 2]}, initializers=("w",))
    inputs = {"x": u8(1, 3, 9, 9), "w": u8(4, 3, 3, 3), "x_zp": u8(), "w_zp": u8()}
    check_op("ConvInteger", inputs, {"strides": [2, 2]}, initializers=("w", "w_zp"))


def test_bad_inputs_are_named() -> None:
    registry = core_operator_registry()
    u8, i32 = DataType.UINT8, DataType.INT32
    b = GraphBuilder("float_x")
    b.output(b.op("ConvInteger", b.input("x", DataType.FLOAT, [1, 2, 5, 5]), b.input("w", u8, [3, 2, 3, 3])))
    with pytest.raises(
        ShapeInferenceError, match=r"ConvInteger.*input 0 \(x\) has dtype float; expected uint8 or int8"
    ):
        ShapeInferencePass().run(b.graph, registry)
    b = GraphBuilder("groups")
    b.output(b.op("ConvInteger", b.input("x", u8, [1, 4, 5, 5]), b.input("w", u8, [3, 2, 3, 3]), group=2))
    with pytest.raises(ShapeInferenceError, match=r"group=2.*multiple of 2 output channels"):
        ShapeInferencePass().run(b.graph, registry)
    b = GraphBuilder("bias")
    f32 = DataType.FLOAT
    names = [("x", u8, [1, 2, 5, 5]), ("sx", f32, []), ("zx", u8, []), ("w", u8, [3, 2, 3, 3]), ("sw", f32, [])]
    names += [("zw", u8, []), ("sy", f32, []), ("zy", u8, []), ("bias", i32, [4])]
    b.output(b.op("QLinearConv", *(b.input(n, t, d) for n, t, d in names)))
    with pytest.raises(ShapeInferenceError, match=r"QLinearConv.*input 8 \(B\) is int32 \[4\]; expected int32 \[3\]"):
        ShapeInferencePass().run(b.graph, registry)
