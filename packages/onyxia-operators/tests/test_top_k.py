"""TopK against onnxruntime: axes, largest/smallest, ties (the lower index first), k as a constant,
as a run-time input and as a value computed from data (SSD's ``min(300, count above a threshold)``),
the last two read back mid-run so one compiled plan serves every k."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from oracle import assert_close, check_op, check_rebinding, compile_model, make_model, reference_outputs, runtime

from onyxia.core.errors import InputError, ShapeInferenceError
from onyxia.core.plan import ReadValues

RNG = np.random.default_rng(5)


def _k(k: int) -> np.ndarray:
    return np.array([k], np.int64)


@pytest.mark.parametrize("axis", [0, 1, -1])
@pytest.mark.parametrize("largest", [0, 1])
def test_top_k_constant_k_matches_onnxruntime(axis: int, largest: int) -> None:
    x = RNG.standard_normal((4, 9, 5)).astype(np.float32)
    attrs = {"axis": axis, "largest": largest}
    check_op("TopK", {"x": x, "k": _k(3)}, attrs, opset=11, num_outputs=2, initializers=["k"])


@pytest.mark.parametrize("dtype", [np.float32, np.int32, np.int64])
@pytest.mark.parametrize("largest", [0, 1])
def test_top_k_ties_take_the_lower_index_first(dtype: type, largest: int) -> None:
    """Values from {0, 1, 2}: most of each line ties, so the order is the tie rule's."""
    x: np.ndarray = RNG.integers(0, 3, (6, 40)).astype(dtype)
    check_op("TopK", {"x": x, "k": _k(17)}, {"largest": largest}, opset=11, num_outputs=2, initializers=["k"])


def test_top_k_before_opset_10_reads_k_from_its_attribute() -> None:
    x = RNG.standard_normal((3, 8)).astype(np.float32)
    check_op("TopK", {"x": x}, {"k": 4}, opset=9, num_outputs=2)


@pytest.mark.parametrize("k", [0, 1, 12])
def test_top_k_of_a_constant_folds(k: int) -> None:
    x = RNG.integers(0, 4, (2, 12)).astype(np.float32)
    check_op("TopK", {"x": x, "k": _k(k)}, opset=11, num_outputs=2, initializers=["x", "k"])


def test_top_k_folded_k_out_of_range_is_a_compile_error() -> None:
    """k = 3 + 3 folds to 6 > 5 (onnx's own inference cannot see it through the Add)."""
    nodes = [helper.make_node("Add", ["k3", "k3"], ["k"]), helper.make_node("TopK", ["x", "k"], ["v", "i"])]
    graph = helper.make_graph(
        nodes,
        "top_k_too_large",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2, 5])],
        [helper.make_empty_tensor_value_info(n) for n in ("v", "i")],
        [onnx.numpy_helper.from_array(_k(3), "k3")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=7)
    with pytest.raises(ShapeInferenceError, match=r"k = 6 is outside \[0, 5\]"):
        compile_model(model)


def test_top_k_run_time_k_is_read_back_and_one_plan_serves_every_k() -> None:
    x = RNG.standard_normal((3, 50)).astype(np.float32)
    model = make_model("TopK", {"x": x, "k": _k(1)}, {"largest": 0}, opset=11, num_outputs=2)
    compiled = compile_model(model)
    assert sum(isinstance(s, ReadValues) for op in compiled.operations for s in op.steps) == 1
    executor = runtime().load_model(compiled)
    pipelines = None
    for k in (7, 50, 1, 0, 23):
        feeds = {"x": RNG.standard_normal((3, 50)).astype(np.float32), "k": _k(k)}
        got = executor.run(feeds)
        for name, expected in zip(("y0", "y1"), reference_outputs(model, feeds, "ort")):
            assert_close(got[name], expected, f"{name} at k={k}")
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines, f"k={k} built a pipeline"


def test_top_k_run_time_k_larger_than_the_axis_is_an_error() -> None:
    model = make_model("TopK", {"x": np.zeros((2, 5), np.float32), "k": _k(1)}, opset=11, num_outputs=2)
    feeds = {"x": RNG.standard_normal((2, 5)).astype(np.float32), "k": _k(6)}
    with pytest.raises(Exception):  # noqa: B017 - onnxruntime refuses it too
        reference_outputs(model, feeds, "ort")
    with pytest.raises(InputError, match="TopK"):
        runtime().load_model(compile_model(model)).run(feeds)


def _ssd_class_filter() -> onnx.ModelProto:
    """torchvision SSD's per-class filter: scores above 0.01, then the best min(limit, count) of them
    (k computed on the GPU from NonZero's count: read back)."""
    nodes = [
        helper.make_node("Greater", ["scores", "thr"], ["mask"]),
        helper.make_node("NonZero", ["mask"], ["nz"]),
        helper.make_node("Transpose", ["nz"], ["idx"], perm=[1, 0]),
        helper.make_node("GatherND", ["scores", "idx"], ["kept"]),
        helper.make_node("Shape", ["kept"], ["kept_shape"]),
        helper.make_node("Concat", ["limit", "kept_shape"], ["both"], axis=0),
        helper.make_node("ReduceMin", ["both"], ["k_scalar"], keepdims=0),
        helper.make_node("Reshape", ["k_scalar", "one"], ["k"]),
        helper.make_node("TopK", ["kept", "k"], ["values", "indices"], axis=-1),
        helper.make_node("Gather", ["boxes", "indices"], ["picked"], axis=0),
    ]
    inits = [
        onnx.numpy_helper.from_array(np.array(0.01, np.float32), "thr"),
        onnx.numpy_helper.from_array(np.array([30], np.int64), "limit"),
        onnx.numpy_helper.from_array(np.array([1], np.int64), "one"),
    ]
    graph = helper.make_graph(
        nodes,
        "ssd_class_filter",
        [
            helper.make_tensor_value_info("scores", TensorProto.FLOAT, [200]),
            helper.make_tensor_value_info("boxes", TensorProto.FLOAT, [200, 4]),
        ],
        [helper.make_empty_tensor_value_info(n) for n in ("values", "indices", "picked")],
        inits,
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 11)], ir_version=7)


@pytest.mark.parametrize("density", [0.5, 0.05, 0.0, 1.0])
def test_top_k_of_a_data_dependent_count(density: float) -> None:
    model = _ssd_class_filter()
    scores = np.where(RNG.random(200) < density, RNG.random(200) + 0.02, 0.0).astype(np.float32)
    feeds = {"scores": scores, "boxes": RNG.standard_normal((200, 4)).astype(np.float32)}
    got = runtime().load_model(compile_model(model)).run(feeds)
    for name, expected in zip(("values", "indices", "picked"), reference_outputs(model, feeds, "ort")):
        assert_close(got[name], expected, f"{name} at density {density}")


def test_top_k_one_plan_serves_every_shape() -> None:
    """Symbolic rows and axis length (no rows at all included), k constant: rebound, never recompiled."""
    model = make_model(
        "TopK",
        {"x": np.zeros((3, 10), np.float32), "k": _k(2)},
        opset=11,
        num_outputs=2,
        initializers=["k"],
        dim_params={"x": ["rows", "n"]},
    )
    shapes = [(3, 10), (5, 2), (0, 4), (2, 300)]
    check_rebinding(model, [{"x": RNG.standard_normal(s).astype(np.float32)} for s in shapes])
