"""com.microsoft QLinearAdd, QLinearMul, QLinearSigmoid and QLinearLeakyRelu against onnxruntime: uint8 and int8,
broadcasting (onnxruntime's scalar-operand and per-row paths included), an omitted output zero point, saturation.
Add, Mul and LeakyRelu must be equal element for element; Sigmoid may differ by one in at most 1 element in 1000
(onnxruntime tabulates MLAS's approximate logistic, Onyxia evaluates 1 / (1 + exp(-x)); see
quantized/qlinear_elementwise.py)."""

from __future__ import annotations

import numpy as np
import pytest
from oracle import make_model, onyxia_outputs, reference_outputs

RNG = np.random.default_rng(1616)
DTYPES = {"u8": np.uint8, "s8": np.int8}
# (A shape, B shape): same shape, scalar A, scalar B, a per-row B, a per-column A, and a 3-D broadcast
SHAPES = [((5, 40), (5, 40)), ((1,), (67,)), ((67,), ()), ((4, 9), (4, 1)), ((1, 9), (4, 9)), ((2, 1, 6), (3, 1))]


def q(dtype: type, *shape: int) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def scale(low: float = 0.002, high: float = 0.1) -> np.ndarray:
    return np.array(RNG.uniform(low, high), np.float32)


def run(op: str, inputs: dict[str, np.ndarray | None]) -> tuple[np.ndarray, np.ndarray]:
    """(Onyxia's output, onnxruntime's) for one com.microsoft node."""
    model = make_model(op, inputs, domain="com.microsoft")
    feeds = {k: v for k, v in inputs.items() if v is not None}
    (got,), (expected,) = onyxia_outputs(model, feeds), reference_outputs(model, feeds, "ort")
    assert got.shape == expected.shape and got.dtype == expected.dtype, (got.shape, expected.shape, got.dtype)
    return got, expected


def binary_inputs(dtype: type, a_shape: tuple[int, ...], b_shape: tuple[int, ...], zero_points: bool) -> dict:
    return {
        "a": q(dtype, *a_shape),
        "a_scale": scale(),
        "a_zp": q(dtype),
        "b": q(dtype, *b_shape),
        "b_scale": scale(),
        "b_zp": q(dtype),
        "c_scale": scale(0.05, 0.3),
    } | ({"c_zp": q(dtype)} if zero_points else {})  # dropped, not "": onnxruntime refuses an empty trailing name


# without c_zero_point the output is uint8 (onnxruntime's type inference also refuses an omitted input before it)
BINARY_CASES = [("u8", True), ("s8", True), ("u8", False)]


@pytest.mark.parametrize("op", ["QLinearAdd", "QLinearMul"])
@pytest.mark.parametrize(("dtype", "zero_points"), BINARY_CASES)
def test_qlinear_binary_equals_onnxruntime(op: str, dtype: str, zero_points: bool) -> None:
    for trial in range(4):
        for a_shape, b_shape in SHAPES:
            inputs = binary_inputs(DTYPES[dtype], a_shape, b_shape, zero_points)
            if op == "QLinearMul" and trial % 2:
                inputs["c_scale"] = scale(1.0, 20.0)  # products of 8-bit values: a large scale avoids saturation
            got, expected = run(op, inputs)
            np.testing.assert_array_equal(got, expected, err_msg=f"{op} {a_shape} x {b_shape}")


def test_qlinear_add_saturates_and_rounds_ties() -> None:
    """Scales that put every sum on a half (ties go to even) or drive it past the range's ends."""
    a, b = q(np.uint8, 64), q(np.uint8, 64)
    halves = {"a": a, "a_scale": np.array(0.5, np.float32), "a_zp": np.array(3, np.uint8), "b": b}
    halves |= {"b_scale": np.array(0.25, np.float32), "b_zp": np.array(128, np.uint8)}
    for c_scale in (0.5, 1.0, 0.01):
        inputs = halves | {"c_scale": np.array(c_scale, np.float32), "c_zp": np.array(100, np.uint8)}
        got, expected = run("QLinearAdd", inputs)
        np.testing.assert_array_equal(got, expected)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
def test_qlinear_sigmoid_matches_onnxruntime_within_one_in_a_thousand(dtype: str) -> None:
    """Every byte value under 60 random parameter sets: each output within 1 of onnxruntime's, and at most 1 in 1000
    different at all (the measured count is in the failure message)."""
    info = np.iinfo(DTYPES[dtype])
    x = np.arange(info.min, info.max + 1).astype(DTYPES[dtype]).reshape(16, 16)
    differ = total = 0
    for _ in range(60):
        y_scale = np.array(RNG.uniform(1 / 512, 1 / 64), np.float32)
        inputs = {
            "x": x,
            "x_scale": scale(0.01, 0.08),
            "x_zp": q(DTYPES[dtype]),
            "y_scale": y_scale,
            "y_zp": q(DTYPES[dtype]),
        }
        got, expected = run("QLinearSigmoid", inputs)
        diff = np.abs(got.astype(np.int32) - expected.astype(np.int32))
        assert diff.max() <= 1, f"an output differs by {diff.max()}"
        differ, total = differ + int(np.count_nonzero(diff)), total + diff.size
    assert differ * 1000 <= total, f"{differ} of {total} outputs differ by one from onnxruntime's"


def test_qlinear_sigmoid_without_output_zero_point() -> None:
    x = q(np.uint8, 3, 50)
    got, expected = run(
        "QLinearSigmoid",
        {"x": x, "x_scale": scale(), "x_zp": None, "y_scale": np.array(1 / 256, np.float32), "y_zp": None},
    )
    assert np.abs(got.astype(np.int32) - expected.astype(np.int32)).max() <= 1


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("alpha", [0.01, 0.2, 1.7])
def test_qlinear_leaky_relu_equals_onnxruntime(dtype: str, alpha: float) -> None:
    """Every byte value under 10 random parameter sets: equal to onnxruntime's table, element for element."""
    info = np.iinfo(DTYPES[dtype])
    x = np.arange(info.min, info.max + 1).astype(DTYPES[dtype]).reshape(4, 64)
    for _ in range(10):
        inputs = {
            "x": x,
            "x_scale": scale(0.01, 0.1),
            "x_zp": q(DTYPES[dtype]),
            "y_scale": scale(0.005, 0.05),
            "y_zp": q(DTYPES[dtype]),
        }
        model = make_model("QLinearLeakyRelu", inputs, {"alpha": alpha}, domain="com.microsoft")
        (got,), (expected,) = onyxia_outputs(model, inputs), reference_outputs(model, inputs, "ort")
        np.testing.assert_array_equal(got, expected)
