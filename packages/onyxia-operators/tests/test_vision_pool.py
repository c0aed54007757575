"""The pool family table drives these tests: every row once, then the window attributes on the local pools."""

from typing import Any

import numpy as np
import pytest
from oracle import assert_close, check_op, compile_model, make_model, reference_outputs, runtime

from onyxia.core import ShapeInferenceError, UnsupportedOpError
from onyxia.operators.vision import POOL

RNG = np.random.default_rng(0)
LOCAL = {"kernel_shape": [3, 2], "strides": [2, 1], "pads": [1, 0, 1, 1]}


def _r(*shape: int, dtype: type = np.float32) -> np.ndarray:
    return RNG.standard_normal(shape).astype(dtype)


@pytest.mark.parametrize("op", sorted(POOL))
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_every_row(op: str, dtype: type) -> None:
    attrs = {} if op.startswith("Global") else LOCAL
    check_op(op, {"x": _r(2, 3, 7, 6, dtype=dtype)}, attrs)


@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [3, 3], "strides": [2, 2], "ceil_mode": 1},
        {"kernel_shape": [2, 2], "strides": [3, 3], "pads": [0, 0, 1, 1], "ceil_mode": 1},  # drops a window
        {"kernel_shape": [2, 2], "strides": [2, 2], "dilations": [2, 1], "pads": [1, 0, 1, 1]},
        {"kernel_shape": [3, 3], "strides": [2, 2], "auto_pad": "SAME_UPPER"},
        {"kernel_shape": [2, 2], "strides": [3, 3], "auto_pad": "SAME_LOWER"},
        {"kernel_shape": [3, 2], "auto_pad": "VALID"},
    ],
)
@pytest.mark.parametrize("op", ["MaxPool", "AveragePool"])
def test_window_attributes(op: str, attrs: dict[str, Any]) -> None:
    check_op(op, {"x": _r(1, 2, 7, 8)}, attrs)


@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [3, 3], "pads": [1, 1, 1, 1]},
        {"kernel_shape": [3, 3], "strides": [2, 2], "pads": [1, 0, 1, 1], "ceil_mode": 1},
        {"kernel_shape": [2, 2], "strides": [2, 2], "dilations": [2, 2], "pads": [1, 1, 1, 1]},
    ],
)
def test_average_counting_the_padding(attrs: dict[str, Any]) -> None:
    check_op("AveragePool", {"x": _r(1, 2, 7, 8)}, {**attrs, "count_include_pad": 1})


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
def test_one_spatial_axis(op: str) -> None:
    check_op(op, {"x": _r(2, 3, 11)}, {"kernel_shape": [3], "strides": [2], "pads": [1, 1]})


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices(storage_order: int) -> None:
    attrs = {"kernel_shape": [3, 2], "strides": [2, 2], "pads": [1, 0, 1, 1], "storage_order": storage_order}
    check_op("MaxPool", {"x": _r(2, 3, 7, 6)}, attrs, num_outputs=2)


@pytest.mark.parametrize("op", ["MaxPool", "AveragePool", "LpPool"])
@pytest.mark.parametrize(
    "attrs",
    [
        {"kernel_shape": [2, 3, 2], "strides": [1, 2, 2], "pads": [1, 0, 1, 0, 1, 1]},
        {"kernel_shape": [2, 2, 2], "strides": [2, 2, 2], "dilations": [2, 1, 2], "ceil_mode": 1},
        {"kernel_shape": [3, 3, 2], "strides": [2, 2, 2], "auto_pad": "SAME_LOWER"},
    ],
)
def test_three_spatial_axes(op: str, attrs: dict[str, Any]) -> None:
    check_op(op, {"x": _r(2, 2, 5, 6, 7)}, attrs)


@pytest.mark.parametrize("storage_order", [0, 1])
def test_max_pool_indices_three_spatial_axes(storage_order: int) -> None:
    attrs = {
        "kernel_shape": [2, 3, 2],
        "strides": [2, 1, 2],
        "pads": [0, 1, 1, 1, 1, 0],
        "storage_order": storage_order,
    }
    check_op("MaxPool", {"x": _r(2, 2, 4, 5, 6)}, attrs, num_outputs=2)


def test_average_counting_the_padding_three_spatial_axes() -> None:
    attrs = {"kernel_shape": [3, 2, 3], "pads": [1, 1, 0, 1, 1, 2], "count_include_pad": 1, "ceil_mode": 1}
    check_op("AveragePool", {"x": _r(1, 2, 5, 4, 6)}, {**attrs, "strides": [2, 2, 2]})


@pytest.mark.parametrize("dtype", [np.uint8, np.int8])
def test_max_pool_8_bit_ints(dtype: type) -> None:
    x = RNG.integers(np.iinfo(dtype).min, np.iinfo(dtype).max, (2, 3, 7, 6), endpoint=True).astype(dtype)
    check_op("MaxPool", {"x": x}, {**LOCAL, "pads": [0, 0, 1, 1]})


def test_global_pool_over_three_spatial_axes() -> None:
    check_op("GlobalAveragePool", {"x": _r(2, 3, 4, 5, 3)})


@pytest.mark.parametrize("op", ["MaxPool", "GlobalAveragePool"])
def test_symbolic_batch_rebinds_without_recompiling(op: str) -> None:
    attrs = {} if op.startswith("Global") else LOCAL
    model = make_model(op, {"x": _r(1, 3, 7, 6)}, attrs, dim_params={"x": ["N", 3, 7, 6]})
    executor = runtime().load_model(compile_model(model))
    pipelines = None
    for batch in (2, 5):
        feeds = {"x": _r(batch, 3, 7, 6)}
        assert_close(executor.run(feeds)["y0"], reference_outputs(model, feeds, "ort")[0])
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines


def test_symbolic_spatial_dims_with_explicit_pads() -> None:
    dims = {"x": ["N", 3, "H", "W"]}
    check_op("AveragePool", {"x": _r(2, 3, 7, 6)}, {**LOCAL, "ceil_mode": 1}, dim_params=dims)
    check_op("GlobalMaxPool", {"x": _r(2, 3, 7, 6)}, dim_params=dims)


def _compile(op: str, attrs: dict, num_outputs: int = 1, dim_params: dict | None = None) -> None:
    model = make_model(op, {"x": _r(1, 2, 6, 6)}, attrs, num_outputs=num_outputs, dim_params=dim_params)
    model.graph.node[0].name = "pool_1"
    compile_model(model)


@pytest.mark.parametrize(
    ("attrs", "num_outputs", "attribute"),
    [
        ({"kernel_shape": [2, 2], "ceil_mode": 2}, 1, "ceil_mode=2"),
        ({"kernel_shape": [2, 2], "auto_pad": "same_upper"}, 1, "auto_pad=same_upper"),
        ({"kernel_shape": [2, 2], "storage_order": 2}, 2, "storage_order=2"),
    ],
)
def test_unsupported_attribute_values_name_node_op_and_attribute(attrs: dict, num_outputs: int, attribute: str) -> None:
    with pytest.raises(UnsupportedOpError, match=rf"node 'pool_1' \(MaxPool, domain ai.onnx\): attribute {attribute}"):
        _compile("MaxPool", attrs, num_outputs)


def test_same_padding_needs_static_spatial_dims() -> None:
    with pytest.raises(ShapeInferenceError, match=r"node 'pool_1' \(MaxPool.*must be static for auto_pad=SAME_UPPER"):
        _compile("MaxPool", {"kernel_shape": [2, 2], "auto_pad": "SAME_UPPER"}, dim_params={"x": [1, 2, "H", 6]})
