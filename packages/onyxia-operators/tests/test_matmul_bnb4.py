"""com.microsoft MatMulBnb4 against onnxruntime's CPU kernel, on weights quantized by onnxruntime's own
bnb4 quantizer (`MatMulBnb4Quantizer.bnb4_block_quant`, what transformers.js' quantize script runs).

FP4 and NF4, every block size onnxruntime implements, K a multiple of block_size (the MatMulNBits
geometry) and not (flat blocks straddling columns: the kernel runs at gcd(K, block_size)), decode and
prefill rows, B as a runtime input, and the refusals naming node, attribute or input.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from fusion_models import check_fused, graph_model, ops_of, plan_without
from onnx import helper, numpy_helper
from onnxruntime.quantization.matmul_bnb4_quantizer import MatMulBnb4Quantizer
from oracle import check_op, compile_model, make_model, onyxia_outputs, reference_outputs, runtime

from onyxia.core import ShapeInferenceError, UnsupportedOpError

# onnxruntime dequantizes B to f32 and runs an SGEMM; the kernel sums absmax * sum(a * code) per block
TOLERANCE = (2e-5, 2e-5)


def bnb4_weights(k: int, n: int, block_size: int, quant_type: int, seed: int = 0) -> dict[str, np.ndarray]:
    """B and absmax of a random [K, N] MatMul weight, quantized by onnxruntime's quantizer."""
    w = np.random.default_rng(seed).standard_normal((k, n)).astype(np.float32)
    packed, absmax = MatMulBnb4Quantizer(onnx.ModelProto(), quant_type, block_size).bnb4_block_quant(w)
    return {"B": packed, "absmax": absmax}


def check_bnb4(a: np.ndarray, n: int, block_size: int, quant_type: int, *, constant_b: bool = True) -> None:
    k = a.shape[-1]
    weights = bnb4_weights(k, n, block_size, quant_type, seed=k + n)
    attrs = {"K": k, "N": n, "block_size": block_size, "quant_type": quant_type}
    check_op(
        "MatMulBnb4",
        {"A": a, **weights},
        attrs,
        domain="com.microsoft",
        initializers=["B", "absmax"] if constant_b else ["absmax"],
        tolerance=TOLERANCE,
    )


@pytest.mark.parametrize("quant_type", [0, 1], ids=["fp4", "nf4"])
@pytest.mark.parametrize("block_size", [16, 32, 64, 128, 256])
def test_block_sizes(block_size: int, quant_type: int) -> None:
    rng = np.random.default_rng(block_size + quant_type)
    k = 2 * block_size  # whole blocks per column; N = 37 is no multiple of a thread's 8 columns
    check_bnb4(rng.standard_normal((1, k)).astype(np.float32), 37, block_size, quant_type)
    check_bnb4(rng.standard_normal((2, 9, k)).astype(np.float32), 37, block_size, quant_type)


@pytest.mark.parametrize("quant_type", [0, 1], ids=["fp4", "nf4"])
@pytest.mark.parametrize(("k", "block_size"), [(72, 64), (48, 32), (200, 128), (96, 256)])
def test_k_not_a_multiple_of_block_size(k: int, block_size: int, quant_type: int) -> None:
    """Blocks straddle columns: absmax is gathered per run of gcd(K, block_size) elements (8, 16, 8, 32)."""
    rng = np.random.default_rng(k)
    check_bnb4(rng.standard_normal((1, k)).astype(np.float32), 21, block_size, quant_type)
    check_bnb4(rng.standard_normal((5, k)).astype(np.float32), 21, block_size, quant_type)


def test_runtime_b_is_read_widened() -> None:
    """B as a graph input: stored one byte per u32 and read through B_WIDENED."""
    a = np.random.default_rng(2).standard_normal((3, 128)).astype(np.float32)
    check_bnb4(a, 19, 64, 1, constant_b=False)
    check_bnb4(a[:1], 19, 64, 0, constant_b=False)


