"""Bad files raise `OnnxError` naming the file and the tensor, node or reference at fault."""

from __future__ import annotations

import re

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_test_models import make_model, save, set_external, tensor_input

from onyxia.core import ModelLoadError
from onyxia.onnx import OnnxError, load_and_parse_model

X = tensor_input("x", TensorProto.FLOAT, [4])
Y = tensor_input("y", TensorProto.FLOAT, [4])


def _weight(name: str = "w", n: int = 4) -> TensorProto:
    return numpy_helper.from_array(np.arange(n, dtype=np.float32), name)


def _add_model(*initializers: TensorProto, nodes=None) -> onnx.ModelProto:
    nodes = nodes or [helper.make_node("Add", ["x", "w"], ["y"], name="add")]
    return make_model(nodes, [X], [Y], list(initializers))


def _raises(path, *fragments: str) -> OnnxError:
    """Load `path` expecting an OnnxError whose message contains the path and every fragment."""
    with pytest.raises(OnnxError, match=re.escape(str(path))) as info:
        load_and_parse_model(path)
    for fragment in fragments:
        assert fragment in str(info.value), (fragment, str(info.value))
    assert isinstance(info.value, ModelLoadError)
    return info.value


# ----- the file itself ------------------------------------------------------------------------
def test_missing_path(tmp_path):
    _raises(tmp_path / "nope.onnx", "no such file")


def test_directory_path(tmp_path):
    _raises(tmp_path, "is not a file")


def test_not_a_protobuf(tmp_path):
    path = tmp_path / "junk.onnx"
    path.write_text("this is not an onnx model\n")
    error = _raises(path, "not a valid ONNX protobuf")
    assert error.__cause__ is not None  # the protobuf error is chained, never raised raw


def test_empty_file(tmp_path):
    path = tmp_path / "empty.onnx"
    path.write_bytes(b"")
    _raises(path, "not an ONNX model (no graph or ir_version found)")


def test_truncated_file(tmp_path):
    path = save(_add_model(_weight(n=4)), tmp_path)
    data = path.read_bytes()
    path.write_bytes(data[: len(data) // 2])
    _raises(path, "truncated")


# ----- tensor data ----------------------------------------------------------------------------
def test_raw_data_shorter_than_shape(tmp_path):
    short = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4], raw_data=b"\0" * 12)
    _raises(save(_add_model(short), tmp_path), "initializer 'w'", "raw_data holds 12 bytes", "needs 16 bytes")


def test_typed_field_shorter_than_shape(tmp_path):
    short = helper.make_tensor("w", TensorProto.FLOAT, [3], [1.0, 2.0, 3.0])
    short.dims[0] = 4
    _raises(save(_add_model(short), tmp_path), "initializer 'w'", "float_data holds 3 values", "needs 4")


def test_unknown_dtype_code_on_initializer(tmp_path):
    bad = TensorProto(name="w", data_type=99, dims=[4], raw_data=b"\0" * 16)
    _raises(save(_add_model(bad), tmp_path), "initializer 'w'", "unknown dtype code 99")


def test_unknown_dtype_code_on_input(tmp_path):
    model = _add_model(_weight())
    model.graph.input[0].type.tensor_type.elem_type = 77
    _raises(save(model, tmp_path), "graph input 'x'", "unknown dtype code 77")


def _external_model(tmp_path):
    path = save(_add_model(_weight(n=4)), tmp_path, save_as_external_data=True, location="w.bin", size_threshold=0)
    return path, tmp_path / "w.bin"


def test_missing_external_data_file(tmp_path):
    path, data = _external_model(tmp_path)
    data.unlink()
    _raises(path, "initializer 'w'", "external data file not found", f"expected {data}")


def test_external_data_file_too_short(tmp_path):
    path, data = _external_model(tmp_path)
    data.write_bytes(data.read_bytes()[:10])
    _raises(path, "initializer 'w'", "is too short: it has 10 bytes", "needs bytes 0..16")


