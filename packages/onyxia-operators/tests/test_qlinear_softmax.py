"""com.microsoft QLinearSoftmax against onnxruntime, bit for bit: uint8 and int8, opset 12 (the dims from `axis`
on) and 13 (one axis, last or not), row lengths from 1 to 128, saturation; a run-time x_scale is refused by
name (the exp table is built on the host)."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import compile_model, make_model, onyxia_outputs, reference_outputs

from onyxia.core import UnsupportedOpError

RNG = np.random.default_rng(1619)
DTYPES = {"u8": np.uint8, "s8": np.int8}
# (shape, attributes)
CASES = [
    ((4, 16), {"opset": 13}),
    ((2, 3, 128), {"opset": 13, "axis": -1}),
    ((2, 5, 3), {"opset": 13, "axis": 1}),
    ((3, 4, 6), {"opset": 12, "axis": 1}),
    ((5, 1), {"opset": 13}),
]


def q(dtype: type, *shape: int) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize(("shape", "attrs"), CASES, ids=[f"{s}-{a}" for s, a in CASES])
def test_qlinear_softmax(dtype: str, shape: tuple[int, ...], attrs: dict) -> None:
    t = DTYPES[dtype]
    for x_scale in (0.02, 0.1, 0.5):
        inputs = {"x": q(t, *shape), "x_scale": np.array(x_scale, np.float32), "x_zp": q(t)}
        inputs |= {"y_scale": np.array(1 / 256, np.float32), "y_zp": np.array(0 if t == np.uint8 else -128, t)}
        model = make_model("QLinearSoftmax", inputs, attrs, domain="com.microsoft", initializers=("x_scale",))
        feeds = {k: v for k, v in inputs.items() if k != "x_scale"}
        (got,), (expected,) = onyxia_outputs(model, feeds), reference_outputs(model, feeds, "ort")
        np.testing.assert_array_equal(got, expected, err_msg=f"x_scale {x_scale}")


def test_qlinear_softmax_odd_y_scale_and_zero_point() -> None:
    """floor(1 / y_scale) = 270 and a y_zero_point of 40: outputs saturate at 255."""
    inputs = {"x": q(np.uint8, 6, 40), "x_scale": np.array(0.05, np.float32), "x_zp": q(np.uint8)}
    inputs |= {"y_scale": np.array(0.0037, np.float32), "y_zp": np.array(40, np.uint8)}
    model = make_model("QLinearSoftmax", inputs, {"opset": 13}, domain="com.microsoft", initializers=("x_scale",))
    feeds = {k: v for k, v in inputs.items() if k != "x_scale"}
    (got,), (expected,) = onyxia_outputs(model, feeds), reference_outputs(model, feeds, "ort")
    np.testing.assert_array_equal(got, expected)


def test_run_time_x_scale_is_refused_by_name() -> None:
    inputs = {"x": q(np.uint8, 2, 8), "x_scale": np.array(0.05, np.float32), "x_zp": q(np.uint8)}
    inputs |= {"y_scale": np.array(1 / 256, np.float32), "y_zp": q(np.uint8)}
    model = make_model("QLinearSoftmax", inputs, {"opset": 13}, domain="com.microsoft")
    with pytest.raises(
        UnsupportedOpError, match=r"QLinearSoftmax.*input 1 \(x_scale\) must be a compile-time constant"
    ):
        compile_model(model)
