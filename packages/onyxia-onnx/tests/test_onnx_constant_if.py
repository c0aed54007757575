"""An `If` whose branches are Constants loads as `Where(cond, then, else)` (Phi-3's LongRoPE cache switch);
branches of different row counts are padded only where every reader indexes rows by position; any other
`If` is still refused by name."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

from onyxia.core.ir import IrGraph
from onyxia.onnx import load_and_parse_model


def _branch(name: str, value: np.ndarray) -> onnx.GraphProto:
    node = helper.make_node("Constant", [], [f"{name}_out"], value=numpy_helper.from_array(value))
    out = helper.make_tensor_value_info(f"{name}_out", TensorProto.FLOAT, list(value.shape))
    return helper.make_graph([node], name, [], [out])


def _model(tmp_path: Path, then: np.ndarray, other: np.ndarray, reader: str = "Identity") -> Path:
    cond = helper.make_tensor_value_info("cond", TensorProto.BOOL, [])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, None)
    nodes = [
        helper.make_node(
            "If", ["cond"], ["picked"], name="switch", then_branch=_branch("a", then), else_branch=_branch("b", other)
        ),
        helper.make_node(reader, ["picked"], ["y"]),
    ]
    model = helper.make_model(helper.make_graph(nodes, "g", [cond], [y]), opset_imports=[helper.make_opsetid("", 21)])
    model.ir_version = 10
    path = tmp_path / "if.onnx"
    onnx.save(model, str(path))
    return path


def test_constant_branches_become_a_where(tmp_path: Path) -> None:
    a, b = np.ones((4, 3), np.float32), np.zeros((4, 3), np.float32)
    graph = load_and_parse_model(_model(tmp_path, a, b))
    (where,) = graph.nodes_of("Where")
    assert where.name == "switch/select_0"
    np.testing.assert_array_equal(graph.tensor(where.inputs[1]).initializer.numpy(), a)
    np.testing.assert_array_equal(graph.tensor(where.inputs[2]).initializer.numpy(), b)
    assert not graph.nodes_of("If")


def test_branches_of_different_shapes_read_generally_stay_an_if(tmp_path: Path) -> None:
    """Not a position-indexed cache: the `If` stays, its branches become subgraphs (a run-time switch)."""
    graph = load_and_parse_model(_model(tmp_path, np.ones((8, 3), np.float32), np.ones((4, 3), np.float32)))
    (node,) = graph.nodes_of("If")
    assert node.name == "switch"
    assert {name for name, value in node.attributes.items() if isinstance(value, IrGraph)} == {
        "then_branch",
        "else_branch",
    }
