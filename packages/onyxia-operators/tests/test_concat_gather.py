"""Concat and Gather on lavapipe vs onnxruntime: ranks 1-6, empty inputs, negative axes and
indices, symbolic dims, and the data dtypes models feed them (float16, int64, bool)."""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from movement_data import random_data
from oracle import check_op

# (input shapes, axis, symbolic dims per input or None)
CONCAT_CASES: list[tuple[list[tuple[int, ...]], int, list[list[Any]] | None]] = [
    ([(2, 3), (2, 5)], 1, None),
    ([(2, 3), (2, 5)], -1, None),
    ([(1, 4), (3, 4), (2, 4)], 0, None),
    ([(4,)], 0, None),
    ([(3,), (0,), (5,)], 0, None),
    ([(2, 0), (2, 3)], 1, None),
    ([(0, 3), (0, 3)], 0, None),
    ([(1, 2, 1, 2, 3, 2), (1, 2, 1, 2, 1, 2)], 4, None),
    ([(2, 3, 4), (2, 1, 4)], -2, None),
    ([(5, 3), (5, 2)], 1, [["n", 3], ["n", 2]]),
    ([(2, 3), (4, 3)], 0, [["a", 3], ["b", 3]]),
    ([(2, 3, 4), (2, 5, 4)], 1, [["b", "s", 4], ["b", "t", 4]]),
]


@pytest.mark.parametrize(("shapes", "axis", "dims"), CONCAT_CASES)
def test_concat_matches_onnxruntime(shapes: list[tuple[int, ...]], axis: int, dims: list | None) -> None:
    inputs = {f"x{i}": random_data(s, np.float32, seed=i) for i, s in enumerate(shapes)}
    dim_params = {f"x{i}": d for i, d in enumerate(dims)} if dims else None
    check_op("Concat", inputs, {"axis": axis}, dim_params=dim_params)


@pytest.mark.parametrize("dtype", [np.float16, np.int64, np.int32, np.uint8, np.bool_], ids=lambda d: np.dtype(d).name)
def test_concat_dtypes(dtype: type) -> None:
    inputs = {
        "a": random_data((2, 3), dtype, 1),
        "b": random_data((2, 1), dtype, 2),
        "c": random_data((2, 3), dtype, 3),
    }
    check_op("Concat", inputs, {"axis": 1})


# (data shape, indices, axis, symbolic dims for data and indices or None)
GATHER_CASES: list[tuple[tuple[int, ...], Any, int, dict[str, list[Any]] | None]] = [
    ((5, 4), [0, -1, 3], 0, None),
    ((5, 4), [[1, -4], [3, 0]], 1, None),
    ((5, 4), [2, -2], -1, None),
    ((5, 4), 3, 0, None),
    ((5, 4), -1, 1, None),
    ((6,), 2, 0, None),
    ((2, 2, 2, 2, 2, 3), [2, 0, -1], 5, None),
    ((2, 3, 2, 2, 2), [[1]], 1, None),
    ((5, 4), np.zeros(0, np.int64), 0, None),
    ((0, 4), [1, -1], 1, None),
    ((7, 4), [-1, 2], 1, {"data": ["n", 4]}),
    ((7, 4), [0, 6, -7], 0, {"data": ["n", 4]}),
    ((3, 4), [[0, 2, 1], [1, 1, 0]], 0, {"indices": ["k", 3]}),
]


@pytest.mark.parametrize("index_dtype", [np.int64, np.int32], ids=["int64", "int32"])
@pytest.mark.parametrize(("shape", "indices", "axis", "dims"), GATHER_CASES)
def test_gather_matches_onnxruntime(
    shape: tuple, indices: Any, axis: int, dims: dict | None, index_dtype: type
) -> None:
    inputs = {"data": random_data(shape, np.float32), "indices": np.asarray(indices, index_dtype)}
    check_op("Gather", inputs, {"axis": axis}, dim_params=dims)


@pytest.mark.parametrize("dtype", [np.float16, np.int64, np.int32, np.uint8, np.bool_], ids=lambda d: np.dtype(d).name)
def test_gather_dtypes(dtype: type) -> None:
    inputs = {"data": random_data((4, 3, 2), dtype), "indices": np.array([[3, -1], [0, 1]], np.int64)}
    check_op("Gather", inputs, {"axis": 0})


def test_gather_embedding_with_weight_initializer() -> None:
    # The exporters' embedding lookup: a weight initializer gathered by runtime token ids.
    inputs = {"weight": random_data((50, 16), np.float16), "ids": np.array([[3, 49, 0, 7]], np.int64)}
    check_op("Gather", inputs, {"axis": 0}, initializers=["weight"], dim_params={"ids": ["batch", "seq"]})


def test_gather_folds_constant_inputs() -> None:
    inputs = {"data": random_data((4, 3), np.float32), "indices": np.array([-1, 0], np.int64)}
    check_op("Gather", inputs, {"axis": 1}, initializers=["data", "indices"])
