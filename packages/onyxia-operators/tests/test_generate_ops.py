"""ConstantOfShape, Range and Trilu against onnxruntime, folded and on the GPU."""

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from oracle import check_model, check_op

RNG = np.random.default_rng(5)


@pytest.mark.parametrize("value", [None, np.array([2.5], np.float32), np.array([7], np.int64), np.array([1], np.bool_)])
def test_constant_of_shape_folds(value: np.ndarray | None) -> None:
    attrs = {} if value is None else {"value": onnx.numpy_helper.from_array(value)}
    check_op("ConstantOfShape", {"shape": np.array([2, 3], np.int64)}, attrs, initializers=["shape"])


def _symbolic_model(node: onnx.NodeProto, out_type: int) -> onnx.ModelProto:
    """x[n] -> Shape -> node -> y: the generator's size is symbolic, so it runs on the GPU."""
    nodes = [helper.make_node("Shape", ["x"], ["n"]), node]
    graph = helper.make_graph(
        nodes,
        "g",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n"])],
        [helper.make_tensor_value_info("y", out_type, None)],
        [
            onnx.numpy_helper.from_array(np.array(2, np.int64), "start"),
            onnx.numpy_helper.from_array(np.array(3, np.int64), "delta"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


@pytest.mark.parametrize(
    ("fill", "out_type"),
    [
        (np.float32(-1.5), TensorProto.FLOAT),
        (np.float32(-np.inf), TensorProto.FLOAT),
        (np.float16(np.inf), TensorProto.FLOAT16),
    ],
)
def test_constant_of_shape_symbolic_runs_on_gpu(fill: np.generic, out_type: int) -> None:
    # WGSL has no inf literal: the fill value is written as a bit pattern
    value = onnx.numpy_helper.from_array(np.array([fill]))
    model = _symbolic_model(helper.make_node("ConstantOfShape", ["n"], ["y"], value=value), out_type)
    check_model(model, {"x": np.zeros(5, np.float32)})


@pytest.mark.parametrize(("start", "limit", "delta"), [(0, 10, 1), (10, 1, -3), (1.5, 4.0, 0.5), (5, 5, 1)])
def test_range_folds(start: float, limit: float, delta: float) -> None:
    dtype = np.float32 if isinstance(start, float) else np.int64
    inputs = {k: np.array(v, dtype) for k, v in (("s", start), ("l", limit), ("d", delta))}
    check_op("Range", inputs, initializers=["s", "l", "d"])


def test_range_symbolic_limit_runs_on_gpu() -> None:
    model = _symbolic_model(helper.make_node("Range", ["start", "n_scalar", "delta"], ["y"]), TensorProto.INT64)
    model.graph.node.insert(1, helper.make_node("Squeeze", ["n"], ["n_scalar"]))
    for size in (11, 4):
        check_model(model, {"x": np.zeros(size, np.float32)})


@pytest.mark.parametrize("upper", [0, 1])
@pytest.mark.parametrize("k", [None, -1, 2])
@pytest.mark.parametrize("shape", [(4, 5), (2, 3, 3), (0, 3)])
def test_trilu(upper: int, k: int | None, shape: tuple) -> None:
    inputs = {"x": RNG.standard_normal(shape).astype(np.float32)}
    if k is not None:
        inputs["k"] = np.array(k, np.int64)
    check_op("Trilu", inputs, {"upper": upper}, initializers=["k"] if k is not None else [])
