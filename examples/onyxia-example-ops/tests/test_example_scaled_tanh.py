"""ScaledTanh through the whole seed flow: ONNX file -> onyxia.onnx -> compiler -> GPU -> numpy.

The model pairs the custom op with a core op (Add), so the test proves a plugin op and the
built-in operators plan into one model. GPU tests run on lavapipe and never skip.
"""

from __future__ import annotations

from importlib.metadata import entry_points
from pathlib import Path
from typing import Any

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper

from onyxia.compiler import CompilerPipeline
from onyxia.core import OnyxiaError, OperatorRegistry
from onyxia.onnx import load_and_parse_model
from onyxia_example_ops import DOMAIN, ScaledTanh

ALPHA, BETA = 1.7, 0.6


def _reference(x: np.ndarray, bias: np.ndarray, alpha: float = ALPHA, beta: float = BETA) -> np.ndarray:
    return (alpha * np.tanh(beta * x.astype(np.float64)) + bias).astype(np.float32)


def _save_model(
    path: Path,
    shape: list[int | str],
    bias: np.ndarray,
    *,
    constant_x: np.ndarray | None = None,
    elem_type: int = TensorProto.FLOAT,
) -> Path:
    """x -> com.example::ScaledTanh(alpha, beta) -> Add(bias) -> y; x may be an initializer."""
    initializers = [numpy_helper.from_array(bias, "bias")]
    inputs = []
    if constant_x is None:
        inputs.append(helper.make_tensor_value_info("x", elem_type, shape))
    else:
        initializers.append(numpy_helper.from_array(constant_x, "x"))
    nodes = [
        helper.make_node("ScaledTanh", ["x"], ["t"], name="custom/ScaledTanh", domain=DOMAIN, alpha=ALPHA, beta=BETA),
        helper.make_node("Add", ["t", "bias"], ["y"], name="core/Add"),
    ]
    graph = helper.make_graph(
        nodes, "scaled_tanh_plus_add", inputs, [helper.make_tensor_value_info("y", elem_type, shape)], initializers
    )
    opsets = [helper.make_opsetid("", 17), helper.make_opsetid(DOMAIN, 1)]
    model = helper.make_model(graph, opset_imports=opsets, producer_name="onyxia-example-ops tests")
    model.ir_version = 9
    onnx.save(model, path)
    return path


def test_entry_point_is_declared_and_discovered(registry: OperatorRegistry) -> None:
    names = {ep.value for ep in entry_points(group="onyxia.operators")}
    assert "onyxia_example_ops:register" in names
    assert isinstance(registry.get(DOMAIN, "ScaledTanh", 1), ScaledTanh)
    assert registry.get("", "Add", 17) is not None


def test_runs_on_gpu_with_a_core_op(tmp_path: Path, registry: OperatorRegistry, runtime: Any) -> None:
    rng = np.random.default_rng(0)
    x = (rng.standard_normal((3, 50)) * 3).astype(np.float32)  # 150 elements: 3 workgroups, ragged tail
    bias = rng.standard_normal(50).astype(np.float32)
    graph = load_and_parse_model(_save_model(tmp_path / "m.onnx", [3, 50], bias))
    compiled = CompilerPipeline(registry).compile(graph, {})
    outputs = runtime.load_model(compiled).run({"x": x})
    np.testing.assert_allclose(outputs["y"], _reference(x, bias), rtol=1e-5, atol=1e-5)


def test_saturates_without_nan(tmp_path: Path, registry: OperatorRegistry, runtime: Any) -> None:
    x = np.array([-1e30, -1e4, -20.0, 0.0, 20.0, 1e4, 1e30], dtype=np.float32)
    bias = np.zeros(7, dtype=np.float32)
    graph = load_and_parse_model(_save_model(tmp_path / "m.onnx", [7], bias))
    outputs = runtime.load_model(CompilerPipeline(registry).compile(graph, {})).run({"x": x})
    np.testing.assert_allclose(outputs["y"], _reference(x, bias), rtol=1e-6, atol=1e-6)


def test_symbolic_length_runs_at_two_sizes(tmp_path: Path, registry: OperatorRegistry, runtime: Any) -> None:
    bias = np.float32(0.25) * np.ones(1, dtype=np.float32)
    graph = load_and_parse_model(_save_model(tmp_path / "m.onnx", ["n"], bias))
    compiled = CompilerPipeline(registry).compile(graph, {})  # n stays symbolic: an immediate
    assert "n" in compiled.symbols
    executor = runtime.load_model(compiled)
    for n in (5, 300):
        x = np.linspace(-4, 4, n, dtype=np.float32)
        executor.update_dimensions({"n": n})
        np.testing.assert_allclose(executor.run({"x": x})["y"], _reference(x, bias), rtol=1e-5, atol=1e-5)


def test_constant_input_folds_on_the_host(tmp_path: Path, registry: OperatorRegistry, runtime: Any) -> None:
    x = np.linspace(-2, 2, 8, dtype=np.float32)
    bias = np.arange(8, dtype=np.float32)
    graph = load_and_parse_model(_save_model(tmp_path / "m.onnx", [8], bias, constant_x=x))
    compiled = CompilerPipeline(registry).compile(graph, {})
    assert not [op for op in compiled.operations if op.op_type == "ScaledTanh"]
    outputs = runtime.load_model(compiled).run({})
    np.testing.assert_allclose(outputs["y"], _reference(x, bias), rtol=1e-6, atol=1e-6)


def test_non_float_input_is_rejected_naming_the_node(tmp_path: Path, registry: OperatorRegistry) -> None:
    bias = np.zeros(4, dtype=np.int32)
    graph = load_and_parse_model(_save_model(tmp_path / "m.onnx", [4], bias, elem_type=TensorProto.INT32))
    with pytest.raises(OnyxiaError, match=r"custom/ScaledTanh.*only FLOAT"):
        CompilerPipeline(registry).compile(graph, {})
