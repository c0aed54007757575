"""The inverse-trig, hyperbolic and activation rows, PRelu, BitShift and the com.microsoft activations
(onnxruntime's transformer optimizer's) against onnxruntime: random inputs plus edge values (tiny and
huge magnitudes, zeros, infinities, NaN, the domain edges), float16 where onnxruntime runs it, a chain
of them fused into one kernel, and folding of constant inputs."""

from __future__ import annotations

import tempfile
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper
from oracle import assert_close, check_model, check_op, compile_model, make_model, reference_outputs, runtime

from onyxia.compiler import CompilerPipeline
from onyxia.core import InputError, OnyxiaError, OperatorRegistry
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry
from onyxia.operators.elementwise.microsoft import ELEMENTWISE_MS

RNG = np.random.default_rng(16)
# float16 copies of the edge values beyond 65504 are meant to become infinities
pytestmark = pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")

EDGES = np.array(
    [0.0, -0.0, 1e-30, -1e-8, 1e-4, -1e-3, 0.1, -0.5, 0.5, 0.99999, -1.0, 1.0, 1.001, 3.0, -3.0, 9.5, -20.0, 20.0]
    + [88.0, 89.0, -89.0, 1e10, -1e10, 1e30, -1e30, np.inf, -np.inf, np.nan],
    np.float32,
)

UNARY_MATH = ["Tan", "Atan", "Asin", "Acos", "Sinh", "Cosh", "Asinh", "Acosh", "Atanh"]
ACTIVATIONS = ["Mish", "Softsign", "Elu", "Celu", "Selu", "ThresholdedRelu", "Shrink", "IsInf"]
ATTRS: dict[str, list[dict[str, Any]]] = {
    "Elu": [{"alpha": 0.3}],
    "Celu": [{"alpha": 2.5}],
    "Selu": [{"alpha": 2.0, "gamma": 3.0}],
    "ThresholdedRelu": [{"alpha": -0.5}],
    "Shrink": [{"lambd": 1.5, "bias": 0.25}],
    "IsInf": [{"detect_positive": 0}, {"detect_negative": 0}],
}
CASES = [(op, attrs) for op in UNARY_MATH + ACTIVATIONS for attrs in [{}, *ATTRS.get(op, [])]]


def _values(op: str, dtype: type) -> np.ndarray:
    """The edge values and 64 random ones, drawn where the op is defined (and a little beyond)."""
    edges = EDGES
    if op == "Tan":  # WGSL's range reduction, like its sin and cos, is precise for |x| up to about 1e5
        edges = edges[np.isnan(edges) | np.isinf(edges) | (np.abs(edges) < 1e5)]
    spread = {
        "Asin": RNG.uniform(-1.2, 1.2, 64),
        "Acos": RNG.uniform(-1.2, 1.2, 64),
        "Atanh": RNG.uniform(-1.2, 1.2, 64),
    }
    spread["Acosh"] = RNG.uniform(0.5, 30.0, 64)
    random = spread.get(op, RNG.standard_normal(64) * 3)
    return np.concatenate([edges, random]).astype(dtype)


@pytest.mark.parametrize(("op", "attrs"), CASES, ids=str)
def test_float32_edges_and_random(op: str, attrs: dict[str, Any]) -> None:
    check_op(op, {"x": _values(op, np.float32)}, attrs)


@pytest.mark.parametrize("op", [op for op in UNARY_MATH + ACTIVATIONS if op != "Celu"])  # onnxruntime: float only
def test_float16_computes_in_float32_like_onnxruntime(op: str) -> None:
    check_op(op, {"x": _values(op, np.float16).reshape(4, -1)}, ATTRS.get(op, [{}])[0])


@pytest.mark.parametrize("dtype", [np.int32, np.int8, np.uint8, np.int64])
def test_shrink_of_integers_compares_and_adds_in_float(dtype: type) -> None:
    info = np.iinfo(dtype)
    x: np.ndarray = RNG.integers(max(info.min, -100), min(info.max, 100), (5, 6)).astype(dtype)
    check_op("Shrink", {"x": x}, {"lambd": 1.5, "bias": 2.5} if info.min < 0 else {"lambd": 3.0, "bias": 0.5})


@pytest.mark.parametrize(
    ("x_shape", "slope_shape"), [((2, 3, 4, 5), (3, 1, 1)), ((2, 3, 4), (4,)), ((2, 3), ()), ((3, 4), (3, 4))], ids=str
)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_prelu_broadcasts_the_slope_to_x(x_shape: tuple, slope_shape: tuple, dtype: type) -> None:
    x = np.concatenate([EDGES[: int(np.prod(x_shape))], RNG.standard_normal(int(np.prod(x_shape)))])
    slope: np.ndarray = RNG.standard_normal(slope_shape).astype(dtype)
    check_op("PRelu", {"x": x[: int(np.prod(x_shape))].reshape(x_shape).astype(dtype), "slope": slope})


def test_prelu_int32_against_the_onnx_reference() -> None:  # onnxruntime's PRelu is float only
    x = RNG.integers(-50, 50, (3, 4)).astype(np.int32)
    check_op("PRelu", {"x": x, "slope": np.array([2, -3, 0, 5], np.int32)}, reference="onnx")


def test_prelu_slope_that_does_not_broadcast_to_x_is_refused() -> None:
    model = make_model("PRelu", {"x": np.zeros((2, 4), np.float32), "slope": np.zeros((2, 1, 4), np.float32)})
    with pytest.raises(OnyxiaError, match=r"PRelu.*slope|slope.*PRelu"):
        compile_model(model)


_SHIFT_TYPES = [np.uint8, np.uint16, np.uint32, np.int8, np.int16, np.int32, np.int64]


@pytest.mark.parametrize("direction", ["LEFT", "RIGHT"])
@pytest.mark.parametrize("dtype", _SHIFT_TYPES)
def test_bit_shift(direction: str, dtype: type) -> None:
    """Widths of every stored type, bits pushed past the width and the sign bit, shifts of the width or
    more and negative shifts (opset 28); int64 left shifts only within the 32 bits Onyxia computes in."""
    info, bits = np.iinfo(dtype), 8 * np.dtype(dtype).itemsize
    x: np.ndarray = RNG.integers(max(info.min, -(2**20)), min(info.max, 2**20), (4, 16)).astype(dtype)
    amounts = RNG.integers(0, min(bits, 32) + 8, (16,))
    if np.issubdtype(dtype, np.signedinteger):
        amounts[:3] = [-1, -40, bits]
    if dtype == np.int64 and direction == "LEFT":
        x, amounts = (x % 256).astype(dtype), np.where((amounts >= 0) & (amounts < 64), amounts % 20, amounts)
    check_op("BitShift", {"x": x, "y": amounts.astype(dtype)}, {"direction": direction}, opset=28)


def test_int64_left_shift_past_32_bits_is_reported() -> None:
    model = make_model(
        "BitShift", {"x": np.ones(2, np.int64), "y": np.ones(2, np.int64)}, {"direction": "LEFT"}, opset=28
    )
    executor = runtime().load_model(compile_model(model))
    with pytest.raises(InputError, match=r"BitShift.*32-bit range"):
        executor.run({"x": np.array([1, 3], np.int64), "y": np.array([4, 40], np.int64)})


def test_fused_chain_is_one_kernel() -> None:
    """Atan -> Mish -> Add(y) and Elu -> PRelu(slope) -> IsInf -> Where: each chain is one FusedElementwise
    kernel, equal to onnxruntime."""
    nodes = [
        helper.make_node("Atan", ["x"], ["a"]),
        helper.make_node("Mish", ["a"], ["m"]),
        helper.make_node("Add", ["m", "y"], ["s"]),
        helper.make_node("Elu", ["s"], ["e"], alpha=0.5),
        helper.make_node("PRelu", ["e", "slope"], ["p"]),
        helper.make_node("Asinh", ["p"], ["out"]),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, ["n", 8]),
        helper.make_tensor_value_info("y", TensorProto.FLOAT, [8]),
        helper.make_tensor_value_info("slope", TensorProto.FLOAT, [1]),
    ]
    graph = helper.make_graph(nodes, "chain", inputs, [helper.make_tensor_value_info("out", TensorProto.FLOAT, None)])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    assert compile_model(model, {"n": 6}).dispatch_count == 1
    x = np.concatenate([EDGES[:24], RNG.standard_normal(24) * 4]).astype(np.float32).reshape(6, 8)
    feeds = {"x": x, "y": RNG.standard_normal(8).astype(np.float32), "slope": np.array([0.25], np.float32)}
    check_model(model, feeds, dims={"n": 6})


def test_constant_inputs_fold_on_the_host() -> None:
    """Asinh and Mish of an initializer fold (numpy, float64): only the Add reading x runs on the GPU."""
    c = (RNG.standard_normal((3, 4)) * 10).astype(np.float32)
    nodes = [
        helper.make_node("Asinh", ["c"], ["a"]),
        helper.make_node("Mish", ["a"], ["m"]),
        helper.make_node("Add", ["m", "x"], ["out"]),
    ]
    x_info = helper.make_tensor_value_info("x", TensorProto.FLOAT, [3, 4])
    out_info = helper.make_tensor_value_info("out", TensorProto.FLOAT, None)
    graph = helper.make_graph(nodes, "fold", [x_info], [out_info], [onnx.numpy_helper.from_array(c, "c")])
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    assert compile_model(model).dispatch_count == 1
    check_model(model, {"x": RNG.standard_normal((3, 4)).astype(np.float32)})


