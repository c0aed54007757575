"""SimplifyElementwise (`elementwise/involutions.py`): Not, BitwiseNot and Neg applied twice are removed; the
graph before and after, the declined cases (graph unchanged, False), and model outputs against onnxruntime."""

from __future__ import annotations

import logging
import textwrap

import numpy as np
import pytest
from onnx import TensorProto, helper
from oracle import check_model, compile_model

from onyxia.compiler import ShapeInferencePass
from onyxia.core import DataType, GraphBuilder
from onyxia.operators import core_operator_registry
from onyxia.operators.passes import SimplifyElementwise

REGISTRY = core_operator_registry()


def _twice(op: str, dtype: DataType, *, also: str | None = None) -> GraphBuilder:
    """x -> op -> op -> Identity (which keeps the pair's output off the graph outputs)."""
    b = GraphBuilder("twice")
    inner = b.op(op, b.input("x", dtype, [2, 3]))
    out = b.op("Identity", b.op(op, inner))
    b.output(out)
    if also == "second-consumer":
        b.output(b.op("Identity", inner))
    ShapeInferencePass().run(b.graph, REGISTRY)
    return b


def test_removes_a_double_negation() -> None:
    b = _twice("Neg", DataType.FLOAT)
    assert SimplifyElementwise().run(b.graph, REGISTRY)
    assert str(b.graph) == textwrap.dedent("""\
        graph twice(
          %0:f32[2,3]  # x
        ) {
          %5:f32[2,3] = Identity(%0)  # Identity
          return %5
        }""")
    b.graph.check()
    assert not SimplifyElementwise().run(b.graph, REGISTRY)  # settled


@pytest.mark.parametrize(("op", "dtype"), [("Not", DataType.BOOL), ("BitwiseNot", DataType.UINT8)])
def test_every_involution_has_its_rule(op: str, dtype: DataType) -> None:
    b = _twice(op, dtype)
    assert SimplifyElementwise().run(b.graph, REGISTRY)
    assert [n.op_type for n in b.graph] == ["Identity"]


def test_declines_when_the_inner_result_is_read_elsewhere() -> None:
    b = _twice("Not", DataType.BOOL, also="second-consumer")
    before = str(b.graph)
    assert not SimplifyElementwise().run(b.graph, REGISTRY)
    assert str(b.graph) == before


def test_declines_when_the_pair_ends_in_a_graph_output(caplog: pytest.LogCaptureFixture) -> None:
    b = GraphBuilder("out")
    b.output(b.op("Neg", b.op("Neg", b.input("x", DataType.FLOAT, [4]))))
    ShapeInferencePass().run(b.graph, REGISTRY)
    before = str(b.graph)
    with caplog.at_level(logging.DEBUG, logger="onyxia.core.rewrite"):
        assert not SimplifyElementwise().run(b.graph, REGISTRY)
    assert str(b.graph) == before
    assert "its output is a graph output" in caplog.text


@pytest.mark.parametrize(
    ("op", "values"),
    [
        ("Neg", np.array([-(2**31), -5, 0, 7, 2**31 - 1], np.int64)),  # -(-2^31) leaves int64's i32 storage
        ("Neg", np.array([-128, -1, 0, 127], np.int8)),
        ("BitwiseNot", np.array([0, 5, 255], np.uint8)),
        ("Not", np.array([True, False, True])),
    ],
    ids=lambda v: v if isinstance(v, str) else v.dtype.name,
)
def test_outputs_match_onnxruntime(op: str, values: np.ndarray) -> None:
    elem = helper.np_dtype_to_tensor_dtype(values.dtype)
    nodes = [
        helper.make_node(op, ["x"], ["t"]),
        helper.make_node(op, ["t"], ["u"]),
        helper.make_node("Equal", ["u", "x"], ["same"]),
    ]
    graph = helper.make_graph(
        nodes,
        "twice",
        [helper.make_tensor_value_info("x", elem, [len(values)])],
        [helper.make_tensor_value_info("same", TensorProto.BOOL, [len(values)])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 9
    check_model(model, {"x": values})
    assert [p.op_type for p in compile_model(model).operations] == ["Equal"]
