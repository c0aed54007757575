"""GatherElements, GatherND, ScatterElements and ScatterND on lavapipe vs onnxruntime.

Negative indices everywhere, GatherND batch_dims, every scatter reduction with duplicate indices
(reduction none gets unique indices: ONNX leaves duplicates undefined there), int64/float16 data,
and symbolic leading dims rebound at two sizes without recompiling.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from movement_data import random_data
from oracle import assert_close, check_op, compile_model, make_model, reference_outputs, runtime

RNG = np.random.default_rng(7)
DTYPES = [np.float32, np.float16, np.int64, np.int32]


def _indices(shape: tuple[int, ...], size: int) -> np.ndarray:
    """Random int64 indices in [-size, size): negative ones exercise the wrap."""
    return RNG.integers(-size, size, size=shape, dtype=np.int64)


def _unique_along(shape: tuple[int, ...], axis: int, size: int) -> np.ndarray:
    """Indices unique along `axis` in each line (half of them negative), for reduction none."""
    full = list(shape)
    full[axis] = size
    perm = np.argsort(RNG.random(full), axis=axis).take(range(shape[axis]), axis=axis)
    return np.where(RNG.random(shape) < 0.5, perm - size, perm).astype(np.int64)


def _unique_rows(count: int, dims: tuple[int, ...]) -> np.ndarray:
    """`count` distinct index rows into `dims`, some written with negative components."""
    flat = RNG.permutation(int(np.prod(dims)))[:count]
    rows = np.stack(np.unravel_index(flat, dims), axis=-1).astype(np.int64)
    return np.where(RNG.random(rows.shape) < 0.5, rows - np.array(dims), rows)


# ----- GatherElements -----------------------------------------------------------------------------
# (data shape, indices shape, axis)
ELEMENTS_CASES = [((5,), (7,), 0), ((3, 4), (3, 4), 0), ((3, 4), (2, 6), 1), ((3, 4), (2, 3), -1)]
ELEMENTS_CASES += [((2, 3, 4), (2, 2, 4), 1), ((2, 3, 2, 2, 3), (1, 3, 2, 1, 3), -3), ((3, 4), (0, 4), 0)]


@pytest.mark.parametrize(("data", "indices", "axis"), ELEMENTS_CASES)
def test_gather_elements(data: tuple[int, ...], indices: tuple[int, ...], axis: int) -> None:
    inputs = {"data": random_data(data, np.float32), "indices": _indices(indices, data[axis])}
    check_op("GatherElements", inputs, {"axis": axis})


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_gather_elements_dtypes(dtype: type) -> None:
    inputs = {"data": random_data((4, 3), dtype), "indices": _indices((4, 3), 3).astype(np.int32)}
    check_op("GatherElements", inputs, {"axis": 1})


# ----- GatherND -----------------------------------------------------------------------------------
# (data shape, indices shape without the row length, row length K, batch_dims)
ND_CASES = [((4, 5), (3,), 2, 0), ((4, 5), (2, 3), 1, 0), ((4,), (), 1, 0), ((2, 3, 4), (2,), 3, 0)]
ND_CASES += [((2, 3, 4), (2, 2), 1, 1), ((2, 3, 4, 5), (2, 3, 2), 1, 2), ((2, 3, 4, 5), (2, 4), 2, 1)]


@pytest.mark.parametrize(("data", "rows", "k", "batch_dims"), ND_CASES)
def test_gather_nd(data: tuple[int, ...], rows: tuple[int, ...], k: int, batch_dims: int) -> None:
    sizes = np.array(data[batch_dims : batch_dims + k])
    indices = (RNG.integers(0, 1 << 20, size=(*rows, k)) % (2 * sizes) - sizes).astype(np.int64)
    check_op("GatherND", {"data": random_data(data, np.float32), "indices": indices}, {"batch_dims": batch_dims})


@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_gather_nd_dtypes(dtype: type) -> None:
    indices = np.array([[[1], [-2]], [[0], [2]]], np.int64)
    check_op("GatherND", {"data": random_data((2, 3, 2), dtype), "indices": indices}, {"batch_dims": 1})


# ----- ScatterND ----------------------------------------------------------------------------------
# (data shape, index rows, row length K, reduction)
SCATTER_ND_CASES = [((6,), 3, 1, "none"), ((4, 5), 3, 1, "none"), ((4, 5), 6, 2, "none"), ((2, 3, 4), 2, 2, "none")]
SCATTER_ND_CASES += [((4, 5), 7, 1, r) for r in ("add", "mul", "max", "min")]
SCATTER_ND_CASES += [((3, 4), 9, 2, r) for r in ("add", "mul", "max", "min")]


@pytest.mark.parametrize(("data", "count", "k", "reduction"), SCATTER_ND_CASES)
def test_scatter_nd(data: tuple[int, ...], count: int, k: int, reduction: str) -> None:
    if reduction == "none":
        indices = _unique_rows(count, data[:k])
    else:  # duplicates on purpose: every one must be combined
        indices = np.stack([RNG.integers(-d, d, size=count) for d in data[:k]], axis=-1).astype(np.int64)
    inputs = {
        "data": random_data(data, np.float32),
        "indices": indices,
        "updates": random_data((count, *data[k:]), np.float32, seed=1),
    }
    check_op("ScatterND", inputs, {"reduction": reduction}, opset=18)


@pytest.mark.parametrize("reduction", ["none", "add", "mul", "max", "min"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_scatter_nd_dtypes(dtype: type, reduction: str) -> None:
    indices = np.array([[1], [-1]] if reduction == "none" else [[1], [-3], [0], [1]], np.int64)
    inputs = {
        "data": random_data((3, 4), dtype, low=-3, high=3),
        "indices": indices,
        "updates": random_data((len(indices), 4), dtype, seed=2, low=-3, high=3),
    }
    # onnxruntime has no float16 kernel for the scatter reductions
    reference = "onnx" if dtype == np.float16 and reduction != "none" else "ort"
    check_op("ScatterND", inputs, {"reduction": reduction}, opset=18, reference=reference)


# ----- ScatterElements ----------------------------------------------------------------------------
# (data shape, indices shape, axis, reduction)
SCATTER_EL_CASES = [((5,), (3,), 0, "none"), ((4, 5), (3, 5), 0, "none"), ((4, 5), (2, 3), -1, "none")]
SCATTER_EL_CASES += [((2, 3, 4), (2, 3, 2), 2, "none"), ((2, 6, 3), (1, 4, 3), 1, "none")]
SCATTER_EL_CASES += [((4, 5), (6, 5), 0, r) for r in ("add", "mul", "max", "min")]
SCATTER_EL_CASES += [((2, 3, 4), (2, 5, 3), -2, r) for r in ("add", "mul", "max", "min")]


@pytest.mark.parametrize(("data", "indices", "axis", "reduction"), SCATTER_EL_CASES)
def test_scatter_elements(data: tuple[int, ...], indices: tuple[int, ...], axis: int, reduction: str) -> None:
    size = data[axis]
    index = _unique_along(indices, axis, size) if reduction == "none" else _indices(indices, size)
    inputs = {"data": random_data(data, np.float32), "indices": index, "updates": random_data(indices, np.float32, 1)}
    check_op("ScatterElements", inputs, {"axis": axis, "reduction": reduction}, opset=18)


@pytest.mark.parametrize("reduction", ["none", "add", "max"])
@pytest.mark.parametrize("dtype", DTYPES, ids=lambda d: np.dtype(d).name)
def test_scatter_elements_dtypes(dtype: type, reduction: str) -> None:
    index = np.array([[2, -1], [0, 1], [-3, 1]] if reduction != "none" else [[2, -1], [0, 1]], np.int32)
    inputs = {
        "data": random_data((3, 3), dtype, low=-3, high=3),
        "indices": index,
        "updates": random_data(index.shape, dtype, seed=3, low=-3, high=3),
    }
    reference = "onnx" if dtype == np.float16 and reduction != "none" else "ort"
    check_op("ScatterElements", inputs, {"axis": 0, "reduction": reduction}, opset=18, reference=reference)


def test_scatter_opset_10_is_scatter_elements() -> None:
    inputs = {"data": random_data((3, 4), np.float32), "indices": _unique_along((2, 4), 0, 3)}
    inputs["updates"] = random_data((2, 4), np.float32, 4)
    check_op("Scatter", inputs, {"axis": 0}, opset=10)


# ----- symbolic dims ------------------------------------------------------------------------------
def _gather_elements_feeds(n: int) -> dict[str, np.ndarray]:
    return {"data": random_data((n, 4), np.float32, n), "indices": _indices((n, 3), 4)}


def _gather_nd_feeds(n: int) -> dict[str, np.ndarray]:
    return {"data": random_data((n, 3, 4), np.float32, n), "indices": _indices((n, 2, 1), 3)}


def _scatter_nd_feeds(n: int) -> dict[str, np.ndarray]:
    """The KV-cache write: rows of a [seq, 4] cache replaced at known positions."""
    return {
        "data": random_data((n, 4), np.float32, n),
        "indices": _unique_rows(2, (n,)),
        "updates": random_data((2, 4), np.float32),
    }


def _scatter_elements_feeds(n: int) -> dict[str, np.ndarray]:
    return {
        "data": random_data((n, 5), np.float32, n),
        "indices": _indices((n, 4), 5),
        "updates": random_data((n, 4), np.float32),
    }


# op, attrs, feeds at a size, symbolic dims per input
SYMBOLIC_CASES: list[tuple[str, dict[str, Any], Any, dict[str, list[Any]]]] = [
    ("GatherElements", {"axis": 1}, _gather_elements_feeds, {"data": ["n", 4], "indices": ["n", 3]}),
    ("GatherND", {"batch_dims": 1}, _gather_nd_feeds, {"data": ["n", 3, 4], "indices": ["n", 2, 1]}),
    ("ScatterND", {}, _scatter_nd_feeds, {"data": ["n", 4]}),
    ("ScatterElements", {"axis": 1, "reduction": "add"}, _scatter_elements_feeds, {"data": ["n", 5], "indices": ["n", 4], "updates": ["n", 4]}),
]  # fmt: skip


@pytest.mark.parametrize(("op", "attrs", "feeds", "dim_params"), SYMBOLIC_CASES, ids=[c[0] for c in SYMBOLIC_CASES])
def test_symbolic_leading_dim_rebinds_without_recompiling(op: str, attrs: dict, feeds: Any, dim_params: dict) -> None:
    model = make_model(op, feeds(3), attrs, opset=18, dim_params=dim_params)
    executor = runtime().load_model(compile_model(model))
    pipelines = None
    for n in (3, 6):
        inputs = feeds(n)
        got = executor.run(inputs)
        assert_close(got["y0"], reference_outputs(model, inputs, "ort")[0])
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines
