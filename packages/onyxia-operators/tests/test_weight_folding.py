"""Folding of weights alone past FOLD_ELEMENT_LIMIT: a dequantized weight over the limit is computed once at
compile time (no GPU step for its Cast / Sub / Mul / Transpose or DequantizeLinear, and the MatMul reading it
takes it as panels), matching onnxruntime; work that reads a graph input, or weights beyond
WEIGHT_FOLD_ELEMENT_LIMIT, stays on the GPU."""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from onnx import TensorProto, helper, numpy_helper
from oracle import check_model, compile_model

from onyxia.compiler.passes import constant_folding
from onyxia.core import FOLD_ELEMENT_LIMIT, context

RNG = np.random.default_rng(23)
K, N = 1025, 1024  # the int8 weight: just over FOLD_ELEMENT_LIMIT elements


def _model(nodes: list[onnx.NodeProto], inits: dict[str, np.ndarray]) -> onnx.ModelProto:
    graph = helper.make_graph(
        nodes,
        "weights",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["rows", K])],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)


def _lstm_style() -> onnx.ModelProto:
    """DynamicQuantizeLSTM's lowering spelled out: Transpose((Cast(q) - zero point) * scale) feeding a MatMul."""
    q = RNG.integers(-128, 128, (N, K), dtype=np.int8)
    inits = {"q": q, "zp": np.array(3, np.float32), "scale": np.array(0.01, np.float32)}
    nodes = [
        helper.make_node("Cast", ["q"], ["qf"], to=TensorProto.FLOAT),
        helper.make_node("Sub", ["qf", "zp"], ["centred"]),
        helper.make_node("Mul", ["centred", "scale"], ["w_t"]),
        helper.make_node("Transpose", ["w_t"], ["w"], perm=[1, 0]),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    return _model(nodes, inits)


def _qdq_style() -> onnx.ModelProto:
    """A QDQ model's weight: DequantizeLinear per output channel feeding a MatMul."""
    inits = {
        "q": RNG.integers(-128, 128, (K, N), dtype=np.int8),
        "scale": (RNG.random(N) * 0.02 + 0.001).astype(np.float32),
        "zp": RNG.integers(-4, 4, N, dtype=np.int8),
    }
    nodes = [
        helper.make_node("DequantizeLinear", ["q", "scale", "zp"], ["w"], axis=1),
        helper.make_node("MatMul", ["x", "w"], ["y"]),
    ]
    return _model(nodes, inits)


def _ops(model: onnx.ModelProto) -> list[str]:
    return [op.op_type for op in compile_model(model, {"rows": 3}).operations]


# onnxruntime's default graph optimizations turn DequantizeLinear -> MatMul into a product that quantizes x to
# 8 bits as well (0.95 off on outputs of ~90 here); with them disabled it agrees with ONNX's reference to 5e-5,
# as Onyxia does, so the QDQ form is checked against the reference
@pytest.mark.parametrize(("build", "reference"), [(_lstm_style, "ort"), (_qdq_style, "onnx")])
def test_weights_over_the_fold_limit_fold_once(build, reference: str) -> None:  # type: ignore[no-untyped-def]
    model = build()
    assert K * N > FOLD_ELEMENT_LIMIT
    assert _ops(model) == ["MatMul"]
    labels = {s.label for s in compile_model(model, {"rows": 3}).shaders}
    assert all(label.startswith("matmul/matmul_group") for label in labels), labels  # the weight in panels
    feeds = {"x": RNG.standard_normal((3, K)).astype(np.float32)}
    check_model(model, feeds, reference=reference, tolerance=(1e-4, 1e-4))


def test_work_on_a_graph_input_stays_on_the_gpu() -> None:
    """x * (a weight over the limit): one input is the graph's, so the Mul runs on every run."""
    inits = {"w": RNG.standard_normal((2, K * N // 2 + 1)).astype(np.float32)}
    graph = helper.make_graph(
        [helper.make_node("Mul", ["x", "w"], ["y"])],
        "mul",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 1])],
        [helper.make_empty_tensor_value_info("y")],
        [numpy_helper.from_array(v, k) for k, v in inits.items()],
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 21)], ir_version=10)
    assert [op.op_type for op in compile_model(model).operations] == ["Mul"]


def test_weights_beyond_the_weight_fold_limit_stay_on_the_gpu(monkeypatch: pytest.MonkeyPatch) -> None:
    """The limit, lowered below this weight's size, keeps the dequantizing nodes as GPU steps; the result is
    the same."""
    monkeypatch.setattr(constant_folding, "WEIGHT_FOLD_ELEMENT_LIMIT", K * N - 1)
    monkeypatch.setattr(context, "WEIGHT_FOLD_ELEMENT_LIMIT", K * N - 1)
    model = _lstm_style()
    assert "Transpose" in _ops(model) or "MatMulTransB" in _ops(model) or len(_ops(model)) > 1
    check_model(model, {"x": RNG.standard_normal((3, K)).astype(np.float32)}, tolerance=(1e-4, 1e-4))
