"""com.microsoft MatMulNBits against onnxruntime's CPU kernel at accuracy_level 0 (float activations;
level 4, int8 activations, is test_matmulnbits_int8.py).

Weights are random nibbles packed as onnxruntime stores them (B [N, n_blocks, block_size / 2], low
nibble first), so every block size, zero-point form, K tail and column count is covered without the
quantizer (which needs onnx_ir).
"""

from __future__ import annotations

import tempfile
from pathlib import Path

import numpy as np
import onnx
import pytest
from onnx import helper, numpy_helper
from oracle import check_op, make_model, reference_outputs, runtime

from onyxia.compiler import CompilerPipeline
from onyxia.core import CompiledModel, TensorRole
from onyxia.onnx import load_and_parse_model
from onyxia.operators import core_operator_registry
from onyxia.operators.matmul.tiles import TILES, Tile

F32_TOLERANCE = (2e-4, 2e-4)  # onnxruntime dequantizes and sums in another order
# accuracy_level 4: the integer block sums are exact, only the float sums of the scaled blocks differ
# (~1e-7 relative); one int8 value off by 1 would move an output by >= scale_a * scale_b ~ 2e-4
INT8_TOLERANCE = (2e-6, 2e-5)


def quantized_weights(
    k: int, n: int, block_size: int, zero_points: str, dtype: type, seed: int = 0
) -> dict[str, np.ndarray]:
    """B, scales and (for "packed" / "float") zero points of a random 4-bit [N, K] weight."""
    rng = np.random.default_rng(seed)
    blocks = -(-k // block_size)
    q = rng.integers(0, 16, size=(n, blocks * block_size), dtype=np.uint8)
    weights = {
        "B": (q[:, 0::2] | (q[:, 1::2] << 4)).reshape(n, blocks, block_size // 2),
        "scales": (rng.random(n * blocks) * 0.1 + 0.01).astype(dtype),
    }
    if zero_points == "packed":
        z = np.zeros((n, blocks + blocks % 2), np.uint8)
        z[:, :blocks] = rng.integers(0, 16, size=(n, blocks))
        weights["zero_points"] = (z[:, 0::2] | (z[:, 1::2] << 4)).reshape(-1)
    elif zero_points == "float":
        weights["zero_points"] = (rng.random(n * blocks) * 15).astype(dtype)
    return weights


def check_matmulnbits(
    a: np.ndarray,
    n: int,
    block_size: int,
    zero_points: str = "none",
    *,
    bias: bool = False,
    constant_weights: bool = True,
    dim_params: dict | None = None,
    accuracy_level: int = 0,
) -> None:
    k = a.shape[-1]
    weights = quantized_weights(k, n, block_size, zero_points, a.dtype.type)
    inputs = {"A": a, **weights}
    if bias:
        inputs.setdefault("zero_points", None)
        inputs |= {"g_idx": None, "bias": np.linspace(-1, 1, n).astype(a.dtype)}
    attrs = {"K": k, "N": n, "bits": 4, "block_size": block_size, "accuracy_level": accuracy_level}
    tolerance = F32_TOLERANCE if a.dtype == np.float32 else None
    if tolerance and accuracy_level == 4 and zero_points != "float" and constant_weights:
        tolerance = INT8_TOLERANCE
    check_op(
        "MatMulNBits",
        inputs,
        attrs,
        domain="com.microsoft",
        initializers=[name for name in inputs if name != "A"] if constant_weights else ["scales"],
        dim_params=dim_params,
        tolerance=tolerance,
    )


@pytest.mark.parametrize("dtype", [np.float32, np.float16])
@pytest.mark.parametrize("zero_points", ["none", "packed", "float"])
@pytest.mark.parametrize("block_size", [16, 32, 64, 128])
def test_block_sizes_and_zero_points(block_size: int, zero_points: str, dtype: type) -> None:
    rng = np.random.default_rng(block_size)
    # K = 2.5 blocks: the last block is padded; N = 37 is no multiple of a thread's 8 columns
    k = block_size * 5 // 2
    check_matmulnbits(rng.standard_normal((1, k)).astype(dtype), 37, block_size, zero_points)
    check_matmulnbits(rng.standard_normal((37, k)).astype(dtype), 37, block_size, zero_points)


@pytest.mark.parametrize("k", [64, 100, 131])  # whole blocks; a tail; an odd K (scalar reads of A)
@pytest.mark.parametrize("m", [1, 2, 5, 37])
def test_shapes(m: int, k: int) -> None:
    a = np.random.default_rng(m + k).standard_normal((m, k)).astype(np.float32)
    check_matmulnbits(a, 33, 32, "packed")


def test_batched_a_with_bias() -> None:
    a = np.random.default_rng(1).standard_normal((2, 3, 96)).astype(np.float32)
    check_matmulnbits(a, 50, 32, "packed", bias=True)
    check_matmulnbits(a.astype(np.float16), 50, 16, "none", bias=True)


def test_runtime_weights_are_read_widened() -> None:
    """B and packed zero points as graph inputs: stored one byte per u32, as any uint8 tensor."""
    a = np.random.default_rng(2).standard_normal((3, 80)).astype(np.float32)
    check_matmulnbits(a, 19, 16, "packed", constant_weights=False)
    check_matmulnbits(a[:1], 19, 16, "packed", constant_weights=False)


def test_split_k_reduction(monkeypatch: pytest.MonkeyPatch) -> None:
    """The SPLIT path (threads sharing a column group's blocks), unused on lavapipe by default."""
    split = (Tile("split", rows=1, wg_x=64, split=4, max_m=1), Tile("split4", rows=4, wg_x=64, split=2))
    monkeypatch.setitem(TILES, "matmul_nbits", split)
    a = np.random.default_rng(3).standard_normal((6, 200)).astype(np.float32)
    check_matmulnbits(a[:1], 45, 16, "packed")
    check_matmulnbits(a, 45, 16, "float")


def test_symbolic_rows_switch_kernels_without_recompiling() -> None:
    """One plan for decode, batched decode (M 2 .. 8: the rows tiles) and prefill: each kernel dispatches zero
    workgroups outside its M range."""
    k, n = 64, 24
    weights = quantized_weights(k, n, 32, "none", np.float32)
    attrs = {"K": k, "N": n, "bits": 4, "block_size": 32}
    a = np.zeros((1, 1, k), np.float32)
    model = make_model(
        "MatMulNBits",
        {"A": a, **weights},
        attrs,
        domain="com.microsoft",
        initializers=list(weights),
        dim_params={"A": ["batch", "seq", k]},
    )
    executor = runtime().load_model(_compile(model))
    rng = np.random.default_rng(4)
    for batch, seq in [(1, 1), (2, 37), (4, 1), (7, 1), (1, 1)]:
        a = rng.standard_normal((batch, seq, k)).astype(np.float32)
        (expected,) = reference_outputs(model, {"A": a}, "ort")
        actual = executor.run({"A": a})["y0"]
        np.testing.assert_allclose(actual, expected, *F32_TOLERANCE)
        assert executor.stats.dispatches_encoded == 1  # the other kernel's dispatch is skipped
    assert executor.stats.pipelines_created == 4  # decode, rows4, rows8, prefill


def test_packed_weights_keep_their_bytes() -> None:
    """B reaches the GPU as u32 words (N padded to whole 64-column panels), not one u32 per byte."""
    weights = quantized_weights(256, 64, 32, "packed", np.float32)
    model = make_model(
        "MatMulNBits",
        {"A": np.zeros((1, 256), np.float32), **weights},
        {"K": 256, "N": 64, "bits": 4, "block_size": 32},
        domain="com.microsoft",
        initializers=list(weights),
    )
    compiled = _compile(model)
    uploaded = {t.name: t.nbytes for t in compiled.tensors.values() if t.role is TensorRole.WEIGHT}
    assert uploaded["B:u32:panels-64-of-64"] == weights["B"].nbytes
    assert uploaded["zero_points:u32"] == weights["zero_points"].nbytes
    assert "B" not in uploaded and "zero_points" not in uploaded


def _compile(model: onnx.ModelProto) -> CompiledModel:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp, "model.onnx")
        onnx.save_model(model, path)
        graph = load_and_parse_model(path)
    return CompilerPipeline(core_operator_registry()).compile(graph, {})


def test_genai_int4_lm_head_weights() -> None:
    """The genai int4 fixture's LM head: real packed weights, 2-D scales [N, n_blocks], N = 1024."""
    path = Path(__file__).parent / "data" / "gemma3-tiny-genai-int4" / "model.onnx"
    model = onnx.load(path, load_external_data=False)
    tensors = {t.name: t for t in model.graph.initializer}
    node = next(n for n in model.graph.node if n.name == "/lm_head/MatMul_Q4")
    weights = {
        name: numpy_helper.to_array(tensors[node.input[i]], base_dir=str(path.parent))
        for i, name in ((1, "B"), (2, "scales"))
    }
    attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute} | {"accuracy_level": 0}
    a = np.random.default_rng(6).standard_normal((1, 3, 64)).astype(np.float32)
    check_op(
        "MatMulNBits",
        {"A": a, **weights},
        attrs,
        domain="com.microsoft",
        initializers=list(weights),
        tolerance=F32_TOLERANCE,
    )
