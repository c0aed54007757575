"""Constant and Shape (always folded) and the Shape -> Gather -> Concat -> Reshape chain, end to
end on lavapipe vs onnxruntime, with static and symbolic input dims."""

from __future__ import annotations

from typing import Any

import numpy as np
import onnx
import pytest
from movement_data import random_data
from onnx import TensorProto, helper, numpy_helper
from oracle import check_model, check_op

from onyxia.operators.shape import KNOWN


@pytest.mark.parametrize(
    "attrs",
    [
        {"value": numpy_helper.from_array(np.arange(6, dtype=np.float32).reshape(2, 3))},
        {"value": numpy_helper.from_array(np.array([True, False]))},
        {"value": numpy_helper.from_array(np.array(-3, np.int64))},
        {"value": numpy_helper.from_array(np.zeros((0, 2), np.float16))},
        {"value_float": 2.5},
        {"value_floats": [1.0, -2.0]},
        {"value_int": 4},
        {"value_ints": [1, 2, 3]},
    ],
    ids=lambda a: next(iter(a)),
)
def test_constant_matches_onnxruntime(attrs: dict[str, Any]) -> None:
    check_op("Constant", {}, attrs)


@pytest.mark.parametrize(
    ("shape", "dims", "attrs"),
    [
        ((2, 3, 4), None, {}),
        ((), None, {}),
        ((0, 3), None, {}),
        ((2, 1, 3, 1, 2, 2), None, {"start": 1, "end": -1}),
        ((2, 3, 4), ["batch", "seq", 4], {}),
        ((2, 3, 4), ["batch", "seq", 4], {"start": -2}),
        ((2, 3, 4), ["batch", "seq", 4], {"start": 2, "end": 1}),
    ],
)
def test_shape_matches_onnxruntime(shape: tuple[int, ...], dims: list | None, attrs: dict[str, Any]) -> None:
    dim_params = {"x": dims} if dims else None
    check_op("Shape", {"x": random_data(shape, np.float32)}, attrs, dim_params=dim_params)


@pytest.mark.parametrize(
    ("shape", "dims"), [((), None), ((0, 3), None), ((2, 3, 4), None), ((2, 3, 4), ["batch", "seq", 4])]
)
def test_size_matches_onnxruntime(shape: tuple[int, ...], dims: list | None) -> None:
    """Size folds from the dims (a symbolic count with symbolic dims), like Shape."""
    check_op("Size", {"x": random_data(shape, np.float32)}, dim_params={"x": dims} if dims else None)


def test_every_known_row_is_tested() -> None:
    assert set(KNOWN) == {"Constant", "Shape", "Size"}


def _chain_model(dims: list[int | str]) -> onnx.ModelProto:
    """y = Reshape(x, Concat(Unsqueeze(Shape(x)[0] * Shape(x)[1]), [-1])), i.e. [b, s, 8] -> [b*s, 8]."""
    ints = {
        name: numpy_helper.from_array(np.array(v, np.int64), name)
        for name, v in (("i0", 0), ("i1", 1), ("axes", [0]), ("rest", [-1]))
    }
    nodes = [
        helper.make_node("Shape", ["x"], ["shape"]),
        helper.make_node("Gather", ["shape", "i0"], ["d0"], axis=0),
        helper.make_node("Gather", ["shape", "i1"], ["d1"], axis=0),
        helper.make_node("Mul", ["d0", "d1"], ["rows"]),
        helper.make_node("Unsqueeze", ["rows", "axes"], ["rows1"]),
        helper.make_node("Concat", ["rows1", "rest"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "shape_chain",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, dims)],
        [helper.make_empty_tensor_value_info("y")],
        list(ints.values()),
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("dims", [[2, 3, 8], ["batch", "seq", 8]], ids=["static", "symbolic"])
def test_shape_chain_matches_onnxruntime(dims: list[int | str]) -> None:
    for shape in ((2, 3, 8), (1, 5, 8)) if isinstance(dims[0], str) else ((2, 3, 8),):
        check_model(_chain_model(dims), {"x": random_data(shape, np.float32)})
