"""Graph inputs that size outputs (Reshape/Expand/Tile/ConstantOfShape targets, Slice bounds) bound at
run time: one plan runs at several values against onnxruntime, and no shader, pipeline or read-back
is added after the first run; values the plan cannot honour fail clearly, naming node and input;
inputs that shape kernels (axes) get a plan per value, compiled on first use and cached."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from oracle import assert_close, compile_model, make_model, reference_outputs, runtime

from onyxia.core import InputError, OnyxiaError

RNG = np.random.default_rng(10)


def _runs_without_recompiling(model: onnx.ModelProto, feeds: Sequence[Mapping[str, np.ndarray]]) -> Any:
    """Every feed matches onnxruntime on one executor; after the first run nothing is compiled."""
    executor = runtime().load_model(compile_model(model))
    created = None
    for feed in feeds:
        got = executor.run(dict(feed))
        for output, expected in zip(model.graph.output, reference_outputs(model, feed, "ort")):
            assert_close(got[output.name], expected, output.name)
        stats = executor.stats
        now = (stats.shader_modules_created, stats.pipelines_created)
        created = created or now
        assert now == created, f"feed {dict(feed)} recompiled: {created} -> {now}"
        assert stats.value_readbacks == 0, "graph-input values are bound on the host, never read back"
    return executor


def _x(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _i64(*values: int) -> np.ndarray:
    return np.array(values, np.int64)


@pytest.mark.parametrize("allowzero", [0, 1])
def test_reshape_target_from_a_graph_input(allowzero: int) -> None:
    model = make_model("Reshape", {"x": _x(2, 6), "shape": _i64(3, 4)}, {"allowzero": allowzero}, opset=14)
    targets = [(3, 4), (4, 3), (12, 1), (2, 6)]
    if not allowzero:  # -1 and 0 are resolved on the host when the value is bound
        targets += [(-1, 2), (0, -1), (6, -1)]
    _runs_without_recompiling(model, [{"x": _x(2, 6), "shape": _i64(*t)} for t in targets])


def test_reshape_then_a_kernel_sized_by_the_target() -> None:
    """The Reshape is a view; the Softmax after it is sized by the run-time target (immediates)."""
    nodes = [helper.make_node("Reshape", ["x", "shape"], ["r"]), helper.make_node("Softmax", ["r"], ["y"], axis=-1)]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [4, 6]),
            helper.make_tensor_value_info("shape", TensorProto.INT64, [3]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    targets = [(2, 3, 4), (4, 3, 2), (1, 1, 24), (-1, 2, 6)]
    _runs_without_recompiling(model, [{"x": _x(4, 6), "shape": _i64(*t)} for t in targets])


def test_expand_shape_from_a_graph_input() -> None:
    model = make_model("Expand", {"x": _x(3, 1), "shape": _i64(2, 3, 4)}, opset=13)
    _runs_without_recompiling(
        model, [{"x": _x(3, 1), "shape": _i64(*t)} for t in [(2, 3, 4), (1, 3, 7), (5, 3, 1), (2, 1, 4)]]
    )


def test_tile_repeats_from_a_graph_input() -> None:
    model = make_model("Tile", {"x": _x(2, 3), "repeats": _i64(2, 1)}, opset=13)
    _runs_without_recompiling(model, [{"x": _x(2, 3), "repeats": _i64(*r)} for r in [(2, 1), (1, 3), (3, 2)]])


def test_constant_of_shape_from_a_graph_input() -> None:
    value = onnx.numpy_helper.from_array(np.array([1.5], np.float32))
    model = make_model("ConstantOfShape", {"shape": _i64(2, 3)}, {"value": value}, opset=20)
    _runs_without_recompiling(model, [{"shape": _i64(*s)} for s in [(2, 3), (4, 1), (1, 9)]])


def test_slice_bounds_from_graph_inputs() -> None:
    inputs = {"x": _x(10, 8), "starts": _i64(1, 2), "ends": _i64(5, 8), "axes": _i64(0, 1)}
    model = make_model("Slice", inputs, opset=13, initializers=["axes"])
    # negative bounds count from the end, out-of-range ones clamp, an end before the start takes nothing
    bounds = [((1, 2), (5, 8)), ((0, 0), (10, 3)), ((7, 4), (9, 5)), ((-3, 0), (1000, -1)), ((5, 6), (1, 2**62))]
    feeds = [{"x": _x(10, 8), "starts": _i64(*s), "ends": _i64(*e)} for s, e in bounds]
    _runs_without_recompiling(model, feeds)


@pytest.mark.parametrize(
    ("op", "inputs", "initializers", "bad", "match"),
    [
        (
            "Reshape",
            {"x": _x(2, 6), "shape": _i64(3, 4)},
            [],
            {"shape": _i64(5, -1)},
            r"node 'node' \(Reshape\): input 1 \(shape\): the target \[5, -1\].*no size for the -1",
        ),
        (
            "Expand",
            {"x": _x(3, 1), "shape": _i64(3, 4)},
            [],
            {"shape": _i64(2, 4)},
            r"node 'node' \(Expand\) broadcasting: 'shape\[0\]' must equal '3'.*shape\[0\] = 2",
        ),
    ],
)
def test_values_the_plan_cannot_honour_are_refused_naming_node_and_input(
    op: str, inputs: dict[str, np.ndarray], initializers: list[str], bad: dict[str, np.ndarray], match: str
) -> None:
    model = make_model(op, inputs, opset=13, initializers=initializers)
    model.graph.node[0].name = "node"
    executor = runtime().load_model(compile_model(model))
    feeds = {k: v for k, v in inputs.items() if k not in initializers}
    executor.run(feeds)
    with pytest.raises(InputError, match=match):
        executor.run({**feeds, **bad})
    got = executor.run(feeds)  # the refused run changed nothing
    assert_close(got["y0"], reference_outputs(model, feeds, "ort")[0])


def test_a_target_built_from_a_graph_input_takes_sizes_only() -> None:
    """Concat(rows, [6]) as a Reshape target: the symbols meet the Concat before the Reshape, so a
    run-time -1 cannot be resolved on the host; it is refused, naming node, input and value."""
    nodes = [
        helper.make_node("Concat", ["rows", "six"], ["t"], axis=0),
        helper.make_node("Reshape", ["x", "t"], ["y"], name="r"),
    ]
    graph = helper.make_graph(
        nodes,
        "g",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 6]),
            helper.make_tensor_value_info("rows", TensorProto.INT64, [1]),
        ],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(_i64(6), "six")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    executor = _runs_without_recompiling(model, [{"x": _x(2, 6), "rows": _i64(2)}])
    with pytest.raises(InputError, match=r"node 'r' \(Reshape\): input 1 \(shape\) element 0.*rows\[0\] = -1"):
        executor.run({"x": _x(2, 6), "rows": _i64(-1)})


@pytest.mark.parametrize(
    ("op", "inputs", "values"),
    [
        ("Unsqueeze", {"x": _x(2, 3), "axes": _i64(0)}, [(0,), (2,), (-1,), (0,)]),
        ("ReduceSum", {"x": _x(2, 3, 4), "axes": _i64(1)}, [(1,), (0,), (-1,), (1,)]),
        ("Slice", {"x": _x(6, 5), "starts": _i64(1), "ends": _i64(4), "axes": _i64(0)}, [(0,), (1,), (-2,), (0,)]),
    ],
)
def test_structural_values_get_a_plan_per_value(op: str, inputs: dict, values: list[tuple[int, ...]]) -> None:
    """An axis from a graph input shapes the kernel, not a size: the first compile defers, each new
    value compiles its plan once (`compiler.deferred`), and a value seen before switches back to its
    cached plan without compiling a shader or pipeline."""
    model = make_model(op, inputs, opset=18)
    compiled = compile_model(model)
    assert not compiled.operations and "axes" in compiled.metadata["deferred"]
    executor = runtime().load_model(compiled)
    for run, axes in enumerate(values, 1):
        feed = {**inputs, "axes": _i64(*axes)}
        assert_close(executor.run(feed)["y0"], reference_outputs(model, feed, "ort")[0])
        distinct = len(set(values[:run]))
        assert (executor.stats.plan_switches, executor.stats.replans) == (run, distinct)
    pipelines = executor.stats.pipelines_created
    executor.run({**inputs, "axes": _i64(*values[1])})  # seen before: its plan is cached
    assert (executor.stats.replans, executor.stats.pipelines_created) == (len(set(values)), pipelines)


def test_one_hot_depth_from_a_graph_input() -> None:
    inputs = {"indices": _i64(0, 3, -1, 7), "depth": _i64(5), "values": np.array([0.5, 2.0], np.float32)}
    model = make_model("OneHot", inputs, {"axis": 0}, opset=11)
    _runs_without_recompiling(model, [{**inputs, "depth": _i64(d)} for d in (5, 8, 2)])


def test_range_bounds_from_graph_inputs() -> None:
    inputs = {"start": np.array(2, np.int64), "limit": np.array(9, np.int64), "delta": np.array(3, np.int64)}
    model = make_model("Range", inputs, opset=11, initializers=["delta"])
    bounds = [(2, 9), (0, 20), (5, 6), (4, 4)]
    feeds = [{"start": np.array(s, np.int64), "limit": np.array(lim, np.int64)} for s, lim in bounds]
    _runs_without_recompiling(model, feeds)


def test_a_structural_value_the_op_refuses_fails_at_run_naming_the_node() -> None:
    """The plan for an out-of-range axis cannot be made: that run raises the op's own error, and the
    executor keeps serving the values it has plans for."""
    x = _x(2, 3, 4)
    model = make_model("ReduceSum", {"x": x, "axes": _i64(1)}, opset=18)
    model.graph.node[0].name = "node"
    executor = runtime().load_model(compile_model(model))
    executor.run({"x": x, "axes": _i64(1)})
    with pytest.raises(OnyxiaError, match=r"node 'node' \(ReduceSum.*axis 5 is out of range for rank 3"):
        executor.run({"x": x, "axes": _i64(5)})
    feed = {"x": x, "axes": _i64(2)}
    assert_close(executor.run(feed)["y0"], reference_outputs(model, feed, "ort")[0])
