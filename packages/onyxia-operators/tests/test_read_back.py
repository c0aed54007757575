"""Values computed from tensor data that size outputs (a Reshape target, a Range limit) are read back
mid-run by a com.onyxia ReadBack node: one plan serves every value against onnxruntime, with one
read-back per run and no pipeline built after the first; values that fold never read anything back."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
from onnx import TensorProto, helper
from oracle import assert_close, compile_model, reference_outputs, runtime

from onyxia.core.plan import ReadValues

RNG = np.random.default_rng(12)


def _model(
    nodes: list[onnx.NodeProto], inputs: list[tuple[str, int, list]], inits: dict[str, np.ndarray]
) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "read_back",
        [helper.make_tensor_value_info(n, t, s) for n, t, s in inputs],
        [
            helper.make_tensor_value_info(
                "y", TensorProto.FLOAT if nodes[-1].op_type != "Range" else TensorProto.INT64, None
            )
        ],
        [onnx.numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 18)], ir_version=9)


def _read_backs(model: onnx.ModelProto) -> int:
    return sum(isinstance(s, ReadValues) for op in compile_model(model).operations for s in op.steps)


def _runs(model: onnx.ModelProto, feeds: Sequence[Mapping[str, np.ndarray]]) -> None:
    executor = runtime().load_model(compile_model(model))
    pipelines = None
    for run, feed in enumerate(feeds, 1):
        got = executor.run(dict(feed))
        for output, expected in zip(model.graph.output, reference_outputs(model, feed, "ort")):
            assert_close(got[output.name], expected, output.name)
        assert executor.stats.value_readbacks == run, "one read-back per run"
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines, f"run {run} built a pipeline"


def test_reshape_target_computed_from_data() -> None:
    """x[24] reshaped to the column maxima of a[3, 2], computed on the GPU and read back."""
    nodes = [
        helper.make_node("ReduceMax", ["a", "axis0"], ["target"], keepdims=0),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("Softmax", ["r"], ["y"], axis=-1),
    ]
    inputs = [("x", TensorProto.FLOAT, [24]), ("a", TensorProto.INT64, [3, 2])]
    model = _model(nodes, inputs, {"axis0": np.array([0], np.int64)})
    assert _read_backs(model) == 1
    x = RNG.standard_normal(24).astype(np.float32)
    targets = [(4, 6), (3, 8), (2, 12), (4, 6)]
    feeds = [{"x": x, "a": np.array([[1, 1], [t[0], 2], [0, t[1]]], np.int64)} for t in targets]
    _runs(model, feeds)


def test_range_limit_computed_from_data() -> None:
    """Range(0, sum(mask), 1): the limit is a mask's sum, read back each run."""
    nodes = [
        helper.make_node("ReduceSum", ["mask"], ["total"], keepdims=0),
        helper.make_node("Range", ["zero", "total", "one"], ["y"]),
    ]
    model = _model(
        nodes, [("mask", TensorProto.INT64, [1, 6])], {"zero": np.array(0, np.int64), "one": np.array(1, np.int64)}
    )
    assert _read_backs(model) == 1
    feeds = [{"mask": np.array([m], np.int64)} for m in ([1, 1, 1, 0, 0, 0], [1] * 6, [0] * 6, [1, 0, 1, 0, 1, 1])]
    _runs(model, feeds)


def test_values_that_fold_are_never_read_back() -> None:
    """Reshape(x, Concat(Shape(x)[0], [-1])): the target folds from the shape, as exporters write it."""
    nodes = [
        helper.make_node("Shape", ["x"], ["s"], end=1),
        helper.make_node("Concat", ["s", "minus_one"], ["target"], axis=0),
        helper.make_node("Reshape", ["x", "target"], ["r"]),
        helper.make_node("Relu", ["r"], ["y"]),
    ]
    model = _model(nodes, [("x", TensorProto.FLOAT, ["n", 4, 3])], {"minus_one": np.array([-1], np.int64)})
    assert _read_backs(model) == 0
    executor = runtime().load_model(compile_model(model))
    for n in (2, 5):
        x = RNG.standard_normal((n, 4, 3)).astype(np.float32)
        assert_close(executor.run({"x": x})["y"], reference_outputs(model, {"x": x}, "ort")[0])
    assert (executor.stats.value_readbacks, executor.stats.staging_maps) == (0, 2)


def test_float_range_limit_cast_from_an_integer_computed_from_data() -> None:
    """VITS' upsampler: Range(2.0, Cast<float>(Cast<int64>(sum(durations))), 3.0). The float limit is
    a Cast of an integer computed on the GPU: that integer is read back, once per run."""
    nodes = [
        helper.make_node("ReduceSum", ["durations"], ["total"], keepdims=0),
        helper.make_node("Cast", ["total"], ["frames"], to=TensorProto.INT64),
        helper.make_node("Cast", ["frames"], ["limit"], to=TensorProto.FLOAT),
        helper.make_node("Range", ["start", "limit", "delta"], ["positions"]),
        helper.make_node("Mul", ["positions", "scale"], ["y"]),
    ]
    inits = {
        "start": np.array(2.0, np.float32),
        "delta": np.array(3.0, np.float32),
        "scale": np.array(0.5, np.float32),
    }
    model = _model(nodes, [("durations", TensorProto.FLOAT, [80])], inits)  # past MAX_VALUE_ELEMENTS: data
    assert _read_backs(model) == 1
    rounded = RNG.integers(0, 3, 80).astype(np.float32)
    feeds = [{"durations": rounded}, {"durations": rounded * 2.5 + 0.25}, {"durations": rounded}]
    _runs(model, feeds)
