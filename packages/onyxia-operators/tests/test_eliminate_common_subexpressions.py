"""CommonSubexpressionEliminationPass: a duplicated chain collapses in one sweep; random ops, other
attributes, big tensor attributes and graph outputs decline (graph unchanged, False); the cleanup
group settles DCE and CSE together; model outputs unchanged against onnxruntime."""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from oracle import check_model

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder, IrGraph, TensorValue
from onyxia.onnx import to_onnx
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import CommonSubexpressionEliminationPass, cleanup_passes

REGISTRY = core_operator_registry()


def _inferred(b: GraphBuilder) -> IrGraph:
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b.graph


def _duplicated_chain() -> GraphBuilder:
    """Mul(Add(Relu(x), x), Add(Relu(x), x)), each side computed on its own (as per-layer exports do)."""
    b = GraphBuilder("twice")
    x = b.input("x", DataType.FLOAT, ["seq", 4])
    left = b.op("Add", b.op("Relu", x), x)
    right = b.op("Add", b.op("Relu", x), x)
    b.output(b.op("Mul", left, right))
    return b


def test_a_duplicated_chain_collapses_in_one_sweep() -> None:
    graph = _inferred(_duplicated_chain())
    assert str(graph) == textwrap.dedent("""\
        graph twice(
          %0:f32[seq,4]  # x
        ) {
          %1:f32[seq,4] = Relu(%0)  # Relu
          %3:f32[seq,4] = Add(%1, %0)  # Add
          %5:f32[seq,4] = Relu(%0)  # Relu_1
          %7:f32[seq,4] = Add(%5, %0)  # Add_1
          %9:f32[seq,4] = Mul(%3, %7)  # Mul
          return %9
        }""")
    assert CommonSubexpressionEliminationPass().run(graph, REGISTRY)
    assert str(graph) == textwrap.dedent("""\
        graph twice(
          %0:f32[seq,4]  # x
        ) {
          %1:f32[seq,4] = Relu(%0)  # Relu
          %3:f32[seq,4] = Add(%1, %0)  # Add
          %9:f32[seq,4] = Mul(%3, %3)  # Mul
          return %9
        }""")
    graph.check()
    assert not CommonSubexpressionEliminationPass().run(graph, REGISTRY)  # settled


def _pair(op: str, attrs_a: dict, attrs_b: dict, *, outputs: bool = False) -> GraphBuilder:
    b = GraphBuilder("pair")
    x = b.input("x", DataType.FLOAT, [3, 4])
    a, c = b.op(op, x, **attrs_a), b.op(op, x, **attrs_b)
    b.output(*((a, c) if outputs else (b.op("Add", a, c),)))
    return b


def _big(n: int) -> TensorValue:
    return TensorValue.from_numpy(np.zeros(n, np.float32))


@pytest.mark.parametrize(
    ("op", "attrs_a", "attrs_b", "outputs"),
    [
        ("RandomNormalLike", {"seed": 1.0}, {"seed": 1.0}, False),
        ("Softmax", {"axis": 0}, {"axis": 1}, False),
        ("LeakyRelu", {"alpha": 0.0}, {"alpha": -0.0}, False),
        ("Constant", {"value": _big(2048)}, {"value": _big(2048)}, False),
        ("Relu", {}, {}, True),
    ],
    ids=["random", "other-attribute", "signed-zero", "big-tensor-attribute", "graph-output"],
)
def test_declines(op: str, attrs_a: dict, attrs_b: dict, outputs: bool) -> None:
    b = _pair(op, attrs_a, attrs_b, outputs=outputs)
    before = str(b.graph)
    assert not CommonSubexpressionEliminationPass().run(b.graph, REGISTRY)
    assert str(b.graph) == before


def test_small_tensor_attributes_merge() -> None:
    b = GraphBuilder("consts")
    x = b.input("x", DataType.FLOAT, [4])
    b.output(b.op("Add", b.op("Add", x, b.constant(np.ones(4, np.float32))), b.constant(np.ones(4, np.float32))))
    assert CommonSubexpressionEliminationPass().run(b.graph, REGISTRY)
    assert [n.op_type for n in b.graph] == ["Constant", "Add", "Add"]


def test_cleanup_group_settles_dce_and_cse_together() -> None:
    b = _duplicated_chain()
    b.op("Exp", b.graph.inputs[0])  # dead
    graph = _inferred(b)
    cleanup = cleanup_passes()
    assert cleanup.name == "Cleanup"
    assert cleanup.run(graph, REGISTRY)
    assert [n.op_type for n in graph] == ["Relu", "Add", "Mul"]
    before = str(graph)
    assert not cleanup.run(graph, REGISTRY)
    assert str(graph) == before


def test_outputs_unchanged() -> None:
    x = np.random.default_rng(1).standard_normal((3, 4)).astype(np.float32)
    model = to_onnx(_inferred(_duplicated_chain()))
    check_model(model, {"x": x}, dims={"seq": 3})
