"""Cast (and CastLike) on lavapipe vs onnxruntime, for every pair of GPU dtypes.

Values are chosen inside the range where ONNX defines the result: float to unsigned casts get
non-negative inputs and float to int8 stays within int8 (outside, C++ and numpy leave it
undefined). Integer narrowing (int32 300 -> int8 44) and sign changes are defined and covered.
"""

from __future__ import annotations

import numpy as np
import pytest
from movement_data import random_data
from oracle import check_op

from onyxia.core import DataType

GPU_DTYPES = [np.float32, np.float16, np.int32, np.int64, np.uint32, np.int8, np.uint8, np.bool_]
PAIRS = [(x, y) for x in GPU_DTYPES for y in GPU_DTYPES]


def _source(shape: tuple[int, ...], x: type, y: type, seed: int = 0) -> np.ndarray:
    if np.issubdtype(x, np.floating):
        rng = np.random.default_rng(seed)
        low, high = (0, 250) if y in (np.uint8, np.uint32) else ((-120, 120) if y == np.int8 else (-1000, 1000))
        values = rng.uniform(low, high, shape)
        values = np.where(rng.random(shape) < 0.1, 0.0, values)  # exact zeros matter for bool targets
        return np.asarray(values, x)
    return random_data(shape, x, seed, low=-300, high=300)


def _onnx_type(dtype: type) -> int:
    return int(DataType.from_numpy(np.dtype(dtype)))


@pytest.mark.parametrize(("x", "y"), PAIRS, ids=lambda d: np.dtype(d).name)
def test_cast_pair_matches_onnxruntime(x: type, y: type) -> None:
    check_op("Cast", {"x": _source((3, 37), x, y)}, {"to": _onnx_type(y)})


@pytest.mark.parametrize(
    ("shape", "dims"),
    [((), None), ((0, 4), None), ((2, 1, 3, 1, 2, 2), None), ((5, 3), ["n", 3]), ((2, 700), ["b", "s"])],
    ids=["rank0", "empty", "rank6", "symbolic", "symbolic-large"],
)
@pytest.mark.parametrize(("x", "y"), [(np.float32, np.float16), (np.int64, np.bool_), (np.float16, np.int8)], ids=str)
def test_cast_shapes(shape: tuple[int, ...], dims: list | None, x: type, y: type) -> None:
    dim_params = {"x": dims} if dims else None
    check_op("Cast", {"x": _source(shape, x, y)}, {"to": _onnx_type(y)}, dim_params=dim_params)


def test_cast_accepts_saturate() -> None:
    check_op("Cast", {"x": _source((4, 5), np.float32, np.int32)}, {"to": _onnx_type(np.int32), "saturate": 1})


@pytest.mark.parametrize(("x", "y"), [(np.float32, np.int64), (np.int64, np.float16), (np.bool_, np.float32)], ids=str)
def test_castlike_matches_onnxruntime(x: type, y: type) -> None:
    inputs = {"x": _source((3, 4), x, y), "like": np.zeros(1, y)}
    check_op("CastLike", inputs, initializers=["like"])
