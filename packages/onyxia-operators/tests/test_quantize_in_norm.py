"""QuantizeInNorm: a norm feeding a 4-bit product at accuracy_level 4 writes A's int8 rows itself (com.onyxia
<norm>Int8A), so the product (quantized_a = 1) runs no quantize dispatch: the rule fires for each norm form a
decoder has (a plain RMS norm, genai's Skip*, Gemma's NormAddNorm) feeding a q/k/v group and a gated MLP; it
declines where the product multiplies in f32; and the outputs are onnxruntime's and, bit for bit, the plan's
without the pass, at every M a session runs (decode, the rows tiles of a batched step, prefill)."""

from __future__ import annotations

import logging

import numpy as np
import onnx
import pytest
from fusion_models import check_fused, graph_model, ops_of, plan_without
from onnx import helper
from oracle import compile_model, runtime
from test_matmulnbits_ort import quantized_weights

MS = "com.microsoft"
SLN = "SimplifiedLayerNormalization"
RNG = np.random.default_rng(41)


def _product(name: str, a: str, n: int, k: int, block: int, dtype: type, inits: dict, level: int = 4, bias=False):
    weights = quantized_weights(k, n, block, "none", dtype, seed=len(inits))
    inits[f"{name}_B"], inits[f"{name}_s"] = weights["B"], weights["scales"]
    inputs = [a, f"{name}_B", f"{name}_s"]
    if bias:
        inits[f"{name}_bias"] = RNG.standard_normal(n).astype(dtype)
        inputs += ["", "", f"{name}_bias"]
    attrs = {"K": k, "N": n, "bits": 4, "block_size": block, "accuracy_level": level}
    return helper.make_node("MatMulNBits", inputs, [name], domain=MS, **attrs)


