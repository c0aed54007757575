"""One compile names every node whose feature is not implemented, not only the first: independent
nodes are all reported (from shape inference and from planning), nodes downstream of a failed one are
not (their errors would repeat it), and a single failure keeps its own message."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import helper
from oracle import compile_model

from onyxia.core import UnsupportedOpError

K, N, BLOCK = 32, 8, 32


def _nbits(name: str, x: str, y: str, bits: int) -> tuple[onnx.NodeProto, list[onnx.TensorProto]]:
    """A MatMulNBits node with `bits` (only 4 is implemented) and its initializers."""
    weights = [
        onnx.numpy_helper.from_array(np.zeros((N, 1, BLOCK * bits // 8), np.uint8), f"{name}_b"),
        onnx.numpy_helper.from_array(np.ones(N, np.float32), f"{name}_scales"),
    ]
    node = helper.make_node(
        "MatMulNBits",
        [x, f"{name}_b", f"{name}_scales"],
        [y],
        name=name,
        domain="com.microsoft",
        K=K,
        N=N,
        bits=bits,
        block_size=BLOCK,
    )
    return node, weights


def _model(bits: tuple[int, int]) -> onnx.ModelProto:
    first, w1 = _nbits("first_nbits", "x", "h1", bits[0])
    second, w2 = _nbits("second_nbits", "x", "h2", bits[1])
    nodes = [
        first,
        second,
        helper.make_node("Relu", ["h1"], ["y1"], name="after_first"),  # downstream of a failure: not reported
        helper.make_node("Sigmoid", ["x"], ["y3"], name="fine"),
        # a dtype refused only when planning: uint64 sums have no checked scatter kernel
        helper.make_node("ScatterElements", ["u", "i", "u"], ["y4"], name="add_uint64", reduction="add"),
    ]
    graph = helper.make_graph(
        nodes,
        "unsupported_features",
        [
            helper.make_tensor_value_info("x", onnx.TensorProto.FLOAT, [2, K]),
            helper.make_tensor_value_info("u", onnx.TensorProto.UINT64, [2]),
            helper.make_tensor_value_info("i", onnx.TensorProto.INT64, [2]),
        ],
        [helper.make_empty_tensor_value_info(n) for n in ("y1", "h2", "y3", "y4")],
        w1 + w2,
    )
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def test_every_unsupported_feature_is_reported_at_once() -> None:
    with pytest.raises(UnsupportedOpError) as caught:
        compile_model(_model((2, 3)))
    message = str(caught.value)
    assert message.startswith("3 nodes use features that are not implemented")
    for expected in ("first_nbits", "'bits' = 2", "second_nbits", "'bits' = 3", "add_uint64", "uint64"):
        assert expected in message
    assert "after_first" not in message and "'fine'" not in message


def test_a_single_unsupported_feature_keeps_its_message() -> None:
    model = _model((4, 2))
    del model.graph.node[4]  # the uint64 ScatterElements
    del model.graph.output[3]
    with pytest.raises(UnsupportedOpError, match=r"^node 'second_nbits' \(MatMulNBits.*'bits' = 2"):
        compile_model(model)
