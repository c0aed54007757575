"""MatMulNBits refuses, at compile time, what it does not implement, naming node, op and attribute."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from oracle import onyxia_outputs

from onyxia.core import ShapeInferenceError, UnsupportedOpError


def _model(attrs: dict, *, g_idx: bool = False, k: int = 64, a_k: int = 64) -> onnx.ModelProto:
    n, block_size = 8, attrs.get("block_size", 32)
    blocks = -(-k // block_size)
    initializers = [
        numpy_helper.from_array(np.zeros((n, blocks, block_size // 2), np.uint8), "B"),
        numpy_helper.from_array(np.ones(n * blocks, np.float32), "scales"),
    ]
    inputs = ["A", "B", "scales"]
    if g_idx:
        initializers.append(numpy_helper.from_array(np.arange(k, dtype=np.int32) // block_size, "g_idx"))
        inputs += ["", "g_idx"]
    node = helper.make_node("MatMulNBits", inputs, ["y"], name="layers.0/q_proj", domain="com.microsoft", **attrs)
    graph = helper.make_graph(
        [node],
        "g",
        [helper.make_tensor_value_info("A", helper.TensorProto.FLOAT, [1, a_k])],
        [helper.make_empty_tensor_value_info("y")],
        initializers,
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def _compile(model: onnx.ModelProto) -> None:
    onyxia_outputs(model, {"A": np.zeros((1, 64), np.float32)})


def test_eight_bits_is_unsupported() -> None:
    model = _model({"K": 64, "N": 8, "bits": 8, "block_size": 32})
    with pytest.raises(UnsupportedOpError, match=r"node 'layers.0/q_proj' \(MatMulNBits.*attribute 'bits' = 8"):
        _compile(model)


def test_g_idx_is_unsupported() -> None:
    model = _model({"K": 64, "N": 8, "bits": 4, "block_size": 32}, g_idx=True)
    with pytest.raises(UnsupportedOpError, match=r"node 'layers.0/q_proj' \(MatMulNBits.*input 4 \(g_idx"):
        _compile(model)


def test_mismatched_k_and_block_size() -> None:
    with pytest.raises(ShapeInferenceError, match=r"'layers.0/q_proj'.*last dim 80; expected attribute K = 64"):
        _compile(_model({"K": 64, "N": 8, "bits": 4, "block_size": 32}, a_k=80))
    with pytest.raises(ShapeInferenceError, match=r"attribute 'block_size' = 24; expected a power of two >= 16"):
        _compile(_model({"K": 64, "N": 8, "bits": 4, "block_size": 24}))