def _decoder(hidden: int, block: int, dtype: type = np.float32, level: int = 4) -> onnx.ModelProto:
    """A decoder layer's norms and products: input norm -> genai's packed q/k/v with bias (one MatMulNBits, then
    Split); genai's Skip* (residual + attention output) -> gate/up SiLU MLP -> down; Gemma's sandwich (post-norm,
    residual add, pre-norm: NormAddNorm) -> a q/k group."""
    inits: dict[str, np.ndarray] = {
        name: (1 + 0.3 * RNG.standard_normal(hidden)).astype(dtype) for name in ("s0", "s1", "s2", "s3")
    }
    inits["qkv_split"] = np.array([hidden, hidden // 2, hidden // 2], np.int64)
    ffn = 2 * hidden
    nodes = [
        helper.make_node(SLN, ["x", "s0"], ["n0"], axis=-1, epsilon=1e-6),
        _product("qkv", "n0", 2 * hidden, hidden, block, dtype, inits, level, bias=True),
        helper.make_node("Split", ["qkv", "qkv_split"], ["q", "k", "v"], axis=-1),
        helper.make_node(
            "SkipSimplifiedLayerNormalization", ["q", "x", "s1"], ["n1", "", "", "sum1"], domain=MS, epsilon=1e-6
        ),
        _product("gate", "n1", ffn, hidden, block, dtype, inits, level),
        _product("up", "n1", ffn, hidden, block, dtype, inits, level),
        helper.make_node("Sigmoid", ["gate"], ["sig"]),
        helper.make_node("Mul", ["gate", "sig"], ["silu"]),
        helper.make_node("Mul", ["silu", "up"], ["act"]),
        _product("down", "act", hidden, ffn, block, dtype, inits, level),
        helper.make_node(SLN, ["down", "s2"], ["post"], axis=-1, epsilon=1e-6),
        helper.make_node("Add", ["sum1", "post"], ["sum2"]),
        helper.make_node(SLN, ["sum2", "s3"], ["n2"], axis=-1, epsilon=1e-6),
        _product("q2", "n2", hidden, hidden, block, dtype, inits, level),
        _product("k2", "n2", hidden // 2, hidden, block, dtype, inits, level),
    ]
    inputs = {"x": (dtype, ["batch", "seq", hidden])}
    return graph_model(nodes, inputs, inits, ["k", "v", "sum2", "q2", "k2"])


def test_each_norm_form_writes_its_products_a() -> None:
    ops = ops_of(compile_model(_decoder(64, 32)))
    # the packed q/k/v MatMulNBits reads its A as a one-weight group
    assert ops.count("MatMulNBitsGroup") == 2 and ops.count("GatedMatMulNBits") == 1
    assert {"SimplifiedLayerNormalizationInt8A", "SkipSimplifiedLayerNormalizationInt8A", "NormAddNormInt8A"} <= set(
        ops
    )
    assert ops.count("MatMulNBits") == 1  # down reads the gated product's output: it quantizes its own A


def test_a_batched_step_runs_no_quantize_dispatch_for_a_norms_products() -> None:
    executor = runtime().load_model(compile_model(_decoder(64, 32)))
    quantizes = [s for s in executor.compiled.shaders if s.label.startswith("MatMulNBits/quantize")]
    assert len(quantizes) == 1  # down's, the one product whose A no norm writes


@pytest.mark.parametrize(
    ("hidden", "block", "dtype"),
    [(64, 32, np.float32), (72, 16, np.float16)],
    ids=["blocks-32", "f16-block-16-tail"],  # few shapes: each is its own set of shaders to compile on a fresh machine
)
def test_outputs_equal_onnxruntime_and_the_plan_without_the_pass(hidden: int, block: int, dtype: type) -> None:
    """M = 5 and 1 (one plan: decode), 3 and 8 (the rows4 / rows8 tiles of a batched step), 37 (prefill)."""
    model = _decoder(hidden, block, dtype)
    assert "NormAddNormInt8A" in ops_of(compile_model(model))
    shapes = [(1, 5), (1, 1), (3, 1), (8, 1), (1, 37)]
    feeds = [{"x": (2 * RNG.standard_normal((*shape, hidden))).astype(dtype)} for shape in shapes]
    # f16: four products and four norms in a chain, each rounded to f16 where onnxruntime's CPU keeps some in f32
    # (MatchOnnxruntimeCpuFloat16, the LLM session's pass, is not a default one): the last outputs drift
    # (up to ~5e-2) from onnxruntime with or without this pass; the pass itself must change no bit (check_fused's second check)
    check_fused(model, feeds, {"QuantizeInNorm"}, tolerance=(5e-2, 5e-2) if dtype == np.float16 else (1e-3, 1e-3))


def test_a_layer_norm_with_mean_and_bias_quantizes_alike() -> None:
    """LayerNormalization (mean subtracted, a bias added after the scale) before a 4-bit product, a K of
    three blocks and a tail: decode, a batched step and prefill, equal to the plan without the pass."""
    hidden, inits = 72, {"g": (1 + 0.3 * RNG.standard_normal(72)).astype(np.float32)}
    inits["b"] = RNG.standard_normal(hidden).astype(np.float32)
    nodes = [
        helper.make_node("LayerNormalization", ["x", "g", "b"], ["n"], axis=-1, epsilon=1e-5),
        _product("y", "n", 40, hidden, 32, np.float32, inits),
    ]
    model = graph_model(nodes, {"x": (np.float32, ["batch", "seq", hidden])}, inits, ["y"])
    assert "LayerNormalizationInt8A" in ops_of(compile_model(model))
    feeds = [
        {"x": (3 + RNG.standard_normal((*shape, hidden))).astype(np.float32)} for shape in [(1, 1), (6, 1), (1, 21)]
    ]
    check_fused(model, feeds, {"QuantizeInNorm"}, tolerance=(1e-3, 1e-3))


def test_declines_where_the_product_multiplies_in_f32(caplog: pytest.LogCaptureFixture) -> None:
    with caplog.at_level(logging.DEBUG, logger="onyxia.core.rewrite"):
        ops = ops_of(compile_model(_decoder(64, 32, level=0)))
    assert not [op for op in ops if op.endswith("Int8A")]
    assert "does not quantize A to int8" in caplog.text


def test_a_gpu_split_of_the_rows_quantizes_the_same_bits() -> None:
    """On a GPU a norm row's workgroup has one invocation per reduction lane (64 here, more than the row's
    blocks: most take none; lavapipe's 16 take several each): planned for a GPU's facts and run here, the
    pass still changes no bit (the GPU's product tiles sum in another order than lavapipe's, so the plan
    without the pass is planned for the same facts)."""
    from onyxia.core.adapter_facts import AdapterFacts, target_adapter

    model = _decoder(64, 16)
    with target_adapter(AdapterFacts(cpu=False, subgroups=True, subgroup_min_size=32, subgroup_max_size=32)):
        fused, plain = compile_model(model), plan_without(model, {"QuantizeInNorm"})
    assert any("@workgroup_size(64)" in s.source for s in fused.shaders if "normalization" in s.label)
    assert "NormAddNormInt8A" in ops_of(fused)
    feeds = {"x": (2 * RNG.standard_normal((8, 1, 64))).astype(np.float32)}
    got, expected = runtime().load_model(fused).run(dict(feeds)), runtime().load_model(plain).run(dict(feeds))
    for name, value in expected.items():
        np.testing.assert_array_equal(got[name], value, err_msg=name)


def test_a_product_given_quantized_a_names_the_missing_inputs() -> None:
    """com.onyxia ops are the passes' to write, but a hand-written one still gets a clear error."""
    from onyxia.core import OnyxiaError

    inits: dict[str, np.ndarray] = {}
    _product("q", "x", 32, 64, 32, np.float32, inits)
    attrs = {"K": 64, "N": [32], "bits": 4, "block_size": 32, "accuracy_level": 4, "quantized_a": 1}
    group = helper.make_node("MatMulNBitsGroup", ["x", "q_B", "q_s"], ["y"], domain="com.onyxia", **attrs)
    model = graph_model([group], {"x": (np.float32, [1, 64])}, inits, ["y"])
    model.opset_import.append(helper.make_opsetid("com.onyxia", 1))
    with pytest.raises(
        OnyxiaError, match=r"has 3 inputs; with quantized_a expected 3 \+ 4 \* 1 \(A, four per weight, qa, sa\)"
    ):
        compile_model(model)
