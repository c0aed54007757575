"""DeadCodeEliminationPass: a dead chain goes in one sweep; graph outputs, consumers and in-place
writers keep their nodes; model outputs unchanged against onnxruntime."""

from __future__ import annotations

import textwrap

import numpy as np
from oracle import check_model

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, IrGraph
from onyxia.onnx import to_onnx
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import DeadCodeEliminationPass

REGISTRY = core_operator_registry()


def _inferred(b: GraphBuilder) -> IrGraph:
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b.graph


def _with_dead_chain() -> GraphBuilder:
    """y = Sigmoid(Relu(x)); Neg(Exp(Relu(x))) and Abs(x) are computed and never read."""
    b = GraphBuilder("dead")
    x = b.input("x", DataType.FLOAT, ["seq", 4])
    a = b.op("Relu", x)
    b.op("Neg", b.op("Exp", a))
    b.op("Abs", x)
    b.output(b.op("Sigmoid", a))
    return b


def test_removes_a_dead_chain_in_one_sweep() -> None:
    graph = _inferred(_with_dead_chain())
    assert str(graph) == textwrap.dedent("""\
        graph dead(
          %0:f32[seq,4]  # x
        ) {
          %1:f32[seq,4] = Relu(%0)  # Relu
          %3:f32[seq,4] = Exp(%1)  # Exp
          %5:f32[seq,4] = Neg(%3)  # Neg
          %7:f32[seq,4] = Abs(%0)  # Abs
          %9:f32[seq,4] = Sigmoid(%1)  # Sigmoid
          return %9
        }""")
    assert DeadCodeEliminationPass().run(graph, REGISTRY)
    assert str(graph) == textwrap.dedent("""\
        graph dead(
          %0:f32[seq,4]  # x
        ) {
          %1:f32[seq,4] = Relu(%0)  # Relu
          %9:f32[seq,4] = Sigmoid(%1)  # Sigmoid
          return %9
        }""")
    graph.check()
    assert graph.tensor_by_name("Exp_out0") is None  # the dead outputs went with their nodes
    assert not DeadCodeEliminationPass().run(graph, REGISTRY)  # settled


def test_keeps_used_outputs_graph_outputs_and_in_place_writers() -> None:
    b = GraphBuilder("live")
    x = b.input("x", DataType.FLOAT, ["seq", 4])
    state = b.input("state", DataType.FLOAT, ["seq", 4])
    a = b.op("Relu", x)
    written = b.op("Add", state, a)  # read by nobody, but it writes into `state`'s storage
    b.output(a, b.op("Neg", a))
    graph = _inferred(b)
    graph.aliases[written.id] = state.id
    before = str(graph)
    assert not DeadCodeEliminationPass().run(graph, REGISTRY)
    assert str(graph) == before


def test_outputs_unchanged() -> None:
    x = np.random.default_rng(0).standard_normal((3, 4)).astype(np.float32)
    model = to_onnx(_inferred(_with_dead_chain()))
    assert len(model.graph.node) == 5
    check_model(model, {"x": x}, dims={"seq": 3})
