"""CancelTransposes: the graph before and after, the declined cases (graph unchanged, False), and model
outputs unchanged against onnxruntime."""

from __future__ import annotations

import logging
import textwrap

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import check_model, compile_model

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import CancelTransposes

RNG = np.random.default_rng(7)
REGISTRY = core_operator_registry()


def _round_trip(outer_perm: list[int], *, chain: bool = True) -> GraphBuilder:
    """Transpose(x, [0, 2, 1]) -> Relu -> Mul(2) -> Transpose(outer_perm)."""
    b = GraphBuilder("nchw")
    t = b.op("Transpose", b.input("x", DataType.FLOAT, [2, 3, 4]), perm=[0, 2, 1])
    if chain:
        t = b.op("Mul", b.op("Relu", t), b.constant(np.float32(2)))
    b.output(b.op("Relu", b.op("Transpose", t, perm=outer_perm)))
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b


def test_cancels_across_elementwise_ops() -> None:
    b = _round_trip([0, 2, 1])
    assert CancelTransposes().run(b.graph, REGISTRY)
    assert str(b.graph) == textwrap.dedent("""\
        graph nchw(
          %0:f32[2,3,4]  # x
        ) {
          %5:f32[] = Constant(value=tensor[])  # const
          %13:f32[2,3,4] = Relu(%0)  # Relu
          %9:f32[2,3,4] = Mul(%13, %5)  # Mul
          %11:f32[2,3,4] = Relu(%9)  # Relu_1
          return %11
        }""")
    b.graph.check()
    assert not CancelTransposes().run(b.graph, REGISTRY)  # settled


def test_cancels_an_adjacent_pair() -> None:
    b = _round_trip([0, 2, 1], chain=False)
    assert CancelTransposes().run(b.graph, REGISTRY)
    assert [(n.op_type, n.inputs) for n in b.graph] == [("Relu", [0])]


def test_merges_a_pair_that_does_not_cancel() -> None:
    b = _round_trip([1, 0, 2], chain=False)
    assert CancelTransposes().run(b.graph, REGISTRY)
    assert str(b.graph) == textwrap.dedent("""\
        graph nchw(
          %0:f32[2,3,4]  # x
        ) {
          %3:f32[4,2,3] = Transpose(%0, perm=[2, 0, 1])  # Transpose_1
          %5:f32[4,2,3] = Relu(%3)  # Relu
          return %5
        }""")


def test_declines_a_chain_whose_perms_do_not_cancel(caplog: pytest.LogCaptureFixture) -> None:
    b = _round_trip([1, 0, 2])
    before = str(b.graph)
    with caplog.at_level(logging.DEBUG, logger="onyxia.core.rewrite"):
        assert not CancelTransposes().run(b.graph, REGISTRY)
    assert str(b.graph) == before
    assert "compose to [2, 0, 1], not the identity" in caplog.text


@pytest.mark.parametrize("use", ["second-consumer", "graph-output"])
def test_declines_when_an_intermediate_is_used_elsewhere(use: str) -> None:
    b = GraphBuilder("shared")
    inner = b.op("Transpose", b.input("x", DataType.FLOAT, [2, 3]), perm=[1, 0])
    relu = b.op("Relu", inner)
    b.output(b.op("Transpose", relu, perm=[1, 0]))
    b.output(b.op("Exp", relu) if use == "second-consumer" else relu)
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    assert not CancelTransposes().run(b.graph, REGISTRY)
    assert str(b.graph) == before


def _model(perm: list[int]) -> onnx.ModelProto:
    nodes = [
        helper.make_node("Transpose", ["x"], ["t"], perm=perm),
        helper.make_node("Sigmoid", ["t"], ["s"]),
        helper.make_node("Add", ["s", "bias"], ["a"]),
        helper.make_node("Transpose", ["a"], ["u"], perm=list(np.argsort(perm))),
        helper.make_node("Mul", ["u", "x"], ["y"]),
    ]
    inputs = [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 3, 5, 7])]
    inits = [numpy_helper.from_array(np.array([[[[0.25]]]], np.float32), "bias")]
    graph = helper.make_graph(nodes, "nhwc", inputs, [helper.make_empty_tensor_value_info("y")], inits)
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("perm", [[0, 2, 3, 1], [3, 1, 0, 2]], ids=["nchw-nhwc", "scrambled"])
def test_outputs_unchanged(perm: list[int]) -> None:
    model = _model(perm)
    assert "Transpose" not in [op.op_type for op in compile_model(model, {"n": 2}).operations]
    check_model(model, {"x": RNG.standard_normal((2, 3, 5, 7)).astype(np.float32)}, dims={"n": 2})