# ----- com.microsoft -----------------------------------------------------------------------------
def _ms_registry() -> OperatorRegistry:
    registry = core_operator_registry()
    if registry.get("com.microsoft", "FastGelu") is None:  # until the core registry lists ELEMENTWISE_MS
        registry.register_family("com.microsoft", ELEMENTWISE_MS)
    return registry


def _ms_model(op: str, inputs: dict[str, np.ndarray], attrs: dict[str, Any]) -> onnx.ModelProto:
    node = helper.make_node(op, list(inputs), ["y"], domain="com.microsoft", **attrs)
    dtype = helper.np_dtype_to_tensor_dtype(next(iter(inputs.values())).dtype)
    infos = [helper.make_tensor_value_info(k, dtype, v.shape) for k, v in inputs.items()]
    graph = helper.make_graph([node], op, infos, [helper.make_tensor_value_info("y", dtype, None)])
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def _onyxia(model: onnx.ModelProto, feeds: dict[str, np.ndarray]) -> np.ndarray:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "model.onnx")
        onnx.save_model(model, path)
        graph = load_and_parse_model(path)
    compiled = CompilerPipeline(_ms_registry()).compile(graph, {})
    return np.asarray(runtime().load_model(compiled).run(feeds)["y"])


MS_CASES = [
    ("Gelu", ["x"], {}),
    ("BiasGelu", ["x", "bias"], {}),
    ("FastGelu", ["x"], {}),
    ("FastGelu", ["x", "bias"], {}),
    ("QuickGelu", ["x"], {}),
    ("QuickGelu", ["x"], {"alpha": 1.5}),
]


@pytest.mark.parametrize(("op", "names", "attrs"), MS_CASES, ids=str)
@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_microsoft_activations(op: str, names: list[str], attrs: dict[str, Any], dtype: type) -> None:
    x: np.ndarray = np.concatenate([EDGES, RNG.standard_normal(20) * 3]).astype(dtype).reshape(2, 3, 8)
    inputs = {"x": x, "bias": RNG.standard_normal(8).astype(dtype)}
    inputs = {k: inputs[k] for k in names}
    model = _ms_model(op, inputs, attrs)
    assert_close(_onyxia(model, inputs), reference_outputs(model, inputs, "ort")[0], op)


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
def test_bias_add_equals_the_two_adds(dtype: type) -> None:
    """onnxruntime's CPU provider has no BiasAdd kernel: the oracle is its x + bias + skip as two Adds."""
    inputs: dict[str, np.ndarray] = {
        "x": RNG.standard_normal((2, 3, 8)).astype(dtype),
        "bias": RNG.standard_normal(8).astype(dtype),
        "skip": RNG.standard_normal((2, 3, 8)).astype(dtype),
    }
    plain = helper.make_graph(
        [helper.make_node("Add", ["x", "bias"], ["t"]), helper.make_node("Add", ["t", "skip"], ["y"])],
        "adds",
        [
            helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype), v.shape)
            for k, v in inputs.items()
        ],
        [helper.make_tensor_value_info("y", helper.np_dtype_to_tensor_dtype(np.dtype(dtype)), None)],
    )
    expected = reference_outputs(helper.make_model(plain, opset_imports=[helper.make_opsetid("", 17)]), inputs, "ort")
    assert_close(_onyxia(_ms_model("BiasAdd", inputs, {}), inputs), expected[0], "BiasAdd")


def test_microsoft_rows_fold_constant_inputs() -> None:
    x = RNG.standard_normal((2, 4)).astype(np.float32)
    node = helper.make_node("FastGelu", ["c", "bias"], ["y"], domain="com.microsoft")
    inits = [onnx.numpy_helper.from_array(x, "c"), onnx.numpy_helper.from_array(x[0], "bias")]
    graph = helper.make_graph([node], "fold", [], [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)], inits)
    model = helper.make_model(
        graph, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)], ir_version=10
    )
    assert_close(_onyxia(model, {}), reference_outputs(model, {}, "ort")[0], "FastGelu")


def test_microsoft_row_with_a_missing_required_input_is_refused() -> None:
    model = _ms_model("BiasGelu", {"x": np.zeros((2, 4), np.float32)}, {})
    with pytest.raises(OnyxiaError, match=r"BiasGelu.*has 1 inputs; expected 2"):
        _onyxia(model, {"x": np.zeros((2, 4), np.float32)})
