"""`If` and `Loop` as subplans the host runs between segments, against onnxruntime.

An `If` on data reads its condition back (one word per run) and runs only the chosen branch; its
output may have another shape in each branch (a fresh dim bound from the branch's result). A `Loop`
runs its body once per iteration with the carried values on the GPU: the trip count is read back
once, the condition once per iteration unless the body passes it through. Nothing recompiles
between runs, whatever the branch or the iteration count.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import assert_close, compile_model, reference_outputs, runtime

from onyxia.core import OnyxiaError
from onyxia.core.plan import RunSubplan

RNG = np.random.default_rng(5)
F = TensorProto.FLOAT


def _info(name: str, dtype: int, shape: Sequence[int | str] | None) -> onnx.ValueInfoProto:
    return helper.make_tensor_value_info(name, dtype, shape)


def _model(
    nodes: list[onnx.NodeProto], inputs: list, outputs: list, initializers: Mapping[str, np.ndarray]
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes, "m", inputs, outputs, [numpy_helper.from_array(v, k) for k, v in initializers.items()]
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    onnx.checker.check_model(model)
    return model


def _check_runs(
    model: onnx.ModelProto, feeds: Sequence[dict[str, np.ndarray]], readbacks: Sequence[int], *, subplans: bool = True
) -> Any:
    """Every feed matches onnxruntime, with `readbacks[i]` value read-backs in run i; the executor."""
    compiled = compile_model(model)
    assert any(isinstance(s, RunSubplan) for op in compiled.operations for s in op.steps) == subplans
    executor = runtime().load_model(compiled)
    before = 0
    for feed, expected_reads in zip(feeds, readbacks, strict=True):
        got = executor.run(feed)
        for output, expected in zip(model.graph.output, reference_outputs(model, feed, "ort")):
            assert got[output.name].shape == expected.shape, output.name
            assert_close(got[output.name], expected, output.name)
        assert executor.stats.value_readbacks - before == expected_reads
        before = executor.stats.value_readbacks
    return executor


def _if_model() -> onnx.ModelProto:
    """cond = sum(x) > 0; then 2x (3x4), else concat(x, y) (6x4): each branch reads outer values."""
    then_branch = helper.make_graph(
        [helper.make_node("Mul", ["x", "two"], ["t"])],
        "then",
        [],
        [_info("t", F, [3, 4])],
        [numpy_helper.from_array(np.array(2, np.float32), "two")],
    )
    else_branch = helper.make_graph(
        [helper.make_node("Concat", ["x", "y"], ["e"], axis=0)], "else", [], [_info("e", F, [6, 4])]
    )
    nodes = [
        helper.make_node("ReduceSum", ["x"], ["s"], keepdims=0),
        helper.make_node("Greater", ["s", "zero"], ["c"]),
        helper.make_node("If", ["c"], ["r"], then_branch=then_branch, else_branch=else_branch),
        helper.make_node("Add", ["r", "one"], ["out"]),
    ]
    return _model(
        nodes,
        [_info("x", F, [3, 4]), _info("y", F, [3, 4])],
        [_info("out", F, ["n", 4])],
        {"zero": np.array(0, np.float32), "one": np.array(1, np.float32)},
    )


def test_if_on_data_runs_the_chosen_branch_with_its_own_shape() -> None:
    feeds = []
    for sign in (1, -1, 1, -1):
        x = sign * RNG.random((3, 4), dtype=np.float32)
        feeds.append({"x": x, "y": RNG.random((3, 4), dtype=np.float32)})
    _check_runs(_if_model(), feeds, [1, 1, 1, 1])


def test_if_on_a_graph_input_or_a_constant_reads_nothing_back() -> None:
    then_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [_info("t", F, [5])])
    else_branch = helper.make_graph([helper.make_node("Abs", ["x"], ["e"])], "else", [], [_info("e", F, [5])])
    node = helper.make_node("If", ["c"], ["out"], then_branch=then_branch, else_branch=else_branch)
    on_input = _model([node], [_info("c", TensorProto.BOOL, []), _info("x", F, [5])], [_info("out", F, [5])], {})
    x = RNG.standard_normal(5).astype(np.float32)
    # a graph-input condition is known on the host: a plan per value (compiler.deferred), nothing read back
    feeds = [{"c": np.array(v), "x": x} for v in (True, False, True, False)]
    executor = _check_runs(on_input, feeds, [0, 0, 0, 0], subplans=False)
    assert executor.stats.replans == 2, "one plan per condition value, the second switch back reuses it"
    for value in (True, False):
        constant = _model([node], [_info("x", F, [5])], [_info("out", F, [5])], {"c": np.array(value)})
        _check_runs(constant, [{"x": x}], [0], subplans=False)  # the known branch is inlined


def _loop_model(condition_from_data: bool) -> onnx.ModelProto:
    """v <- v / 2 + x + i for M iterations (or until sum(v) >= limit), every v stacked."""
    body_nodes = [
        helper.make_node("Cast", ["i"], ["fi"], to=F),
        helper.make_node("Mul", ["v", "half"], ["vh"]),
        helper.make_node("Add", ["vh", "x"], ["vx"]),
        helper.make_node("Add", ["vx", "fi"], ["v_out"]),
        helper.make_node("Identity", ["v_out"], ["scan"]),
    ]
    if condition_from_data:
        body_nodes += [
            helper.make_node("ReduceSum", ["v_out"], ["s"], keepdims=0),
            helper.make_node("Less", ["s", "limit"], ["c_out"]),
        ]
    else:
        body_nodes.append(helper.make_node("Identity", ["c"], ["c_out"]))
    body = helper.make_graph(
        body_nodes,
        "body",
        [_info("i", TensorProto.INT64, []), _info("c", TensorProto.BOOL, []), _info("v", F, [2, 3])],
        [_info("c_out", TensorProto.BOOL, []), _info("v_out", F, [2, 3]), _info("scan", F, [2, 3])],
        [numpy_helper.from_array(np.array(0.5, np.float32), "half")],
    )
    return _model(
        [helper.make_node("Loop", ["M", "", "v0"], ["v_final", "scans"], body=body)],
        [_info("M", TensorProto.INT64, []), _info("v0", F, [2, 3]), _info("x", F, [2, 3]), _info("limit", F, [])],
        [_info("v_final", F, [2, 3]), _info("scans", F, ["n", 2, 3])],
        {},
    )


def _loop_feed(trips: int, limit: float) -> dict[str, np.ndarray]:
    return {
        "M": np.array(trips, np.int64),
        "v0": RNG.random((2, 3), dtype=np.float32),
        "x": RNG.random((2, 3), dtype=np.float32),
        "limit": np.array(limit, np.float32),
    }


def test_loop_with_carried_state_and_a_data_condition() -> None:
    """Trip count read once, the condition after each iteration: 1 + iterations read-backs."""
    feeds = [_loop_feed(5, 1e9), _loop_feed(10, 30.0), _loop_feed(0, 1.0), _loop_feed(3, -1.0)]
    expected = [len(reference_outputs(_loop_model(True), f, "ort")[1]) for f in feeds]
    _check_runs(_loop_model(True), feeds, [1 + n for n in expected])


def test_loop_whose_body_passes_the_condition_reads_back_only_the_trip_count() -> None:
    _check_runs(_loop_model(False), [_loop_feed(4, 0.0), _loop_feed(1, 0.0), _loop_feed(7, 0.0)], [1, 1, 1])


def test_loop_carried_value_that_grows_each_iteration() -> None:
    """A carried value whose length changes per iteration (concat one row each time)."""
    body = helper.make_graph(
        [
            helper.make_node("Concat", ["v", "row"], ["v_out"], axis=0),
            helper.make_node("Identity", ["c"], ["c_out"]),
        ],
        "body",
        [_info("i", TensorProto.INT64, []), _info("c", TensorProto.BOOL, []), _info("v", F, [None, 3])],
        [_info("c_out", TensorProto.BOOL, []), _info("v_out", F, [None, 3])],
    )
    model = _model(
        [helper.make_node("Loop", ["M", "", "v0"], ["v_final"], body=body)],
        [_info("M", TensorProto.INT64, []), _info("v0", F, [1, 3]), _info("row", F, [1, 3])],
        [_info("v_final", F, ["n", 3])],
        {},
    )
    feeds = [
        {
            "M": np.array(m, np.int64),
            "v0": RNG.random((1, 3), dtype=np.float32),
            "row": RNG.random((1, 3), dtype=np.float32),
        }
        for m in (3, 6, 0)
    ]
    _check_runs(model, feeds, [1, 1, 1])


def test_branches_of_different_dtypes_are_refused_naming_the_if_node() -> None:
    then_branch = helper.make_graph([helper.make_node("Neg", ["x"], ["t"])], "then", [], [_info("t", F, [5])])
    else_branch = helper.make_graph(
        [helper.make_node("Cast", ["x"], ["e"], to=TensorProto.INT32)], "else", [], [_info("e", TensorProto.INT32, [5])]
    )
    model = helper.make_model(
        helper.make_graph(
            [helper.make_node("If", ["c"], ["out"], name="pick", then_branch=then_branch, else_branch=else_branch)],
            "m",
            [_info("c", TensorProto.BOOL, []), _info("x", F, [5])],
            [_info("out", F, [5])],
        ),
        opset_imports=[helper.make_opsetid("", 17)],
    )
    with pytest.raises(OnyxiaError, match="node name: pick.*Mismatched tensor element type"):
        compile_model(model)


def test_if_whose_condition_folds_from_shapes_is_inlined() -> None:
    """torch.onnx's ``if x.numel() == 0`` over a static shape: the condition folds during inference and
    the else branch's nodes join the outer graph (no subplan), reading an outer initializer."""
    then_branch = helper.make_graph([helper.make_node("Identity", ["x"], ["t"])], "then", [], [_info("t", F, [2, 3])])
    else_branch = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["m"]), helper.make_node("Relu", ["m"], ["e"])],
        "else",
        [],
        [_info("e", F, [2, 3])],
    )
    nodes = [
        helper.make_node("Size", ["x"], ["n"]),
        helper.make_node("Equal", ["n", "zero"], ["empty"]),
        helper.make_node("If", ["empty"], ["out"], then_branch=then_branch, else_branch=else_branch),
    ]
    model = _model(
        nodes,
        [_info("x", F, [2, 3])],
        [_info("out", F, [2, 3])],
        {"zero": np.array(0, np.int64), "w": RNG.standard_normal((2, 3)).astype(np.float32)},
    )
    _check_runs(model, [{"x": RNG.standard_normal((2, 3)).astype(np.float32)}], [0], subplans=False)