def test_symbolic_rows_switch_kernels_without_recompiling() -> None:
    """One plan for decode, batched decode and prefill, as MatMulNBits: the other tiles dispatch zero workgroups."""
    k, n = 128, 40
    weights = bnb4_weights(k, n, 64, 1)
    attrs = {"K": k, "N": n, "block_size": 64, "quant_type": 1}
    model = make_model(
        "MatMulBnb4",
        {"A": np.zeros((1, 1, k), np.float32), **weights},
        attrs,
        domain="com.microsoft",
        initializers=list(weights),
        dim_params={"A": ["batch", "seq", k]},
    )
    executor = runtime().load_model(compile_model(model, None))
    created = executor.stats.pipelines_created  # one per tile (decode, batched-decode rows, prefill)
    rng = np.random.default_rng(4)
    for batch, seq in [(1, 1), (2, 13), (1, 1), (4, 1), (8, 1)]:
        a = rng.standard_normal((batch, seq, k)).astype(np.float32)
        (expected,) = reference_outputs(model, {"A": a}, "ort")
        np.testing.assert_allclose(executor.run({"A": a})["y0"], expected, *TOLERANCE)
        assert executor.stats.dispatches_encoded == 1
    assert executor.stats.pipelines_created == created  # the runs switched tiles, compiled none


