"""CumSum, ArgMax/ArgMin and OneHot on lavapipe vs onnxruntime.

CumSum over every axis with exclusive/reverse; ArgMax/ArgMin with keepdims and select_last_index
on data full of ties; OneHot with negative and out-of-range indices; int64/float16 data and a
symbolic leading dim rebound at two sizes without recompiling.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from movement_data import random_data
from oracle import assert_close, check_op, compile_model, make_model, reference_outputs, runtime

from onyxia.operators.reduction import ARG_REDUCE

DTYPES = [np.float32, np.float16, np.int64, np.int32]


# ----- CumSum -------------------------------------------------------------------------------------
@pytest.mark.parametrize("reverse", [0, 1])
@pytest.mark.parametrize("exclusive", [0, 1])
@pytest.mark.parametrize(("shape", "axis"), [((7,), 0), ((3, 5), 0), ((3, 5), -1), ((2, 3, 4), 1), ((2, 1, 3, 2), -2)])
def test_cumsum(shape: tuple[int, ...], axis: int, exclusive: int, reverse: int) -> None:
    inputs = {"x": random_data(shape, np.float32), "axis": np.array(axis, np.int64)}
    check_op("CumSum", inputs, {"exclusive": exclusive, "reverse": reverse}, initializers=["axis"])


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_cumsum_dtypes(dtype: type) -> None:
    inputs = {"x": random_data((3, 6), dtype, low=-50, high=50), "axis": np.array(1, np.int32)}
    check_op("CumSum", inputs, {"exclusive": 1}, initializers=["axis"])


def test_cumsum_of_an_attention_mask_gives_position_ids() -> None:
    mask = np.array([[0, 0, 1, 1, 1], [1, 1, 1, 1, 1]], np.int64)
    (got,) = check_op("CumSum", {"mask": mask, "axis": np.array(1, np.int64)}, initializers=["axis"])
    assert got.tolist() == [[0, 0, 1, 2, 3], [1, 2, 3, 4, 5]]


# ----- ArgMax / ArgMin ----------------------------------------------------------------------------
def _with_ties(shape: tuple[int, ...], dtype: type) -> np.ndarray:
    """Few distinct values, so most lines hold their extreme more than once."""
    return np.random.default_rng(3).integers(-2, 3, size=shape).astype(dtype)


@pytest.mark.parametrize("select_last_index", [0, 1])
@pytest.mark.parametrize("keepdims", [0, 1])
@pytest.mark.parametrize(("shape", "axis"), [((9,), 0), ((4, 6), 0), ((4, 6), -1), ((2, 5, 3), 1), ((3, 1, 4), -3)])
@pytest.mark.parametrize("op", sorted(ARG_REDUCE))
def test_arg_reduce(op: str, shape: tuple[int, ...], axis: int, keepdims: int, select_last_index: int) -> None:
    attrs = {"axis": axis, "keepdims": keepdims, "select_last_index": select_last_index}
    check_op(op, {"x": _with_ties(shape, np.float32)}, attrs)


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("op", sorted(ARG_REDUCE))
def test_arg_reduce_dtypes(op: str, dtype: type) -> None:
    check_op(op, {"x": _with_ties((4, 5), dtype)}, {"axis": 1, "select_last_index": 1})
    check_op(op, {"x": random_data((4, 5), dtype)}, {"axis": 0})


# ----- OneHot -------------------------------------------------------------------------------------
@pytest.mark.parametrize("axis", [-1, 0, 1, -3])
def test_one_hot(axis: int) -> None:
    indices = np.array([[0, -1, 5], [2, -5, 3]], np.int64)  # 5 and -5 are out of range: all off
    inputs = {"indices": indices, "depth": np.array(4, np.int64), "values": np.array([-1.5, 2.0], np.float32)}
    check_op("OneHot", inputs, {"axis": axis}, initializers=["depth"])


@pytest.mark.parametrize(
    ("index_dtype", "value_dtype"),
    [(np.int32, np.float32), (np.float32, np.float32), (np.int64, np.int64), (np.int64, np.float16)],
    ids=["i32-f32", "f32-f32", "i64-i64", "i64-f16"],
)
def test_one_hot_dtypes(index_dtype: type, value_dtype: type) -> None:
    depth_dtype = np.float32 if index_dtype != np.int64 else np.int64
    inputs = {
        "indices": np.array([3, 0, -2, 1], index_dtype),
        "depth": np.array(5, depth_dtype),
        "values": np.array([0, 1], value_dtype),
    }
    check_op("OneHot", inputs, initializers=["depth"])


# ----- symbolic dims ------------------------------------------------------------------------------
def _floats(n: int) -> dict[str, np.ndarray]:
    return {"x": random_data((n, 4), np.float32, n)}


def _ints(n: int) -> dict[str, np.ndarray]:
    return {"x": np.random.default_rng(n).integers(-4, 4, size=(n, 4)).astype(np.int64)}


# op, x at a size, constant inputs, attributes
SYMBOLIC_CASES = [
    ("CumSum", _floats, {"axis": np.array(0, np.int64)}, {"reverse": 1}),
    ("ArgMax", _floats, {}, {"axis": 0, "keepdims": 0}),
    ("OneHot", _ints, {"depth": np.array(4, np.int64), "values": np.array([0.0, 1.0], np.float32)}, {"axis": 1}),
]


@pytest.mark.parametrize(("op", "feeds", "constants", "attrs"), SYMBOLIC_CASES, ids=[c[0] for c in SYMBOLIC_CASES])
def test_symbolic_leading_dim_rebinds_without_recompiling(op: str, feeds: Any, constants: dict, attrs: dict) -> None:
    model = make_model(op, {**feeds(2), **constants}, attrs, initializers=list(constants), dim_params={"x": ["n", 4]})
    executor = runtime().load_model(compile_model(model))
    pipelines = None
    for n in (2, 5):
        inputs = feeds(n)
        assert_close(executor.run(inputs)["y0"], reference_outputs(model, inputs, "ort")[0])
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines
