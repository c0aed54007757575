"""Every attribute type: protobuf -> Python on load, and back on export (schema decides ambiguous types)."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import AttributeProto, TensorProto, helper, numpy_helper
from onnx_test_models import make_model, run_ort, save, tensor_input

from onyxia.core import DataType, TensorValue
from onyxia.onnx import OnnxError, load_and_parse_model, to_onnx
from onyxia.onnx.attributes import make_attribute, schema_attribute_types


def _all_attrs_node() -> onnx.NodeProto:
    node = helper.make_node(
        "AllAttrs",
        ["x"],
        ["y"],
        name="all",
        domain="test.domain",
        i=3,
        f=0.5,
        s="text ü",
        ints=[1, -2, 3],
        floats=[0.25, -1.5],
        strings=["a", "b"],
        t=numpy_helper.from_array(np.array([[1, 2]], dtype=np.int64), "t"),
        tensors=[numpy_helper.from_array(np.ones(2, np.float16)), numpy_helper.from_array(np.zeros(1, np.int32))],
    )
    node.attribute.append(helper.make_attribute("blob", b"\xff\xfe"))
    node.attribute.append(helper.make_attribute("empty", [], attr_type=AttributeProto.INTS))
    return node


def _all_attrs_model() -> onnx.ModelProto:
    return make_model(
        [_all_attrs_node()],
        [tensor_input("x", TensorProto.FLOAT, [2])],
        [tensor_input("y", TensorProto.FLOAT, [2])],
        opsets={"": 21, "test.domain": 1},
    )


def test_every_attribute_type_reads_as_python(tmp_path):
    attrs = load_and_parse_model(save(_all_attrs_model(), tmp_path)).nodes[0].attributes
    assert attrs["i"] == 3 and type(attrs["i"]) is int
    assert attrs["f"] == 0.5 and type(attrs["f"]) is float
    assert attrs["s"] == "text ü"
    assert attrs["ints"] == [1, -2, 3] and attrs["floats"] == [0.25, -1.5] and attrs["strings"] == ["a", "b"]
    assert attrs["blob"] == b"\xff\xfe"  # not UTF-8: kept as bytes
    assert attrs["empty"] == []
    assert isinstance(attrs["t"], TensorValue) and attrs["t"].dtype is DataType.INT64
    np.testing.assert_array_equal(attrs["t"].numpy(), [[1, 2]])
    first, second = attrs["tensors"]
    assert (first.dtype, second.dtype) == (DataType.FLOAT16, DataType.INT32)
    np.testing.assert_array_equal(first.numpy(), np.ones(2, np.float16))


def test_every_attribute_type_round_trips(tmp_path):
    original = _all_attrs_node()
    exported = to_onnx(load_and_parse_model(save(_all_attrs_model(), tmp_path))).graph.node[0]
    assert exported.name == "all" and exported.domain == "test.domain"
    by_name = {a.name: a for a in exported.attribute}
    for attr in original.attribute:
        assert by_name[attr.name] == attr, attr.name


@pytest.mark.parametrize(
    ("attribute", "message"),
    [
        (helper.make_attribute("bodies", [helper.make_graph([], "g", [], [])]), "GRAPHS; lists of subgraphs"),
        (
            helper.make_attribute(
                "sparse_value",
                helper.make_sparse_tensor(
                    helper.make_tensor("v", TensorProto.FLOAT, [1], [1.0]),
                    helper.make_tensor("i", TensorProto.INT64, [1], [0]),
                    [3],
                ),
            ),
            "SPARSE_TENSOR; sparse tensors are not supported",
        ),
        (helper.make_attribute("tp", helper.make_tensor_type_proto(1, [2])), "TYPE_PROTO; type-proto"),
    ],
)
def test_unsupported_attribute_types(tmp_path, attribute, message):
    node = helper.make_node("Weird", ["x"], ["y"], name="weird_node", domain="test.domain")
    node.attribute.append(attribute)
    model = make_model(
        [node],
        [tensor_input("x", TensorProto.FLOAT, [2])],
        [tensor_input("y", TensorProto.FLOAT, [2])],
        opsets={"": 21, "test.domain": 1},
    )
    path = save(model, tmp_path)
    with pytest.raises(
        OnnxError, match=rf"model\.onnx: node 'weird_node' \(Weird\): attribute '{attribute.name}' is {message}"
    ):
        load_and_parse_model(path)


def test_export_uses_the_schema_type(tmp_path):
    assert schema_attribute_types("LeakyRelu", "", 21)["alpha"] == AttributeProto.FLOAT
    assert schema_attribute_types("GroupQueryAttention", "com.microsoft", 1) == {}
    assert make_attribute("floats", [], AttributeProto.FLOATS, "n").type == AttributeProto.FLOATS
    assert make_attribute("ints", [], None, "n").type == AttributeProto.INTS
    model = make_model(
        [helper.make_node("LeakyRelu", ["x"], ["y"], alpha=0.1)],
        [tensor_input("x", TensorProto.FLOAT, [3])],
        [tensor_input("y", TensorProto.FLOAT, [3])],
    )
    graph = load_and_parse_model(save(model, tmp_path))
    graph.nodes[0].attributes["alpha"] = 2  # a pass writing an int where the spec wants a float
    exported = to_onnx(graph)
    onnx.checker.check_model(exported, full_check=True)
    assert exported.graph.node[0].attribute[0].type == AttributeProto.FLOAT
    x = np.array([-1.0, 0.0, 3.0], np.float32)
    np.testing.assert_array_equal(run_ort(exported, {"x": x})[0], [-2.0, 0.0, 3.0])


def test_unwritable_attribute_names_the_node(tmp_path):
    model = make_model(
        [helper.make_node("Relu", ["x"], ["y"], name="relu")],
        [tensor_input("x", TensorProto.FLOAT, [3])],
        [tensor_input("y", TensorProto.FLOAT, [3])],
    )
    graph = load_and_parse_model(save(model, tmp_path))
    graph.nodes[0].attributes["bogus"] = {"a": 1}
    with pytest.raises(OnnxError, match=r"node 'relu' \(Relu\): attribute 'bogus': cannot write a dict"):
        to_onnx(graph)
