"""com.microsoft MatMulNBits against onnxruntime's CPU kernel at accuracy_level 4 (int8 activations).

onnxruntime quantizes each row of A per block (MLAS CompInt8) when B is a constant and MLAS has the
kernel; its outputs then differ from level 0 by ~0.1 (see `test_level_4_is_not_level_0`), and Onyxia's
must agree to the float rounding of the per-block sums (`INT8_TOLERANCE`): a single int8 value off by
one would show. Where onnxruntime falls back to dequantizing B, both compute in f32.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from oracle import assert_close, check_op, compile_model, make_model, onyxia_outputs, reference_outputs, runtime
from test_matmulnbits_ort import INT8_TOLERANCE, check_matmulnbits, quantized_weights


def _model(a: np.ndarray, n: int, block_size: int, zero_points: str = "none", level: int = 4, **kwargs: object):
    weights = quantized_weights(a.shape[-1], n, block_size, zero_points, a.dtype.type)
    attrs = {"K": a.shape[-1], "N": n, "bits": 4, "block_size": block_size, "accuracy_level": level}
    return make_model(
        "MatMulNBits", {"A": a, **weights}, attrs, domain="com.microsoft", initializers=list(weights), **kwargs
    )


def _labels(model: onnx.ModelProto) -> list[str]:
    return [shader.label for shader in compile_model(model).shaders]


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("zero_points", ["none", "packed"])
@pytest.mark.parametrize("block_size", [16, 32, 64, 128, 256])
def test_block_sizes_and_zero_points(block_size: int, zero_points: str, dtype: type) -> None:
    rng = np.random.default_rng(block_size)
    k = block_size * 5 // 2  # the last block is padded (A's int8 tail is zero)
    for m in (1, 37):  # the decode and the prefill kernel
        a = rng.standard_normal((m, k)).astype(dtype)
        check_matmulnbits(a, 37, block_size, zero_points, accuracy_level=4)


@pytest.mark.parametrize("k", [64, 100, 131])
def test_shapes(k: int) -> None:
    a = np.random.default_rng(k).standard_normal((2, 3, k)).astype(np.float32)
    check_matmulnbits(a, 33, 32, "packed", bias=True, accuracy_level=4)
    check_matmulnbits(a[:1, :1], 33, 16, "none", bias=True, accuracy_level=4)


def test_rounding_edge_cases() -> None:
    """Exact halves (round half to even), all-zero blocks, and magnitudes from 2^-20 to 2^20."""
    k, block_size = 128, 32
    rng = np.random.default_rng(7)
    a = (rng.standard_normal((400, k)) * np.exp2(rng.uniform(-20, 20, (400, 1)))).astype(np.float32)
    a[:40] = rng.integers(-126, 126, (40, k)) + 0.5  # amax 127 below: 127 / amax = 1, a * 1 is a tie
    a[:40, ::block_size] = 127.0
    a[40:50] = 0.0
    a[50:60, :block_size] = 0.0
    a[60:70] = np.float32(3.0) ** rng.integers(-10, 10, (10, k))
    model = _model(a, 40, block_size, "packed")
    (expected,) = reference_outputs(model, {"A": a}, "ort")
    (actual,) = onyxia_outputs(model, {"A": a})
    scale = np.abs(expected).max(axis=1, keepdims=True) + np.finfo(np.float32).tiny  # rows span 2^40
    assert_close(actual / scale, expected / scale, tolerance=INT8_TOLERANCE)


def test_level_4_is_not_level_0() -> None:
    """The int8 activations change the outputs by far more than INT8_TOLERANCE."""
    a = np.random.default_rng(5).standard_normal((1, 640)).astype(np.float32)
    level_0, level_4 = (reference_outputs(_model(a, 256, 32, level=level), {"A": a}, "ort")[0] for level in (0, 4))
    (actual,) = onyxia_outputs(_model(a, 256, 32, level=4), {"A": a})
    assert np.abs(actual - level_4).max() < 1e-4 < 1e-2 < np.abs(actual - level_0).max()


def test_fallbacks_compute_in_f32() -> None:
    """onnxruntime dequantizes B (level 0 numerics) for float zero points, a runtime B, levels 1-3."""
    a = np.random.default_rng(8).standard_normal((3, 96)).astype(np.float32)
    check_matmulnbits(a, 24, 32, "float", accuracy_level=4)
    check_matmulnbits(a, 24, 32, "packed", accuracy_level=4, constant_weights=False)
    for level in (1, 2, 3):
        check_matmulnbits(a, 24, 32, "packed", accuracy_level=level)
    assert "MatMulNBits/quantize" not in _labels(_model(a, 24, 32, "float"))
    assert "MatMulNBits/quantize" not in _labels(_model(a, 24, 32, level=2))
    assert "MatMulNBits/quantize" in _labels(_model(a, 24, 32, level=4))


def test_symbolic_rows_switch_kernels_without_recompiling() -> None:
    k = 64
    model = _model(np.zeros((1, 1, k), np.float32), 24, 32, dim_params={"A": ["batch", "seq", k]})
    executor = runtime().load_model(compile_model(model))
    rng = np.random.default_rng(4)
    for batch, seq in [(1, 1), (2, 37), (4, 1), (7, 1), (1, 1)]:
        a = rng.standard_normal((batch, seq, k)).astype(np.float32)
        (expected,) = reference_outputs(model, {"A": a}, "ort")
        assert_close(executor.run({"A": a})["y0"], expected, tolerance=INT8_TOLERANCE)
        # quantize, then the rows or prefill kernel; decode: the kernel quantizes its row itself
        assert executor.stats.dispatches_encoded == (1 if batch * seq == 1 else 2)
    assert executor.stats.pipelines_created == 5  # quantize, decode, rows4, rows8, prefill


def test_genai_int4_lm_head() -> None:
    """The genai int4 fixture's LM head as stored (accuracy_level 4): real weights, N = 1024."""
    path = Path(__file__).parent / "data" / "gemma3-tiny-genai-int4" / "model.onnx"
    model = onnx.load(path, load_external_data=False)
    tensors = {t.name: t for t in model.graph.initializer}
    node = next(n for n in model.graph.node if n.name == "/lm_head/MatMul_Q4")
    weights = {
        name: numpy_helper.to_array(tensors[node.input[i]], base_dir=str(path.parent))
        for i, name in ((1, "B"), (2, "scales"))
    }
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
    assert attrs["accuracy_level"] == 4
    a = np.random.default_rng(6).standard_normal((1, 3, 64)).astype(np.float32)
    inputs = {"A": a, **weights}
    check_op("MatMulNBits", inputs, attrs, domain="com.microsoft", initializers=list(weights), tolerance=INT8_TOLERANCE)
    check_op("MatMulNBits", {**inputs, "A": a[:, :1]}, attrs, domain="com.microsoft", initializers=list(weights))


@pytest.mark.parametrize(("k", "dispatches"), [(640, 1), (4096, 2)], ids=["in-workgroup", "quantize-dispatch"])
def test_decode_quantizes_in_the_workgroup_when_the_row_fits(k: int, dispatches: int) -> None:
    """One row's int8 values and scales fit 16 KiB of workgroup memory up to K ~ 4000; a longer row is
    quantized by the quantize dispatch, as for prefill. Both give onnxruntime's int8 values."""
    a = np.random.default_rng(k).standard_normal((1, k)).astype(np.float32)
    model = _model(a, 40, 32, "packed")
    executor = runtime().load_model(compile_model(model))
    (expected,) = reference_outputs(model, {"A": a}, "ort")
    assert_close(executor.run({"A": a})["y0"], expected, tolerance=INT8_TOLERANCE)
    assert executor.stats.dispatches_encoded == dispatches