def _model(
    attrs: dict,
    *,
    k: int = 64,
    n: int = 8,
    a_k: int = 64,
    a_type: int = onnx.TensorProto.FLOAT,
    b_bytes: int | None = None,
    absmax_input: bool = False,
) -> onnx.ModelProto:
    block_size = attrs.get("block_size", 32)
    blocks = -(-n * k // block_size) if block_size > 0 else 1
    initializers = [numpy_helper.from_array(np.zeros(b_bytes or (n * k + 1) // 2, np.uint8), "B")]
    inputs = [helper.make_tensor_value_info("A", a_type, [1, a_k])]
    if absmax_input:
        inputs.append(helper.make_tensor_value_info("absmax", onnx.TensorProto.FLOAT, [blocks]))
    else:
        absmax_dtype = helper.tensor_dtype_to_np_dtype(a_type)  # T1: A's type
        initializers.append(numpy_helper.from_array(np.ones(blocks, absmax_dtype), "absmax"))
    node = helper.make_node(
        "MatMulBnb4",
        ["A", "B", "absmax"],
        ["y"],
        name="layers.0/q_proj",
        domain="com.microsoft",
        **({"K": k, "N": n, "block_size": 32, "quant_type": 1} | attrs),
    )
    graph = helper.make_graph([node], "g", inputs, [helper.make_empty_tensor_value_info("y")], initializers)
    opsets = [helper.make_opsetid("", 21), helper.make_opsetid("com.microsoft", 1)]
    return helper.make_model(graph, opset_imports=opsets, ir_version=10)


def _compile(model: onnx.ModelProto, feeds: dict | None = None) -> None:
    onyxia_outputs(model, feeds or {"A": np.zeros((1, 64), np.float32)})


_WHERE = r"node 'layers.0/q_proj' \(MatMulBnb4"


@pytest.mark.parametrize(
    ("attrs", "message"),
    [
        ({"quant_type": 2}, r"attribute 'quant_type' = 2; expected 0 \(FP4\) or 1 \(NF4\)"),
        ({"block_size": 48}, r"attribute 'block_size' = 48; expected one of 16, 32, 64, 128, 256"),
    ],
)
def test_bad_attributes_are_named(attrs: dict, message: str) -> None:
    with pytest.raises(ShapeInferenceError, match=f"{_WHERE}.*{message}"):
        _compile(_model(attrs))


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ShapeInferenceError, match=rf"{_WHERE}.*input 1 has 200 elements; expected .* = 256"):
        _compile(_model({}, b_bytes=200))
    with pytest.raises(ShapeInferenceError, match=rf"{_WHERE}.*input 0 \(A\) has last dim 32; expected attribute K"):
        _compile(_model({}, a_k=32), {"A": np.zeros((1, 32), np.float32)})


def test_unsupported_forms_are_named() -> None:
    with pytest.raises(UnsupportedOpError, match=rf"{_WHERE}.*attribute 'transB' = 0 is not implemented"):
        _compile(_model({"transB": 0}))
    f16 = {"A": np.zeros((1, 64), np.float16)}
    with pytest.raises(UnsupportedOpError, match=rf"{_WHERE}.*input 0 \(A\) dtype float16 is not implemented"):
        _compile(_model({}, a_type=onnx.TensorProto.FLOAT16), f16)
    with pytest.raises(UnsupportedOpError, match=rf"{_WHERE}.*K = 20 with block_size 16: blocks straddle"):
        _compile(_model({"K": 20, "block_size": 16}, k=20, a_k=20), {"A": np.zeros((1, 20), np.float32)})
    runtime_absmax = _model({"K": 72, "block_size": 64}, k=72, a_k=72, absmax_input=True)
    feeds = {"A": np.zeros((1, 72), np.float32), "absmax": np.ones(9, np.float32)}
    with pytest.raises(UnsupportedOpError, match=rf"{_WHERE}.*input 2 \(absmax\) is only known at run time"):
        _compile(runtime_absmax, feeds)


def _bnb4_nodes(ns: tuple[int, ...], k: int, block_size: int, quant_type: int) -> tuple[list, dict[str, np.ndarray]]:
    nodes, initializers = [], {}
    for i, n in enumerate(ns):
        weights = bnb4_weights(k, n, block_size, quant_type, seed=i)
        initializers |= {f"B{i}": weights["B"], f"absmax{i}": weights["absmax"]}
        attrs = {"K": k, "N": n, "block_size": block_size, "quant_type": quant_type}
        nodes.append(
            helper.make_node("MatMulBnb4", ["x", f"B{i}", f"absmax{i}"], [f"y{i}"], domain="com.microsoft", **attrs)
        )
    return nodes, initializers


@pytest.mark.parametrize("quant_type", [0, 1], ids=["fp4", "nf4"])
def test_siblings_group_into_one_dispatch(quant_type: int) -> None:
    """q/k/v MatMulBnb4 of one activation: one MatMulNBitsGroup (attribute quant_type), bit for bit the
    ungrouped plan and within TOLERANCE of onnxruntime, decode and prefill of one symbolic plan."""
    nodes, initializers = _bnb4_nodes((48, 16, 16), 128, 64, quant_type)
    model = graph_model(nodes, {"x": (np.float32, ["seq", 128])}, initializers, ["y0", "y1", "y2"])
    assert ops_of(compile_model(model)) == ["MatMulNBitsGroup"]
    assert ops_of(plan_without(model, {"GroupMatMuls"})) == ["MatMulBnb4"] * 3
    feeds = [{"x": np.random.default_rng(m).standard_normal((m, 128)).astype(np.float32)} for m in (1, 19, 1)]
    check_fused(model, feeds, {"GroupMatMuls"}, TOLERANCE)


def test_gelu_gate_fuses_over_a_bnb4_group() -> None:
    """Gemma's MLP, Mul(Gelu(x @ gate), x @ up), over bnb4 weights: one GatedMatMulNBits."""
    nodes, initializers = _bnb4_nodes((40, 40), 64, 64, 1)
    nodes += [
        helper.make_node("Gelu", ["y0"], ["g"], approximate="tanh"),
        helper.make_node("Mul", ["g", "y1"], ["y"]),
    ]
    model = graph_model(nodes, {"x": (np.float32, ["seq", 64])}, initializers, ["y"])
    assert ops_of(compile_model(model)) == ["GatedMatMulNBits"]
    feeds = [{"x": np.random.default_rng(m).standard_normal((m, 64)).astype(np.float32)} for m in (1, 7)]
    check_fused(model, feeds, {"GroupMatMuls", "FuseMlpGate"}, TOLERANCE)


def test_k_not_a_multiple_of_block_size_stays_ungrouped() -> None:
    """Flat blocks straddling columns are not MatMulNBits' geometry: the siblings keep their own kernels."""
    nodes, initializers = _bnb4_nodes((24, 24), 72, 64, 1)
    model = graph_model(nodes, {"x": (np.float32, ["seq", 72])}, initializers, ["y0", "y1"])
    assert ops_of(compile_model(model)) == ["MatMulBnb4"] * 2
