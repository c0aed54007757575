"""Sequence, Optional and map values that `onyxia.onnx.sequences` cannot turn into tensors at load (a position
read at run time, an optional passed through another op, a sequence graph output) are refused at load with an
error naming each such value, the node that makes it and its full type; onnxruntime runs these models (its run
shows they are valid). The ones it resolves run: `onyxia-operators/tests/test_sequences.py`."""

from __future__ import annotations

import numpy as np
import pytest
from onnx import TensorProto, helper
from onnx_test_models import make_model, run_ort, save, tensor_input

from onyxia.onnx import ModelValidationError, OnnxError, load_and_parse_model
from onyxia.onnx.value_info import type_text

X = tensor_input("x", TensorProto.FLOAT, [2, 3])
Z = tensor_input("z", TensorProto.FLOAT, [2, 3])


def _sequence_model():
    """A position read at run time: the sequence's element cannot be chosen at load."""
    nodes = [
        helper.make_node("SequenceConstruct", ["x", "x"], ["seq"], name="build"),
        helper.make_node("SequenceInsert", ["seq", "x"], ["longer"], name="insert"),
        helper.make_node("SequenceAt", ["longer", "pos"], ["y"], name="at"),
    ]
    pos = tensor_input("pos", TensorProto.INT64, [])
    return make_model(nodes, [X, pos], [tensor_input("y", TensorProto.FLOAT, [2, 3])])


def _optional_model():
    """An optional passed through an op that is not an Optional op (Identity takes optionals from opset 16)."""
    nodes = [
        helper.make_node("Optional", ["x"], ["maybe"], name="wrap"),
        helper.make_node("Identity", ["maybe"], ["same"], name="copy"),
        helper.make_node("OptionalGetElement", ["same"], ["got"], name="unwrap"),
        helper.make_node("Add", ["got", "x"], ["z"], name="add"),
    ]
    return make_model(nodes, [X], [Z], opsets={"": 18})


@pytest.mark.parametrize(
    ("make", "expected"),
    [
        (
            _sequence_model,
            [
                "value 'seq' of node 'build' (SequenceConstruct) has type sequence(tensor(float)); "
                "Onyxia runs tensors only",
                "value 'longer' of node 'insert' (SequenceInsert) has type sequence(tensor(float)); "
                "Onyxia runs tensors only",
            ],
        ),
        (
            _optional_model,
            [
                "value 'maybe' of node 'wrap' (Optional) has type optional(tensor(float)); Onyxia runs tensors only",
                "value 'same' of node 'copy' (Identity) has type optional(tensor(float)); Onyxia runs tensors only",
            ],
        ),
    ],
)
def test_non_tensor_values_are_refused_at_load_by_name_and_type(tmp_path, make, expected):
    model = make()
    feeds = {"x": np.ones((2, 3), np.float32), "pos": np.array(1, np.int64)}
    run_ort(model, {i.name: feeds[i.name] for i in model.graph.input})  # a valid model: onnxruntime runs it
    path = save(model, tmp_path)
    with pytest.raises(ModelValidationError) as info:
        load_and_parse_model(path)
    assert info.value.problems == expected
    assert str(path) in str(info.value)


def test_sequence_graph_output_names_its_type(tmp_path):
    nodes = [helper.make_node("SplitToSequence", ["x"], ["parts"], name="split", axis=0)]
    seq = helper.make_tensor_sequence_value_info("parts", TensorProto.FLOAT, None)
    with pytest.raises(OnnxError, match=r"graph output 'parts': has type sequence\(tensor\(float\)\); Onyxia runs"):
        load_and_parse_model(save(make_model(nodes, [X], [seq]), tmp_path))


def test_type_text_spells_nested_types():
    seq = helper.make_sequence_type_proto(helper.make_tensor_type_proto(TensorProto.INT64, [2]))
    assert type_text(helper.make_optional_type_proto(seq)) == "optional(sequence(tensor(int64)))"
    assert type_text(helper.make_map_type_proto(TensorProto.STRING, seq)) == "map(string, sequence(tensor(int64)))"
    assert type_text(helper.make_tensor_type_proto(TensorProto.INT4, [3])) == "tensor(int4)"
