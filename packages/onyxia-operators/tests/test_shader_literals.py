"""Values in shaders (issue 15): attribute values and constants reach WGSL as typed literals that
compile, inf, NaN and extreme magnitudes included, and compute what onnxruntime computes; values a
shader type cannot hold, and dims beyond the kernels' u32 indices, are compile-time errors naming the
node. Before `onyxia.core.wgsl_literal` these models passed `onyxia validate` and then failed at load
inside the WGSL compiler ("unknown identifier `inf`", "literal not representable")."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from fusion_models import check_fused, graph_model, ops_of
from onnx import TensorProto, helper
from oracle import adapter_is_cpu, check_model, check_op, compile_model, make_model

from onyxia.core import PlanningError, ShapeInferenceError

INF, NAN = float("inf"), float("nan")
RNG = np.random.default_rng(15)
X = np.array([-3.0, -1.0, -1e-30, -0.0, 0.0, 1e-30, 0.5, 2.0, 1e30, -1e30, INF, -INF, NAN], np.float32)
with np.errstate(over="ignore"):  # +-1e30 become +-inf in float16, on purpose
    X16 = X.astype(np.float16)


def _x(dtype: type) -> np.ndarray:
    return X16 if dtype == np.float16 else X


@pytest.mark.parametrize("alpha", [INF, -INF, NAN, 1e38, -1e38, 3.4028235e38, 1e-45, 0.1])
def test_leaky_relu_alpha(alpha: float) -> None:
    x = X
    if 0 < abs(alpha) < np.finfo(np.float32).tiny and not adapter_is_cpu():
        # The denormal's point is its literal, checked everywhere. WGSL lets a GPU flush it to 0 (NVIDIA does), and
        # then alpha * -inf is 0 * inf and alpha * NaN goes through a flushed operand: neither has a defined value
        # there (an H200 gave 1.4e-45 for both); the finite products stay within the tolerance of onnxruntime's
        x = X[np.isfinite(X) | (X > 0)]
    check_op("LeakyRelu", {"x": x}, {"alpha": alpha})


@pytest.mark.parametrize("alpha", [1e5, INF, NAN])
def test_leaky_relu_float16_alpha_beyond_f16(alpha: float) -> None:
    """onnxruntime runs LeakyRelu in float32 for a float16 model; the f16 range does not bound alpha."""
    check_op("LeakyRelu", {"x": X16}, {"alpha": alpha})


@pytest.mark.parametrize(
    ("lo", "hi"),
    [(-INF, INF), (-INF, 0.5), (-0.5, INF), (-1e38, 1e38), (NAN, 1.0), (2.0, -2.0)],
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_clip_bounds(lo: float, hi: float, dtype: type) -> None:
    with np.errstate(over="ignore"):  # +-1e38 is beyond float16: +-inf there, as the model stores it
        bounds = {"lo": np.array(lo, dtype), "hi": np.array(hi, dtype)}
    check_op("Clip", {"x": _x(dtype), **bounds}, initializers=["lo", "hi"])


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_clip_with_one_bound_omitted(dtype: type) -> None:
    """The missing bound is the dtype's own extreme: f32's 3.4e38 is no f16 literal."""
    x = _x(dtype)
    check_op("Clip", {"x": x, "lo": np.array(-1.0, dtype), "hi": None}, initializers=["lo"])
    check_op("Clip", {"x": x, "lo": None, "hi": np.array(1.0, dtype)}, initializers=["hi"])


def test_clip_int64_bounds_beyond_i32() -> None:
    """int64 lives as i32 on the GPU: a bound beyond i32 clips every value the storage holds alike."""
    x = np.array([-(2**31), -5, 0, 7, 2**31 - 1], np.int64)
    lo, hi = np.array(-(2**40), np.int64), np.array(2**40, np.int64)
    check_op("Clip", {"x": x, "lo": lo, "hi": hi}, initializers=["lo", "hi"])


def test_clip_with_inf_bounds_and_leaky_relu_nan_inside_a_fused_chain() -> None:
    nodes = [
        helper.make_node("Mul", ["x", "w"], ["t"]),
        helper.make_node("Clip", ["t", "lo", "hi"], ["c"]),
        helper.make_node("LeakyRelu", ["c"], ["l"], alpha=-INF),
        helper.make_node("Clip", ["l", "lo2", ""], ["y"]),
    ]
    model = graph_model(
        nodes,
        {"x": (np.float32, ["n"])},
        {"w": np.float32(3.0), "lo": np.float32(-INF), "hi": np.float32(INF), "lo2": np.float32(NAN)},
        ["y"],
    )
    assert ops_of(compile_model(model, {"n": 4})) == ["FusedElementwise"]
    check_fused(model, [{"x": X}, {"x": RNG.standard_normal(40).astype(np.float32)}], {"FuseElementwise"})


@pytest.mark.parametrize("alpha", [INF, NAN, 1e38])
def test_gemm_alpha_beta(alpha: float) -> None:
    a, b = RNG.standard_normal((3, 4)).astype(np.float32), RNG.standard_normal((4, 2)).astype(np.float32)
    c = RNG.standard_normal((2,)).astype(np.float32)
    check_op("Gemm", {"a": a, "b": b, "c": c}, {"alpha": alpha, "beta": -alpha})


@pytest.mark.parametrize("epsilon", [INF, NAN, 1e38, 1e-45])
def test_layer_normalization_epsilon(epsilon: float) -> None:
    x = RNG.standard_normal((2, 8)).astype(np.float32)
    scale, bias = np.ones(8, np.float32), np.zeros(8, np.float32)
    check_op(
        "LayerNormalization",
        {"x": x, "scale": scale, "bias": bias},
        {"epsilon": epsilon},
        initializers=["scale", "bias"],
    )


@pytest.mark.parametrize("value", [INF, -INF, NAN, 3.4e38])
def test_pad_constant_value(value: float) -> None:
    x = RNG.standard_normal((2, 3)).astype(np.float32)
    pads, constant = np.array([1, 0, 0, 2], np.int64), np.array(value, np.float32)
    check_op("Pad", {"x": x, "pads": pads, "value": constant}, initializers=["pads", "value"])


def _constant_of_shape(value: onnx.TensorProto) -> onnx.ModelProto:
    """ConstantOfShape over Shape(x) of a symbolic x: planned as a fill shader, not folded."""
    nodes = [helper.make_node("Shape", ["x"], ["s"]), helper.make_node("ConstantOfShape", ["s"], ["y"], value=value)]
    nodes[1].name = "node"
    return graph_model(nodes, {"x": (np.float32, ["n", 3])}, {}, ["y"])


@pytest.mark.parametrize("value", [INF, -INF, NAN, 1e38])
def test_constant_of_shape_float_value(value: float) -> None:
    model = _constant_of_shape(helper.make_tensor("v", TensorProto.FLOAT, [1], [value]))
    check_model(model, {"x": np.zeros((2, 3), np.float32)})


@pytest.mark.parametrize("value", [-(2**31), 2**31 - 1])
def test_constant_of_shape_int32_extremes(value: int) -> None:
    model = _constant_of_shape(helper.make_tensor("v", TensorProto.INT32, [1], [value]))
    check_model(model, {"x": np.zeros((2, 3), np.float32)})


def test_int64_fill_beyond_i32_is_a_compile_error_naming_the_node() -> None:
    model = _constant_of_shape(helper.make_tensor("v", TensorProto.INT64, [1], [2**40]))
    with pytest.raises(PlanningError, match=r"node 'node' \(ConstantOfShape\): attribute 'value'.*1099511627776"):
        compile_model(model)


def _one_node(
    op: str, inputs: list[str], types: dict[str, tuple[int, list[int | str]]], attrs: dict
) -> onnx.ModelProto:
    graph = helper.make_graph(
        [helper.make_node(op, inputs, ["y"], name="node", **attrs)],
        "g",
        [helper.make_tensor_value_info(n, t, d) for n, (t, d) in types.items()],
        [helper.make_empty_tensor_value_info("y")],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


@pytest.mark.parametrize("n", [2**30, 2**32, 2**40])
def test_dim_beyond_u32_is_a_compile_error_naming_node_and_dim(n: int) -> None:
    """Relu over [n, 4]: its element count 4n goes into the shader as a u32 dim."""
    model = _one_node("Relu", ["x"], {"x": (TensorProto.FLOAT, ["n", 4])}, {})
    with pytest.raises(PlanningError, match=rf"node 'node' \(Relu\): shader '[^']+': dim N = {4 * n} does not fit"):
        compile_model(model, {"n": n})


def test_small_dims_still_compile_and_run() -> None:
    model = _one_node("Relu", ["x"], {"x": (TensorProto.FLOAT, ["n", 4])}, {})
    check_model(model, {"x": RNG.standard_normal((3, 4)).astype(np.float32)}, dims={"n": 3})


def test_a_string_attribute_outside_the_spec_fails_at_compile_time_naming_it() -> None:
    """Strings are pasted into WGSL names (gelu_none / gelu_tanh): any other value is refused first."""
    model = make_model("Gelu", {"x": np.ones((2, 3), np.float32)}, {"approximate": "bogus"}, opset=20)
    with pytest.raises(ShapeInferenceError, match=r"Gelu.*attribute approximate='bogus' is not one of none, tanh"):
        compile_model(model)