def test_external_length_key_too_small(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\0" * 64)
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    set_external(tensor, location="w.bin", offset="0", length="8")
    _raises(save(_add_model(tensor), tmp_path), "initializer 'w'", "length is 8 bytes", "needs 16 bytes")


def test_external_location_outside_model_folder(tmp_path):
    (tmp_path / "w.bin").write_bytes(b"\0" * 16)
    tensor = TensorProto(name="w", data_type=TensorProto.FLOAT, dims=[4])
    set_external(tensor, location="../w.bin")
    (tmp_path / "sub").mkdir()
    _raises(save(_add_model(tensor), tmp_path / "sub"), "initializer 'w'", "points outside the model folder")


def test_external_data_deleted_after_load(tmp_path):
    path, data = _external_model(tmp_path)
    value = load_and_parse_model(path).tensor_by_name("w").initializer
    data.unlink()
    with pytest.raises(OnnxError, match=r"initializer 'w': cannot read external data from .*w\.bin"):
        value.numpy()


def test_sparse_initializer(tmp_path):
    model = _add_model(_weight())
    model.graph.sparse_initializer.append(
        helper.make_sparse_tensor(
            helper.make_tensor("s", TensorProto.FLOAT, [1], [1.0]),
            helper.make_tensor("i", TensorProto.INT64, [1], [0]),
            [4],
        )
    )
    _raises(save(model, tmp_path), "sparse initializer 's' is not supported")


# ----- graph structure ------------------------------------------------------------------------
def test_subgraph_reading_its_own_nodes_output_is_a_cycle(tmp_path):
    """A branch returns 'y', which only the If itself defines: an outer read of the node's own output."""
    branch = helper.make_graph([helper.make_node("Identity", ["x"], ["b"])], "branch", [], [Y])
    cond = numpy_helper.from_array(np.array(True), "cond")
    node = helper.make_node("If", ["cond"], ["y"], name="the_if", then_branch=branch, else_branch=branch)
    model = make_model([node], [X], [Y], [cond])
    _raises(save(model, tmp_path), "the nodes form a cycle", "the_if")


def test_duplicate_initializers(tmp_path):
    _raises(save(_add_model(_weight(), _weight()), tmp_path), "tensor 'w' is defined twice: as an initializer")


def test_node_output_redefines_input(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["x"], name="relu"), helper.make_node("Add", ["x", "w"], ["y"])]
    _raises(
        save(_add_model(_weight(), nodes=nodes), tmp_path),
        "tensor 'x' is defined twice: as a graph input and as an output of node 'relu' (Relu)",
    )


def test_node_output_redefines_initializer(tmp_path):
    nodes = [helper.make_node("Relu", ["x"], ["w"], name="relu"), helper.make_node("Add", ["x", "w"], ["y"])]
    _raises(
        save(_add_model(_weight(), nodes=nodes), tmp_path),
        "'w' is defined twice: as an initializer and as an output of node 'relu'",
    )


def test_two_nodes_write_one_tensor(tmp_path):
    nodes = [
        helper.make_node("Relu", ["x"], ["y"], name="first"),
        helper.make_node("Neg", ["x"], ["y"], name="second"),
    ]
    _raises(
        save(make_model(nodes, [X], [Y]), tmp_path),
        "tensor 'y' is defined twice: as an output of node 'first' (Relu) and as an output of node 'second' (Neg)",
    )


def test_unknown_node_input(tmp_path):
    nodes = [helper.make_node("Add", ["x", "ghost"], ["y"], name="add")]
    _raises(save(make_model(nodes, [X], [Y]), tmp_path), "node 'add' (Add)", "input 1 'ghost' is not a graph input")


def test_graph_output_without_producer(tmp_path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [X], [Y, tensor_input("z", TensorProto.FLOAT, [4])])
    _raises(save(model, tmp_path), "graph output 'z' is not produced")


def test_cycle(tmp_path):
    nodes = [
        helper.make_node("Add", ["x", "b"], ["a"], name="n1"),
        helper.make_node("Relu", ["a"], ["b"], name="n2"),
        helper.make_node("Relu", ["a"], ["y"], name="n3"),
    ]
    _raises(save(make_model(nodes, [X], [Y]), tmp_path), "form a cycle", "n1")


def test_domain_not_imported(tmp_path):
    nodes = [helper.make_node("Gelu", ["x"], ["y"], name="gelu", domain="com.microsoft")]
    _raises(save(make_model(nodes, [X], [Y]), tmp_path), "node 'gelu' (Gelu)", "domain 'com.microsoft' is not in")


def test_input_without_shape(tmp_path):
    model = make_model([helper.make_node("Relu", ["x"], ["y"])], [tensor_input("x", TensorProto.FLOAT, None)], [Y])
    _raises(save(model, tmp_path), "graph input 'x'", "has no shape (unknown rank)")


def test_non_tensor_input(tmp_path):
    seq = helper.make_tensor_sequence_value_info("x", TensorProto.FLOAT, [4])
    model = make_model([helper.make_node("SequenceLength", ["x"], ["y"])], [seq], [Y])
    _raises(save(model, tmp_path), "graph input 'x'", "has type sequence(tensor(float)); Onyxia runs tensors only")


def test_local_function_call(tmp_path):
    body = [helper.make_node("Relu", ["a"], ["b"])]
    function = helper.make_function("local", "MyRelu", ["a"], ["b"], body, [helper.make_opsetid("", 21)])
    model = make_model(
        [helper.make_node("MyRelu", ["x"], ["y"], name="call", domain="local")], [X], [Y], opsets={"": 21, "local": 1}
    )
    model.functions.append(function)
    _raises(save(model, tmp_path), "node 'call' (MyRelu)", "model-local function")
