"""Graph structure after loading: kinds, names, opsets, metadata, dims, node order."""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper, numpy_helper
from onnx_test_models import make_model, save, tensor_input

from onyxia.core import Absent, DataType, Static, Symbolic, SymbolicExpr, TensorKind, TensorValue
from onyxia.onnx import load_and_parse_model


def _mlp_model() -> object:
    w = numpy_helper.from_array(np.arange(12, dtype=np.float32).reshape(4, 3), "w")
    nodes = [
        helper.make_node("MatMul", ["x", "w"], ["h"], name="mm"),
        helper.make_node("Relu", ["h"], ["y"], name="relu"),
    ]
    inputs = [tensor_input("x", TensorProto.FLOAT, ["batch", 4]), tensor_input("w", TensorProto.FLOAT, [4, 3])]
    return make_model(nodes, inputs, [tensor_input("y", TensorProto.FLOAT, ["batch", 3])], [w])


def test_kinds_and_exact_names(tmp_path):
    graph = load_and_parse_model(save(_mlp_model(), tmp_path))
    x, w, h, y = (graph.tensor_by_name(n) for n in ("x", "w", "h", "y"))
    assert [graph.tensor(t).name for t in graph.inputs] == ["x"]  # w is an initializer, not an input
    assert (x.kind, w.kind, h.kind, y.kind) == (
        TensorKind.INPUT,
        TensorKind.INITIALIZER,
        TensorKind.INTERMEDIATE,
        TensorKind.OUTPUT,
    )
    assert graph.outputs == [y.id]
    assert isinstance(w.initializer, TensorValue) and w.shape == Static((4, 3)) and w.dtype is DataType.FLOAT
    np.testing.assert_array_equal(w.initializer.numpy(), np.arange(12, dtype=np.float32).reshape(4, 3))
    assert x.shape == Symbolic((SymbolicExpr.name("batch"), 4))
    assert (h.dtype, h.shape) == (DataType.UNDEFINED, Absent())
    assert (y.dtype, str(y.shape)) == (DataType.FLOAT, "[batch,3]")  # declared output type kept until inference
    assert [n.name for n in graph.nodes] == ["mm", "relu"]
    assert graph.tensor_producer(h).name == "mm"
    graph.check()


def test_opsets_metadata_and_domains(tmp_path):
    nodes = [
        helper.make_node("Relu", ["x"], ["a"], domain="ai.onnx"),
        helper.make_node("Gelu", ["a"], ["y"], domain="com.microsoft"),
    ]
    model = make_model(
        nodes,
        [tensor_input("x", TensorProto.FLOAT, [2])],
        [tensor_input("y", TensorProto.FLOAT, [2])],
        opsets={"": 17, "com.microsoft": 1},
    )
    model.producer_name, model.producer_version, model.doc_string = "unit-test", "9.9", "a doc"
    helper.set_model_props(model, {"license": "MIT", "producer_name": "not the producer"})
    path = save(model, tmp_path)
    graph = load_and_parse_model(path)
    assert graph.opset_imports == {"": 17, "com.microsoft": 1}
    relu, gelu = graph.nodes
    assert (relu.domain, relu.opset, gelu.domain, gelu.opset) == ("", 17, "com.microsoft", 1)
    assert graph.metadata["producer_name"] == "unit-test"
    assert graph.metadata["producer_version"] == "9.9"
    assert graph.metadata["doc_string"] == "a doc"
    assert graph.metadata["ir_version"] == "10"
    assert graph.metadata["license"] == "MIT"
    assert graph.metadata["path"] == str(path)
    assert all(isinstance(v, str) for v in graph.metadata.values())


