"""Sequence and Optional ops whose contents the graph fixes run as plain tensor ops (`onyxia.onnx.sequences`),
against onnxruntime: SequenceConstruct/Insert/Erase/At/Length/Empty, ConcatFromSequence (with and without a new
axis), SplitToSequence (constant sizes, a constant chunk, the default one-per-slice with keepdims 0), and
Optional/OptionalHasElement/OptionalGetElement, at opsets 13 and 18 (axes and split as inputs) and 11 (as
attributes). A position only known at run time is refused at load, naming the sequence and its type."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import assert_close, compile_model, reference_outputs, runtime

from onyxia.onnx import ModelValidationError

RNG = np.random.default_rng(11)
F = TensorProto.FLOAT


def _model(nodes: list[onnx.NodeProto], inputs: dict[str, list[int]], outputs: list[str], opset: int,
           constants: dict[str, np.ndarray] | None = None) -> onnx.ModelProto:  # fmt: skip
    graph = helper.make_graph(
        nodes,
        "sequences",
        [helper.make_tensor_value_info(n, F, d) for n, d in inputs.items()],
        [helper.make_empty_tensor_value_info(o) for o in outputs],
        [numpy_helper.from_array(v, n) for n, v in (constants or {}).items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)], ir_version=8)


def _check(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> None:
    expected = reference_outputs(model, feeds, "ort")
    results = runtime().load_model(compile_model(model)).run(feeds)
    for output, want in zip(model.graph.output, expected):
        assert_close(results[output.name], want, output.name)


def _feeds(inputs: dict[str, list[int]]) -> dict[str, np.ndarray]:
    return {n: RNG.standard_normal(d).astype(np.float32) for n, d in inputs.items()}


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_list_edits_concat_at_and_length(opset: int) -> None:
    positions = {"one": np.array(1, np.int64), "minus_two": np.array(-2, np.int64), "minus_one": np.array(-1, np.int64)}
    nodes = [
        helper.make_node("SequenceConstruct", ["a", "b", "c"], ["abc"]),
        helper.make_node("SequenceInsert", ["abc", "d", "one"], ["adbc"]),
        helper.make_node("SequenceInsert", ["adbc", "a"], ["adbca"]),  # no position: at the end
        helper.make_node("SequenceErase", ["adbca", "minus_two"], ["adba"]),
        helper.make_node("SequenceErase", ["adba"], ["adb"]),  # no position: the last
        helper.make_node("ConcatFromSequence", ["adb"], ["cat"], axis=1),
        helper.make_node("ConcatFromSequence", ["adb"], ["stacked"], axis=-1, new_axis=1),
        helper.make_node("SequenceAt", ["adbca", "minus_one"], ["last"]),
        helper.make_node("SequenceLength", ["adbca"], ["length"]),
        helper.make_node("SequenceInsert", ["abc", "d", "minus_one"], ["abdc"]),  # before the last
        helper.make_node("ConcatFromSequence", ["abdc"], ["cat_abdc"], axis=0),
        helper.make_node("SequenceEmpty", [], ["none"]),
        helper.make_node("SequenceInsert", ["none", "b"], ["just_b"]),
        helper.make_node("SequenceAt", ["just_b", "minus_one"], ["b_again"]),
    ]
    inputs = {"a": [2, 3], "b": [2, 3], "c": [2, 3], "d": [2, 3]}
    outputs = ["cat", "stacked", "last", "length", "cat_abdc", "b_again"]
    _check(_model(nodes, inputs, outputs, opset, positions), _feeds(inputs))


@pytest.mark.parametrize("opset", [11, 13, 18])
def test_split_to_sequence(opset: int) -> None:
    constants = {"sizes": np.array([1, 4], np.int64), "chunk": np.array(2, np.int64)}
    constants.update(zero=np.array(0, np.int64), minus_one=np.array(-1, np.int64))
    nodes = [
        helper.make_node("SplitToSequence", ["x", "sizes"], ["by_sizes"], axis=1),
        helper.make_node("SequenceAt", ["by_sizes", "zero"], ["first"]),
        helper.make_node("ConcatFromSequence", ["by_sizes"], ["rejoined"], axis=1),
        helper.make_node("SplitToSequence", ["x", "chunk"], ["by_chunk"], axis=1),  # 2, 2, 1: ragged
        helper.make_node("SequenceLength", ["by_chunk"], ["chunks"]),
        helper.make_node("SequenceAt", ["by_chunk", "minus_one"], ["ragged_last"]),
        helper.make_node("SplitToSequence", ["x"], ["rows"], axis=0, keepdims=0),
        helper.make_node("ConcatFromSequence", ["rows"], ["transposed"], axis=1, new_axis=1),
    ]
    inputs = {"x": [3, 5]}
    outputs = ["first", "rejoined", "chunks", "ragged_last", "transposed"]
    _check(_model(nodes, inputs, outputs, opset, constants), _feeds(inputs))


def test_optionals() -> None:
    nodes = [
        helper.make_node("Optional", ["x"], ["maybe"]),
        helper.make_node("OptionalHasElement", ["maybe"], ["has"]),
        helper.make_node("OptionalGetElement", ["maybe"], ["got"]),
        helper.make_node("Add", ["got", "x"], ["y"]),
        helper.make_node("Optional", [], ["nothing"], type=helper.make_tensor_type_proto(F, [2])),
        helper.make_node("OptionalHasElement", ["nothing"], ["has_not"]),
        helper.make_node("SequenceConstruct", ["x", "x"], ["seq"]),
        helper.make_node("Optional", ["seq"], ["maybe_seq"]),
        helper.make_node("OptionalGetElement", ["maybe_seq"], ["seq_again"]),
        helper.make_node("ConcatFromSequence", ["seq_again"], ["doubled"], axis=0),
    ]
    inputs = {"x": [2, 2]}
    _check(_model(nodes, inputs, ["has", "y", "has_not", "doubled"], 18), _feeds(inputs))


def test_run_time_position_is_refused_naming_the_sequence(tmp_path) -> None:
    nodes = [
        helper.make_node("SequenceConstruct", ["a", "b"], ["pair"], name="build"),
        helper.make_node("SequenceAt", ["pair", "pos"], ["y"], name="pick"),
    ]
    model = _model(nodes, {"a": [2], "b": [2]}, ["y"], 13)
    model.graph.input.append(helper.make_tensor_value_info("pos", TensorProto.INT64, []))
    expected = "value 'pair' of node 'build' (SequenceConstruct) has type sequence(tensor(float)); Onyxia runs"
    with pytest.raises(ModelValidationError, match=expected.replace("(", r"\(").replace(")", r"\)")):
        compile_model(model)
