"""Subgraphs in the IR: outer-scope reads become explicit inputs of the node and of every subgraph,
nested ones included, and `to_onnx` writes them back as outer-scope reads onnxruntime runs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

from onyxia.core.ir import IrGraph
from onyxia.core.subgraphs import CAPTURED_INPUTS, captured_inputs, own_inputs, subgraphs_of
from onyxia.onnx import load_and_parse_model
from onyxia.onnx.export import to_onnx

F = TensorProto.FLOAT


def _nested_model() -> onnx.ModelProto:
    """Loop body holding an If whose branches read 'scale' (two scopes out) and 'v' (the body's)."""
    then_branch = helper.make_graph(
        [helper.make_node("Mul", ["v", "scale"], ["t"])], "then", [], [helper.make_tensor_value_info("t", F, [3])]
    )
    else_branch = helper.make_graph(
        [helper.make_node("Sub", ["v", "scale"], ["e"])], "else", [], [helper.make_tensor_value_info("e", F, [3])]
    )
    body = helper.make_graph(
        [
            helper.make_node("Greater", ["i", "one"], ["odd"]),
            helper.make_node("If", ["odd"], ["v_out"], name="inner", then_branch=then_branch, else_branch=else_branch),
            helper.make_node("Identity", ["c"], ["c_out"]),
        ],
        "body",
        [
            helper.make_tensor_value_info("i", TensorProto.INT64, []),
            helper.make_tensor_value_info("c", TensorProto.BOOL, []),
            helper.make_tensor_value_info("v", F, [3]),
        ],
        [helper.make_tensor_value_info("c_out", TensorProto.BOOL, []), helper.make_tensor_value_info("v_out", F, [3])],
    )
    graph = helper.make_graph(
        [helper.make_node("Loop", ["M", "", "v0"], ["v_final"], name="outer", body=body)],
        "m",
        [
            helper.make_tensor_value_info("v0", F, [3]),
            helper.make_tensor_value_info("scale", F, [3]),
            helper.make_tensor_value_info("M", TensorProto.INT64, []),  # from a graph input: not unrolled at load
        ],
        [helper.make_tensor_value_info("v_final", F, [3])],
        [numpy_helper.from_array(np.array(1, np.int64), "one")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def test_outer_reads_become_explicit_inputs_at_every_depth(tmp_path: Path) -> None:
    path = tmp_path / "model.onnx"
    onnx.save(_nested_model(), path)
    graph = load_and_parse_model(path)
    (loop,) = graph.nodes_of("Loop")
    assert [graph.tensor(t).name for t in own_inputs(loop) if t is not None] == ["M", "v0"]
    assert [graph.tensor(t).name for t in captured_inputs(loop)] == ["one", "scale"]
    assert loop.attributes[CAPTURED_INPUTS] == 2
    body = subgraphs_of(loop)["body"]
    assert [body.tensor(t).name for t in body.inputs] == ["i", "c", "v", "one", "scale"]
    (inner,) = body.nodes_of("If")
    assert [body.tensor(t).name for t in captured_inputs(inner)] == ["v", "scale"]
    for branch in subgraphs_of(inner).values():
        assert isinstance(branch, IrGraph)
        assert [branch.tensor(t).name for t in branch.inputs] == ["v", "scale"]


def test_export_writes_outer_reads_back_and_onnxruntime_agrees(tmp_path: Path) -> None:
    model = _nested_model()
    path = tmp_path / "model.onnx"
    onnx.save(model, path)
    exported = to_onnx(load_and_parse_model(path))
    onnx.checker.check_model(exported)
    feeds = {"v0": np.array([1, 2, 3], np.float32), "scale": np.array([0.5, 2, -1], np.float32), "M": np.array(4)}
    expected = ort.InferenceSession(model.SerializeToString()).run(None, feeds)
    got = ort.InferenceSession(exported.SerializeToString()).run(None, feeds)
    np.testing.assert_array_equal(got[0], expected[0])
