"""Reduce* with an `axes` input that is not 1-D: onnxruntime refuses it ("An axes tensor must be a
vector tensor"), for every Reduce op taking axes as input; Onyxia refuses it at compile time, naming
the node and the input, whether axes is an initializer or a graph input (whose declared rank tells)."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import check_op, compile_model

from onyxia.core import ShapeInferenceError

REDUCE_OPS = [
    "ReduceSum", "ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd",
    "ReduceL1", "ReduceL2", "ReduceLogSum", "ReduceLogSumExp", "ReduceSumSquare",
]  # fmt: skip
ORT_PHRASE = "An axes tensor must be a vector tensor"
X = np.random.default_rng(5).standard_normal((2, 3, 4)).astype(np.float32)


def _model(op: str, axes: np.ndarray, *, initializer: bool) -> onnx.ModelProto:
    node = helper.make_node(op, ["x", "axes"], ["y"], name="reduce_rows")
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, list(X.shape))]
    inits = [numpy_helper.from_array(axes, "axes")] if initializer else []
    if not initializer:
        inputs.append(helper.make_tensor_value_info("axes", TensorProto.INT64, list(axes.shape)))
    graph = helper.make_graph(
        [node], "reduce", inputs, [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def _ort_refuses(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> str:
    import onnxruntime as ort

    session = ort.InferenceSession(model.SerializeToString(), providers=["CPUExecutionProvider"])
    with pytest.raises(Exception, match=ORT_PHRASE) as caught:
        session.run(None, feeds)
    return str(caught.value)


@pytest.mark.parametrize("op", REDUCE_OPS)
@pytest.mark.parametrize("axes", [np.array([[1]], np.int64), np.array(1, np.int64)], ids=["2-D", "scalar"])
def test_non_vector_axes_initializer_is_refused_as_onnxruntime_does(op: str, axes: np.ndarray) -> None:
    model = _model(op, axes, initializer=True)
    _ort_refuses(model, {"x": X})
    found = re.escape(f"input 1 (axes) has shape {list(axes.shape)}; expected 1-D (onnxruntime: '{ORT_PHRASE}')")
    with pytest.raises(ShapeInferenceError, match=rf"node 'reduce_rows' \({op}, domain ai.onnx\): {found}"):
        compile_model(model)


def test_non_vector_axes_graph_input_is_refused_by_its_declared_rank() -> None:
    axes = np.array([[1]], np.int64)
    model = _model("ReduceSum", axes, initializer=False)
    _ort_refuses(model, {"x": X, "axes": axes})
    with pytest.raises(
        ShapeInferenceError, match=rf"node 'reduce_rows' \(ReduceSum.*input 1 \(axes\) has rank 2; .*'{ORT_PHRASE}'"
    ):
        compile_model(model)


def test_vector_axes_still_reduce() -> None:
    check_op("ReduceSum", {"x": X, "axes": np.array([1], np.int64)}, initializers=["axes"], opset=18)
