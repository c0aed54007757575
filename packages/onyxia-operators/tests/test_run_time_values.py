"""Inputs that shape nothing are ordinary run-time inputs, read on the GPU: Clip's bounds, Pad's
constant_value, Trilu's k and CumSum's axis, each fed at run time (as `onnx.backend.test` feeds them)
and checked against onnxruntime on the same inputs. One compiled model serves every value: a second
value runs with no new pipeline. A run-time CumSum axis out of range raises where onnxruntime does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import numpy as np
import pytest
from movement_data import random_data
from oracle import assert_close, check_op, compile_model, make_model, reference_outputs, runtime

from onyxia.core import InputError

FLOATS_AND_INTS = [np.float32, np.float16, np.int32, np.int64]


def _runs_each_value(model: object, feeds: Sequence[Mapping[str, np.ndarray]]) -> None:
    """One executor runs every feed as onnxruntime does, creating no pipeline after the first run."""
    executor = runtime().load_model(compile_model(model))
    pipelines = None
    for feed in feeds:
        got = executor.run(dict(feed))
        for output, expected in zip(model.graph.output, reference_outputs(model, feed, "ort")):  # type: ignore[attr-defined]
            assert_close(got[output.name], expected, f"{output.name} with {sorted(feed)}")
        pipelines = pipelines if pipelines is not None else executor.stats.pipelines_created
        assert executor.stats.pipelines_created == pipelines, "a new value compiled a new pipeline"


# ----- Clip ----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS_AND_INTS, ids=lambda d: np.dtype(d).name)
@pytest.mark.parametrize("given", ["both", "min", "max"])
def test_clip_bounds_fed_at_run_time(dtype: type, given: str) -> None:
    x = random_data((3, 7), dtype, low=-20, high=20)
    lo = np.array(-0.5 if np.dtype(dtype).kind == "f" else -5, dtype)
    hi = np.array(1.25 if np.dtype(dtype).kind == "f" else 9, dtype)
    inputs = {"x": x, "lo": lo if given != "max" else None, "hi": hi if given != "min" else None}
    check_op("Clip", inputs)


def test_clip_keeps_nan_and_gives_max_when_min_exceeds_it() -> None:
    x = np.array([np.nan, -np.inf, np.inf, -3.0, 0.0, 4.0], np.float32)
    check_op("Clip", {"x": x, "lo": np.array(-1.0, np.float32), "hi": np.array(2.0, np.float32)})
    check_op("Clip", {"x": x, "lo": np.array(3.0, np.float32), "hi": np.array(1.0, np.float32)})


def test_clip_with_one_constant_bound_in_an_elementwise_chain() -> None:
    """Mul -> Clip -> Neg with min a constant and max fed: the run-time bound keeps Clip out of the
    fused chain, and the values still match."""
    from onnx import TensorProto, helper, numpy_helper

    nodes = [
        helper.make_node("Mul", ["x", "x"], ["t"]),
        helper.make_node("Clip", ["t", "lo", "hi"], ["c"]),
        helper.make_node("Neg", ["c"], ["y"]),
    ]
    graph = helper.make_graph(
        nodes,
        "clip_chain",
        [helper.make_tensor_value_info(n, TensorProto.FLOAT, s) for n, s in (("x", [4, 5]), ("hi", []))],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4, 5])],
        [numpy_helper.from_array(np.array(0.25, np.float32), "lo")],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    x = random_data((4, 5), np.float32)
    _runs_each_value(model, [{"x": x, "hi": np.array(h, np.float32)} for h in (1.0, 0.5)])


# ----- Pad -----------------------------------------------------------------------------------------
@pytest.mark.parametrize("dtype", FLOATS_AND_INTS, ids=lambda d: np.dtype(d).name)
def test_pad_constant_value_fed_at_run_time(dtype: type) -> None:
    inputs = {"x": random_data((3, 4), dtype), "pads": np.array([1, 0, 2, -1], np.int64)}
    model = make_model("Pad", {**inputs, "value": np.array(7, dtype)}, {"mode": "constant"}, initializers=["pads"])
    _runs_each_value(model, [{"x": inputs["x"], "value": np.array(v, dtype)} for v in (7, -3)])


def test_pad_value_fed_at_run_time_is_unused_by_edge_mode() -> None:
    inputs = {"x": random_data((3, 4), np.float32), "pads": np.array([1, 2, 0, 1], np.int64)}
    check_op("Pad", {**inputs, "value": np.array(5.0, np.float32)}, {"mode": "edge"}, initializers=["pads"])


# ----- Trilu ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("upper", [0, 1])
def test_trilu_k_fed_at_run_time(upper: int) -> None:
    x = random_data((2, 4, 5), np.float32)
    model = make_model("Trilu", {"x": x, "k": np.array(0, np.int64)}, {"upper": upper})
    _runs_each_value(model, [{"x": x, "k": np.array(k, np.int64)} for k in (0, -1, 2, 7, -9)])


# ----- CumSum --------------------------------------------------------------------------------------
@pytest.mark.parametrize(("exclusive", "reverse"), [(0, 0), (1, 0), (0, 1), (1, 1)])
def test_cumsum_axis_fed_at_run_time(exclusive: int, reverse: int) -> None:
    x = random_data((2, 3, 4), np.float32)
    model = make_model("CumSum", {"x": x, "axis": np.array(0, np.int64)}, {"exclusive": exclusive, "reverse": reverse})
    _runs_each_value(model, [{"x": x, "axis": np.array(a, np.int64)} for a in (0, 1, 2, -1, -3)])


@pytest.mark.parametrize("dtype", [np.int64, np.int32, np.float16], ids=lambda d: np.dtype(d).name)
def test_cumsum_axis_fed_at_run_time_dtypes(dtype: type) -> None:
    inputs = {"x": random_data((3, 5), dtype, low=-50, high=50), "axis": np.array(1, np.int32)}
    check_op("CumSum", inputs, {"exclusive": 1})


def test_cumsum_axis_out_of_range_raises_where_onnxruntime_does() -> None:
    x = random_data((2, 3), np.float32)
    model = make_model("CumSum", {"x": x, "axis": np.array(0, np.int64)})
    bad = {"x": x, "axis": np.array(2, np.int64)}
    with pytest.raises(Exception, match="(?i)axis"):
        reference_outputs(model, bad, "ort")
    executor = runtime().load_model(compile_model(model))
    with pytest.raises(InputError, match=r"node 'CumSum_0' \(CumSum\): index 2 is out of range"):
        executor.run(bad)
    good = {"x": x, "axis": np.array(-2, np.int64)}
    assert_close(executor.run(good)["y0"], reference_outputs(model, good, "ort")[0])