def test_symbolic_dims(tmp_path):
    inputs = [
        tensor_input("a", TensorProto.FLOAT, ["past_sequence_length + 1", "batch:0", None, "2*n"]),
    ]
    model = make_model(
        [helper.make_node("Identity", ["a"], ["y"])], inputs, [tensor_input("y", TensorProto.FLOAT, None)]
    )
    graph = load_and_parse_model(save(model, tmp_path))
    d0, d1, d2, d3 = graph.tensor_by_name("a").shape.dims
    assert isinstance(d0, SymbolicExpr) and d0.names() == {"past_sequence_length"}
    assert d0.evaluate({"past_sequence_length": 7}) == 8
    assert d1 == SymbolicExpr.name("batch:0")  # unparsable exporter name kept verbatim
    assert d2 == SymbolicExpr.name("unk__a_2")
    assert d3.evaluate({"n": 5}) == 10
    assert graph.tensor_by_name("y").shape == Absent()  # output declared without a shape


def test_constant_nodes_empty_names_and_generated_node_names(tmp_path):
    value = helper.make_tensor("c", TensorProto.FLOAT, [2], [1.5, 2.5])
    nodes = [
        helper.make_node("Constant", [], ["c"], value=value),  # unnamed, and named like nothing else
        helper.make_node("Clip", ["x", "", "c"], ["y"]),
        helper.make_node("Dropout", ["y"], ["z", ""], name="c"),  # node named like a tensor
    ]
    model = make_model(nodes, [tensor_input("x", TensorProto.FLOAT, [2])], [tensor_input("z", TensorProto.FLOAT, [2])])
    graph = load_and_parse_model(save(model, tmp_path))
    const, clip, dropout = graph.nodes
    assert (const.op_type, const.name, clip.name, dropout.name) == ("Constant", "Constant_0", "Clip_1", "c")
    assert graph.tensor_by_name("c").value is None  # folding, not the loader, gives Constants their value
    attr = const.attributes["value"]
    assert isinstance(attr, TensorValue) and attr.dtype is DataType.FLOAT
    np.testing.assert_array_equal(attr.numpy(), [1.5, 2.5])
    assert clip.inputs[1] is None and len(clip.inputs) == 3
    assert dropout.outputs[1] is None and len(dropout.outputs) == 2


def test_unsorted_nodes_are_sorted_stably(tmp_path):
    nodes = [
        helper.make_node("Neg", ["b"], ["y"], name="third"),
        helper.make_node("Relu", ["x"], ["a"], name="first"),
        helper.make_node("Abs", ["a"], ["b"], name="second"),
        helper.make_node("Sigmoid", ["x"], ["s"], name="independent"),
    ]
    outputs = [tensor_input("y", TensorProto.FLOAT, [2]), tensor_input("s", TensorProto.FLOAT, [2])]
    graph = load_and_parse_model(
        save(make_model(nodes, [tensor_input("x", TensorProto.FLOAT, [2])], outputs), tmp_path)
    )
    assert [n.name for n in graph.nodes] == ["first", "second", "third", "independent"]
    assert [n.name for n in graph.topological_order()] == [n.name for n in graph.nodes]


def test_input_that_is_also_initializer_is_a_weight(tmp_path):
    bias = numpy_helper.from_array(np.ones(2, np.float32), "bias")
    inputs = [tensor_input("x", TensorProto.FLOAT, [2]), tensor_input("bias", TensorProto.FLOAT, [2])]
    model = make_model(
        [helper.make_node("Add", ["x", "bias"], ["y"])], inputs, [tensor_input("y", TensorProto.FLOAT, [2])], [bias]
    )
    graph = load_and_parse_model(save(model, tmp_path))
    assert [graph.tensor(t).name for t in graph.inputs] == ["x"]
    assert graph.tensor_by_name("bias").kind is TensorKind.INITIALIZER


def test_graph_output_straight_from_input(tmp_path):
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"])],
        [tensor_input("x", TensorProto.FLOAT, [2])],
        [tensor_input("y", TensorProto.FLOAT, [2]), tensor_input("x", TensorProto.FLOAT, [2])],
    )
    graph = load_and_parse_model(save(model, tmp_path))
    x = graph.tensor_by_name("x")
    assert graph.outputs[1] == x.id and x.kind is TensorKind.INPUT
