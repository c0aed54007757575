"""QLinearConv against onnxruntime, bit for bit: uint8 x with uint8 or int8 w and int8 throughout, per-tensor and
per-output-channel w_scale, int32 bias, groups and depthwise, strides, pads and dilations, 1-D to 3-D."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import check_op
from test_conv_integer import GEOMETRIES

RNG = np.random.default_rng(161)
# (x, w, y) dtypes onnxruntime registers
COMBOS = {"u8u8": (np.uint8, np.uint8, np.uint8), "u8s8": (np.uint8, np.int8, np.uint8), "s8s8": (np.int8,) * 3}


def q(dtype: type, *shape: int, narrow: bool = False) -> np.ndarray:
    """Random bytes; with `narrow`, int8 ones in [-64, 63] (onnxruntime's uint8 x int8 AVX2 kernel saturates
    pairwise sums of products beyond that, see test_qlinear_matmul)."""
    info = np.iinfo(dtype)
    low, high = (-64, 63) if narrow and dtype == np.int8 else (info.min, info.max)
    return RNG.integers(low, high + 1, shape).astype(dtype)


def conv_inputs(combo: str, x_shape: tuple[int, ...], w_shape: tuple[int, ...], per_channel: bool, bias: bool) -> dict:
    x_t, w_t, y_t = COMBOS[combo]
    narrow = combo == "u8s8"
    m = w_shape[0]
    return {
        "x": q(x_t, *x_shape),
        "x_scale": np.array(0.021, np.float32),
        "x_zp": q(x_t),
        "w": q(w_t, *w_shape, narrow=narrow),
        "w_scale": RNG.uniform(0.002, 0.03, m if per_channel else ()).astype(np.float32),
        "w_zp": np.zeros(m if per_channel else (), w_t) if w_t == np.int8 else q(w_t),
        "y_scale": np.array(0.05, np.float32),
        "y_zp": q(y_t),
        "bias": RNG.integers(-3000, 3000, m).astype(np.int32) if bias else None,
    }


@pytest.mark.parametrize("geometry", sorted(GEOMETRIES))
@pytest.mark.parametrize("combo", sorted(COMBOS))
def test_qlinear_conv(geometry: str, combo: str) -> None:
    x_shape, w_shape, attrs = GEOMETRIES[geometry]
    for per_channel, bias in ((False, False), (True, True)):
        check_op("QLinearConv", conv_inputs(combo, x_shape, w_shape, per_channel, bias), attrs)


def test_qlinear_conv_with_constant_weights_saturates() -> None:
    """Weights, scales and bias as initializers (as exporters store them); a small y_scale saturates outputs."""
    inputs = conv_inputs("s8s8", (1, 3, 8, 8), (4, 3, 3, 3), per_channel=True, bias=True)
    inputs["y_scale"] = np.array(0.004, np.float32)
    check_op("QLinearConv", inputs, {"pads": [1, 1, 1, 1]}, initializers=("w", "w_scale", "w_zp", "bias"))


def test_qlinear_conv_per_channel_weight_zero_points() -> None:
    """uint8 weights with one zero point per output channel (int8 ones are 0 per channel in onnxruntime's models)."""
    inputs = conv_inputs("u8u8", (1, 3, 6, 6), (4, 3, 3, 3), per_channel=True, bias=True)
    inputs["w_zp"] = q(np.uint8, 4)
    check_op("QLinearConv", inputs, {"pads": [1, 1, 1, 1], "strides": [2, 1]})
