import numpy as np
import pytest

from onyxia.core import DataType, GraphBuilder, GraphError, IrGraph, TensorKind
from onyxia.core.shapes import Static


def _chain() -> tuple[GraphBuilder, list]:
    b = GraphBuilder()
    x = b.input("x", DataType.FLOAT, [2, 3])
    y = b.op("Neg", x)
    z = b.op("Cos", y)
    b.output(z)
    return b, [x, y, z]


def test_producers_and_consumers_track_edits() -> None:
    b, (x, y, z) = _chain()
    g = b.graph
    neg, cos = g.nodes
    assert g.tensor_producer(y) is neg
    assert g.tensor_consumers(x) == [(neg, 0)]
    assert g.replace_all_uses(y, x) == 1
    assert g.tensor_consumers(y) == []
    assert g.tensor_consumers(x) == [(neg, 0), (cos, 0)]
    g.remove_node(neg)
    g.check()
    assert [n.op_type for n in g.nodes] == ["Cos"]


def test_ids_stay_valid_after_removal() -> None:
    b, (x, y, z) = _chain()
    g = b.graph
    cos_id = g.nodes[1].id
    g.replace_all_uses(y, x)
    g.remove_node(g.nodes[0])
    assert g.node(cos_id).op_type == "Cos"
    new = g.add_tensor("w", DataType.FLOAT, Static((2, 3)))
    assert new.id not in (x.id, y.id, z.id)


def test_remove_node_refuses_while_used() -> None:
    b, (x, y, z) = _chain()
    with pytest.raises(GraphError, match="still used"):
        b.graph.remove_node(b.graph.nodes[0])
    b.graph.check()  # nothing changed


def test_graph_outputs_need_opt_in() -> None:
    b, (x, y, z) = _chain()
    with pytest.raises(GraphError, match="output of graph"):
        b.graph.replace_all_uses(z, y)
    b.graph.replace_all_uses(z, y, outputs=True)
    assert b.graph.outputs == [y.id]


def test_unique_names_and_topological_order() -> None:
    g = IrGraph()
    a = g.add_tensor("t", DataType.FLOAT, Static((1,)), TensorKind.INPUT)
    b = g.add_tensor("t", DataType.FLOAT, Static((1,)))
    c = g.add_tensor("t", DataType.FLOAT, Static((1,)))
    assert {a.name, b.name, c.name} == {"t", "t_1", "t_2"}
    second = g.add_node("Neg", [b], [c])
    first = g.add_node("Neg", [a], [b], before=second)
    assert [n.id for n in g.topological_order()] == [first.id, second.id]


def test_insert_before_and_replace_node() -> None:
    b, (x, y, z) = _chain()
    g = b.graph
    neg, cos = g.nodes
    mid = g.add_tensor("mid", DataType.FLOAT, Static((2, 3)))
    sqrt = g.add_node("Sqrt", [x], [mid], before=neg)
    fused = g.replace_node(neg, "Abs", [mid])
    g.check()
    assert [n.op_type for n in g.topological_order()] == ["Sqrt", "Abs", "Cos"]
    assert fused.name == "Neg" and fused.outputs == [y.id]
    assert g.tensor_producer(y) is fused and g.tensor_producer(mid) is sqrt
    assert g.tensor_consumers(y) == [(cos, 0)]


def test_copy_shares_weights_but_not_structure() -> None:
    b = GraphBuilder()
    x = b.input("x", DataType.FLOAT, [4])
    w = b.initializer("w", np.arange(4, dtype=np.float32))
    b.output(b.op("Add", x, w))
    clone = b.graph.copy()
    clone.remove_node(clone.nodes[0], safe=False)
    assert len(b.graph) == 1
    assert clone.tensor(w.id).initializer is b.graph.tensor(w.id).initializer


def test_printed_form() -> None:
    b, _ = _chain()
    text = str(b.graph)
    assert "%0:f32[2,3]  # x" in text
    assert "= Neg(%0)  # Neg" in text
