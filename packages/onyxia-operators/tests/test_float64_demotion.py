"""float64 runs demoted: stored and computed as f32 on the GPU, taken and returned as float64.

The graph mirrors swift_f0's pitch head (a Cast to double, Softmax, a product with a float64
initializer, ReduceSum, Exp) plus a Cast back to float and a float64 constant folded on the host.
onnxruntime computes all of it in float64; Onyxia's GPU part is float32-accurate, so the bound is
float32's. Measured on lavapipe over five input seeds, the worst error relative to the output's largest
magnitude is 4.9e-7 for pitch (Exp magnifies Softmax's f32 rounding), 1.1e-7 for probs32 and 6.6e-8
for bias_again; `_BOUND` is 4x the worst.
"""

from __future__ import annotations

import warnings

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import compile_model, onyxia_outputs, reference_outputs

from onyxia.core.dtypes import DataType, DemotionWarning

_BOUND = 2e-6  # |onyxia - ort| / max |ort| per output (the module docstring has the measurement)
_BINS = 8


def _model() -> onnx.ModelProto:
    cents = numpy_helper.from_array(np.linspace(3.0, 6.5, _BINS), "cents")  # float64 initializer
    tiny = numpy_helper.from_array(np.array(1.0 + 1e-12), "tiny")  # 1 in float32: folding must stay float64
    nodes = [
        helper.make_node("Cast", ["logits"], ["logits64"], name="to_double", to=TensorProto.DOUBLE),
        helper.make_node("Add", ["logits64", "bias"], ["shifted"], name="add_bias"),
        helper.make_node("Softmax", ["shifted"], ["probs"], name="softmax", axis=-1),
        helper.make_node("Mul", ["probs", "cents"], ["weighted"], name="weigh"),
        helper.make_node("ReduceSum", ["weighted", "axes"], ["mean_log"], name="sum", keepdims=0),
        helper.make_node("Exp", ["mean_log"], ["pitch"], name="exp"),
        helper.make_node("Cast", ["probs"], ["probs32"], name="to_float", to=TensorProto.FLOAT),
        helper.make_node("Sub", ["tiny", "one"], ["excess"], name="fold_sub"),  # 1e-12 on the host, 0 in f32
        helper.make_node("Mul", ["excess", "scale"], ["unit"], name="fold_mul"),  # 1.0
        helper.make_node("Mul", ["bias", "unit"], ["bias_again"], name="scale_bias"),
    ]
    graph = helper.make_graph(
        nodes,
        "float64_demotion",
        [
            helper.make_tensor_value_info("logits", TensorProto.FLOAT, [3, _BINS]),
            helper.make_tensor_value_info("bias", TensorProto.DOUBLE, [3, _BINS]),
        ],
        [
            helper.make_tensor_value_info("pitch", TensorProto.DOUBLE, [3]),
            helper.make_tensor_value_info("probs32", TensorProto.FLOAT, [3, _BINS]),
            helper.make_tensor_value_info("bias_again", TensorProto.DOUBLE, [3, _BINS]),
        ],
        [
            cents,
            tiny,
            numpy_helper.from_array(np.array(1.0), "one"),
            numpy_helper.from_array(np.array(1e12), "scale"),
            numpy_helper.from_array(np.array([-1], np.int64), "axes"),
        ],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _feeds() -> dict[str, np.ndarray]:
    rng = np.random.default_rng(0)
    return {
        "logits": rng.standard_normal((3, _BINS)).astype(np.float32) * 3,
        "bias": rng.standard_normal((3, _BINS)),  # float64
    }


def test_float64_graph_matches_onnxruntime_and_returns_float64() -> None:
    model, feeds = _model(), _feeds()
    expected = reference_outputs(model, feeds, "ort")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DemotionWarning)
        actual = onyxia_outputs(model, feeds)
    for output, got, want in zip(model.graph.output, actual, expected, strict=True):
        assert got.dtype == want.dtype, f"{output.name}: {got.dtype}, onnxruntime returns {want.dtype}"
        assert got.shape == want.shape
        error = float(np.abs(got.astype(np.float64) - want).max()) / float(np.abs(want).max())
        # bias_again: the host folded (1 + 1e-12) - 1 in float64; folded in float32 it would be 0, all zeros
        assert error <= _BOUND, f"{output.name}: {error:.3g} of its largest magnitude (bound {_BOUND:g})"


def test_demotion_is_recorded_and_warned_once_per_plan() -> None:
    with pytest.warns(DemotionWarning, match=r"tensors computed in a less precise type \(double as f32\)"):
        plan = compile_model(_model())
    demoted = set(plan.demoted)
    assert {"bias", "cents", "probs", "pitch", "bias_again"} <= demoted
    assert "logits" not in demoted and "probs32" not in demoted  # float32 stays float32
    assert all(plan.tensor_by_name(name).dtype is DataType.DOUBLE for name in demoted)
    summary = plan.demotion_summary()
    assert summary.startswith(f"{len(demoted)} tensors ") and "and " in summary and "more" in summary


def test_float32_plan_reports_no_demotion() -> None:
    graph = helper.make_graph(
        [helper.make_node("Exp", ["x"], ["y"], name="exp")],
        "float32_only",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [4])],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    with warnings.catch_warnings():
        warnings.simplefilter("error", DemotionWarning)
        plan = compile_model(model)
    assert plan.demoted == () and plan.demotion_summary() == ""


def test_float64_input_must_be_float64() -> None:
    """Inputs stay strict: a float32 array for a float64 input is refused, not silently widened."""
    from onyxia.core import InputError

    model, feeds = _model(), _feeds()
    feeds["bias"] = feeds["bias"].astype(np.float32)
    with (
        warnings.catch_warnings(),
        pytest.raises(InputError, match=r"input 'bias': dtype is float32; expected float64"),
    ):
        warnings.simplefilter("ignore", DemotionWarning)
        onyxia_outputs(model, feeds)
