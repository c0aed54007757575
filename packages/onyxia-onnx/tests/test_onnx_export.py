"""`to_onnx`: checker-valid models that onnxruntime runs with the original's results."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from onnx_test_models import make_model, run_ort, save, tensor_input

from onyxia.core import DataType, GraphBuilder, Static, SymbolicExpr, shape_of
from onyxia.onnx import OnnxError, load_and_parse_model, to_onnx

RNG = np.random.default_rng(42)


def _decoder_like_model() -> onnx.ModelProto:
    """Symbolic dims, a Constant, an omitted optional input, multi-output Split, attributes, a 4-bit weight."""
    w = numpy_helper.from_array(RNG.standard_normal((8, 6)).astype(np.float32), "w")
    q = helper.make_tensor("q", TensorProto.INT4, [6], np.array([1, -2, 3, -4, 7, -8], np.int8), raw=True)
    nodes = [
        helper.make_node("Concat", ["past", "x"], ["cat"], name="concat", axis=1),
        helper.make_node("MatMul", ["cat", "w"], ["h"], name="matmul"),
        helper.make_node("Constant", [], ["scale"], value_float=0.5),
        helper.make_node("DequantizeLinear", ["q", "scale"], ["dq"], name="dq"),
        helper.make_node("Add", ["h", "dq"], ["h2"]),
        helper.make_node("Clip", ["h2", "", "cmax"], ["clipped"], name="clip"),
        helper.make_node("Split", ["clipped"], ["a", "b"], name="split", axis=2, num_outputs=2),
        helper.make_node("Gelu", ["a"], ["ga"], approximate="tanh"),
        helper.make_node("Mul", ["ga", "b"], ["y"]),
        helper.make_node("Shape", ["cat"], ["total"], start=1, end=2),
    ]
    inputs = [
        tensor_input("x", TensorProto.FLOAT, ["batch", "seq", 8]),
        tensor_input("past", TensorProto.FLOAT, ["batch", "past_sequence_length", 8]),
    ]
    outputs = [
        tensor_input("y", TensorProto.FLOAT, ["batch", "past_sequence_length + seq", 3]),
        tensor_input("total", TensorProto.INT64, [1]),
    ]
    cmax = numpy_helper.from_array(np.array(1.5, np.float32), "cmax")
    return make_model(nodes, inputs, outputs, [w, q, cmax])


def _feeds(batch: int, seq: int, past: int) -> dict[str, np.ndarray]:
    return {
        "x": RNG.standard_normal((batch, seq, 8)).astype(np.float32),
        "past": RNG.standard_normal((batch, past, 8)).astype(np.float32),
    }


def test_round_trip_matches_onnxruntime(tmp_path):
    path = save(_decoder_like_model(), tmp_path, save_as_external_data=True, location="m.data", size_threshold=0)
    exported = to_onnx(load_and_parse_model(path))
    onnx.checker.check_model(exported, full_check=True)
    for sizes in ((1, 5, 0), (2, 1, 7)):
        feeds = _feeds(*sizes)
        for want, got in zip(run_ort(path, feeds), run_ort(exported, feeds), strict=True):
            np.testing.assert_array_equal(got, want)


def test_round_trip_structure(tmp_path):
    exported = to_onnx(load_and_parse_model(save(_decoder_like_model(), tmp_path)))
    graph = exported.graph
    assert [n.op_type for n in graph.node][:3] == ["Concat", "MatMul", "Constant"]
    assert list(graph.node[5].input) == ["h2", "", "cmax"]
    assert [i.name for i in graph.input] == ["x", "past"]
    assert {t.name for t in graph.initializer} == {"w", "q", "cmax"}
    q = next(t for t in graph.initializer if t.name == "q")
    assert (q.data_type, list(q.dims), len(q.raw_data)) == (TensorProto.INT4, [6], 3)
    dims = [d.dim_param or d.dim_value for d in graph.output[0].type.tensor_type.shape.dim]
    assert dims == ["batch", "past_sequence_length + seq", 3]
    assert {(o.domain, o.version) for o in exported.opset_import} == {("", 21)}
    assert exported.ir_version == 10


def test_value_info_for_inferred_intermediates(tmp_path):
    graph = load_and_parse_model(save(_decoder_like_model(), tmp_path))
    cat = graph.tensor_by_name("cat")
    cat.dtype = DataType.FLOAT
    cat.shape = shape_of([SymbolicExpr.name("batch"), SymbolicExpr.parse("past_sequence_length + seq"), 8])
    exported = to_onnx(graph)
    (info,) = exported.graph.value_info  # every other intermediate is still UNDEFINED
    assert info.name == "cat" and info.type.tensor_type.elem_type == TensorProto.FLOAT
    assert [d.dim_param or d.dim_value for d in info.type.tensor_type.shape.dim] == [
        "batch",
        "past_sequence_length + seq",
        8,
    ]
    onnx.checker.check_model(exported, full_check=True)


def test_drop_folded_turns_values_into_initializers(tmp_path):
    path = save(_decoder_like_model(), tmp_path)
    graph = load_and_parse_model(path)
    scale, dq = graph.tensor_by_name("scale"), graph.tensor_by_name("dq")
    scale.dtype, scale.shape, scale.value = DataType.FLOAT, Static(()), np.array(0.5, np.float32)
    dq.dtype, dq.shape = DataType.FLOAT, Static((6,))
    dq.value = np.array([1, -2, 3, -4, 7, -8], np.float32) * 0.5
    graph.tensor_by_name("total").value = np.array([6], np.int64)  # folded, but a graph output: node stays

    kept = to_onnx(graph)
    assert [n.op_type for n in kept.graph.node].count("Constant") == 1
    dropped = to_onnx(graph, drop_folded=True)
    ops = [n.op_type for n in dropped.graph.node]
    assert "Constant" not in ops and "DequantizeLinear" not in ops and "Shape" in ops
    assert {t.name for t in dropped.graph.initializer} == {"w", "cmax", "dq"}  # q and scale are no longer used
    onnx.checker.check_model(dropped, full_check=True)
    feeds = _feeds(1, 3, 2)
    for want, got in zip(run_ort(path, feeds), run_ort(dropped, feeds), strict=True):
        np.testing.assert_array_equal(got, want)


def test_symbolic_values_are_never_initializers(tmp_path):
    graph = load_and_parse_model(save(_decoder_like_model(), tmp_path))
    graph.tensor_by_name("total").value = np.array([SymbolicExpr.name("seq")], dtype=object)
    assert "Shape" in [n.op_type for n in to_onnx(graph, drop_folded=True).graph.node]


def test_graph_built_in_memory():
    b = GraphBuilder("built")
    x = b.input("x", DataType.FLOAT, ["n", 2])
    y = b.op("Add", x, b.constant(np.array([1.0, 2.0], np.float32)))
    s = b.op("ReduceSum", y, b.initializer("axes", np.array([0], np.int64)), keepdims=0)
    b.output(s)
    s.dtype, s.shape = DataType.FLOAT, Static((2,))
    exported = to_onnx(b.graph)
    onnx.checker.check_model(exported, full_check=True)
    feed = np.arange(6, dtype=np.float32).reshape(3, 2)
    np.testing.assert_array_equal(run_ort(exported, {"x": feed})[0], [9.0, 15.0])


def test_metadata_round_trip(tmp_path):
    model = _decoder_like_model()
    model.doc_string, model.model_version, model.domain = "docs", 3, "ai.example"
    helper.set_model_props(model, {"license": "MIT", "genai": "yes"})
    exported = to_onnx(load_and_parse_model(save(model, tmp_path)))
    assert (exported.doc_string, exported.model_version, exported.domain) == ("docs", 3, "ai.example")
    assert {p.key: p.value for p in exported.metadata_props} == {"license": "MIT", "genai": "yes"}
    assert exported.producer_name == "onyxia"


def test_scalar_io_round_trip(tmp_path):
    model = make_model(
        [helper.make_node("Neg", ["x"], ["y"])],
        [tensor_input("x", TensorProto.FLOAT, [])],
        [tensor_input("y", TensorProto.FLOAT, [])],
    )
    exported = to_onnx(load_and_parse_model(save(model, tmp_path)))
    assert exported.graph.input[0].type.tensor_type.HasField("shape")
    assert run_ort(exported, {"x": np.array(2.0, np.float32)})[0] == -2.0


def test_output_without_dtype_is_an_error():
    b = GraphBuilder("untyped")
    b.output(b.op("Relu", b.input("x", DataType.FLOAT, [2])))
    with pytest.raises(OnnxError, match="graph 'untyped': output 'Relu_out0' has no dtype yet"):
        to_onnx(b.graph)
