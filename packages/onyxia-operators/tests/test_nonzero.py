"""NonZero, the first data-dependent shape: its count is read back mid-run (4 bytes, counted in
`ExecutorStats.value_readbacks`), then the rest of the plan runs at that count through the ordinary
dims update: one plan serves every count, against onnxruntime, with no pipeline built after the
first run."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from oracle import assert_close, check_op, compile_model, make_model, reference_outputs, runtime

from onyxia.core.plan import ReadValues

RNG = np.random.default_rng(11)


def _sparse(shape: tuple[int, ...], density: float, dtype: type = np.float32) -> np.ndarray:
    x = RNG.standard_normal(shape).astype(np.float32)
    return np.where(RNG.random(shape) < density, x, 0).astype(dtype)


def _run_counts(model: onnx.ModelProto, feeds: Sequence[Mapping[str, np.ndarray]]) -> None:
    """Each feed matches onnxruntime; each run reads back exactly one count; nothing recompiles."""
    compiled = compile_model(model)
    assert sum(isinstance(s, ReadValues) for op in compiled.operations for s in op.steps) == 1
    executor = runtime().load_model(compiled)
    pipelines = None
    for run, feed in enumerate(feeds, 1):
        got = executor.run(dict(feed))
        for output, expected in zip(model.graph.output, reference_outputs(model, feed, "ort")):
            assert_close(got[output.name], expected, output.name)
        assert executor.stats.value_readbacks == run, "one read-back of the count per run"
        assert executor.stats.value_bytes_read_back == 4 * run
        pipelines = pipelines or executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines, f"run {run} built a pipeline"


@pytest.mark.parametrize(
    ("shape", "dtype"),
    [((13,), np.float32), ((3, 5), np.float32), ((2, 3, 4), np.int32), ((4, 70), np.bool_), ((600,), np.int64)],
)
def test_nonzero_matches_onnxruntime_at_several_counts(shape: tuple[int, ...], dtype: type) -> None:
    model = make_model("NonZero", {"x": _sparse(shape, 0.5, dtype)}, opset=13)
    _run_counts(model, [{"x": _sparse(shape, d, dtype)} for d in (0.5, 0.1, 0.9, 0.0, 1.0)])


def test_nonzero_of_a_constant_folds() -> None:
    check_op("NonZero", {"x": _sparse((3, 4), 0.5)}, opset=13, initializers=["x"])


def test_nonzero_then_gather_reads_back_one_count_per_run() -> None:
    """x -> NonZero -> Reshape [-1] -> Gather(x): the non-zeros themselves, at two different counts."""
    nodes = [
        helper.make_node("NonZero", ["x"], ["nz"]),
        helper.make_node("Reshape", ["nz", "flat"], ["idx"]),
        helper.make_node("Gather", ["x", "idx"], ["picked"], axis=0),
        helper.make_node("Mul", ["picked", "picked"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "nonzero_gather",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [64])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)],
        [onnx.numpy_helper.from_array(np.array([-1], np.int64), "flat")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    _run_counts(model, [{"x": _sparse((64,), d)} for d in (0.3, 0.8, 0.3)])


def test_a_plan_without_data_dependent_shapes_reads_nothing_back() -> None:
    model = make_model("Relu", {"x": _sparse((8,), 0.5)})
    executor = runtime().load_model(compile_model(model))
    for _ in range(2):
        executor.run({"x": _sparse((8,), 0.5)})
    assert (executor.stats.value_readbacks, executor.stats.staging_maps) == (0, 2)


def test_a_kernel_sized_only_by_the_count_runs_after_it_is_read() -> None:
    """ConstantOfShape(Shape(NonZero(x))) reads no buffer NonZero writes, only its count: the
    scheduler must still keep it after the read-back (`compiler.segment_order`)."""
    nodes = [
        helper.make_node("Relu", ["x"], ["r"]),
        helper.make_node("NonZero", ["r"], ["nz"]),
        helper.make_node("Shape", ["nz"], ["s"]),
        helper.make_node(
            "ConstantOfShape", ["s"], ["ones"], value=onnx.numpy_helper.from_array(np.ones(1, np.float32))
        ),
        helper.make_node("Relu", ["ones"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "count_only",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [5, 7])],
        [helper.make_tensor_value_info(n, t, None) for n, t in (("y", TensorProto.FLOAT), ("nz", TensorProto.INT64))],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)], ir_version=9)
    _run_counts(model, [{"x": _sparse((5, 7), d)} for d in (0.4, 0.9, 0.1)])
