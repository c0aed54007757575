"""com.microsoft QLinearConcat and QLinearGlobalAveragePool against onnxruntime, bit for bit: uint8 and int8,
inputs whose scales differ from the output's or equal it, axes, NCHW and channels-last images, 1-D to 3-D."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import helper
from oracle import assert_close, make_model, onyxia_outputs, reference_outputs

RNG = np.random.default_rng(1617)
DTYPES = {"u8": np.uint8, "s8": np.int8}


def q(dtype: type, *shape: int) -> np.ndarray:
    info = np.iinfo(dtype)
    return RNG.integers(info.min, info.max + 1, shape).astype(dtype)


def check(model: object, feeds: dict[str, np.ndarray]) -> None:
    (got,), (expected,) = onyxia_outputs(model, feeds), reference_outputs(model, feeds, "ort")
    assert_close(got, expected)


def concat_model(dtype: type, shapes: list[tuple[int, ...]], axis: int, same_params: bool) -> tuple[object, dict]:
    feeds: dict[str, np.ndarray] = {"y_scale": np.array(0.05, np.float32), "y_zp": q(dtype)}
    names = ["y_scale", "y_zp"]
    for k, shape in enumerate(shapes):
        params = (
            (feeds["y_scale"], feeds["y_zp"])
            if same_params and k == 0
            else (np.array(RNG.uniform(0.01, 0.2), np.float32), q(dtype))
        )
        feeds |= {f"x{k}": q(dtype, *shape), f"s{k}": params[0], f"z{k}": params[1]}
        names += [f"x{k}", f"s{k}", f"z{k}"]
    inputs = [
        helper.make_tensor_value_info(n, helper.np_dtype_to_tensor_dtype(feeds[n].dtype), list(feeds[n].shape))
        for n in names
    ]
    node = helper.make_node("QLinearConcat", names, ["y"], domain="com.microsoft", axis=axis)
    graph = helper.make_graph([node], "qlinear_concat", inputs, [helper.make_empty_tensor_value_info("y")])
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10), feeds


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize(
    ("shapes", "axis"),
    [([(2, 3, 4), (2, 5, 4)], 1), ([(3, 7), (3, 1), (3, 20)], -1), ([(1, 4), (6, 4)], 0), ([(2, 2, 3, 3)] * 3, 1)],
)
@pytest.mark.parametrize("same_params", [False, True], ids=["requantized", "first_copied"])
def test_qlinear_concat(dtype: str, shapes: list[tuple[int, ...]], axis: int, same_params: bool) -> None:
    model, feeds = concat_model(DTYPES[dtype], shapes, axis, same_params)
    check(model, feeds)


@pytest.mark.parametrize("dtype", sorted(DTYPES))
@pytest.mark.parametrize("shape", [(2, 3, 5, 5), (1, 8, 17), (1, 2, 3, 4, 5), (3, 1, 64, 64)])
@pytest.mark.parametrize("channels_last", [0, 1])
def test_qlinear_global_average_pool(dtype: str, shape: tuple[int, ...], channels_last: int) -> None:
    t = DTYPES[dtype]
    for x_scale, y_scale in ((0.02, 0.015), (0.1, 0.001), (0.004, 0.05)):
        inputs = {"x": q(t, *shape), "x_scale": np.array(x_scale, np.float32), "x_zp": q(t)}
        inputs |= {"y_scale": np.array(y_scale, np.float32), "y_zp": q(t)}
        model = make_model("QLinearGlobalAveragePool", inputs, {"channels_last": channels_last}, domain="com.microsoft")
        check(model, inputs)
