"""ai.onnx Attention (opsets 23/24) against onnxruntime 1.32's CPU kernel, on small shapes: 3-D grouped heads
under a causal and a bool mask, a one-token decode step over past_key/past_value with grouped heads (the
decode kernel, present = concat(past, new)), nonpad_kv_seqlen (opset 24) in decode, qk_matmul_output
(mode 3 with softcap and scale), one symbolic plan for prefill and decode, and PyTorch's exporter layout
(RMSNormalization -> RotaryEmbedding -> Attention) compiling to the fused kernels the other layouts get."""

from __future__ import annotations

import numpy as np
import pytest
from fusion_models import ops_of
from onnx import TensorProto, helper, numpy_helper
from oracle import assert_close, check_op, check_rebinding, compile_model, make_model, reference_outputs, runtime

RNG = np.random.default_rng(7)


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def test_3d_grouped_heads_causal_with_bool_mask() -> None:
    mask = RNG.random((5, 5)) > 0.3
    mask[:, 0] = True  # every query keeps a key the causal frontier allows
    inputs = {"q": _f32(2, 5, 4 * 8), "k": _f32(2, 5, 2 * 8), "v": _f32(2, 5, 2 * 8), "mask": mask}
    check_op("Attention", inputs, {"q_num_heads": 4, "kv_num_heads": 2, "is_causal": 1}, opset=23)


def test_decode_step_with_past_and_grouped_heads() -> None:
    past = 6
    inputs = {
        "q": _f32(1, 4, 1, 8),
        "k": _f32(1, 2, 1, 8),
        "v": _f32(1, 2, 1, 8),
        "mask": _f32(1, 1, 1, past + 1),
        "past_key": _f32(1, 2, past, 8),
        "past_value": _f32(1, 2, past, 8),
    }
    check_op("Attention", inputs, {"is_causal": 1}, opset=23, num_outputs=3)


def test_nonpad_kv_seqlen_decode() -> None:
    inputs = {
        "q": _f32(2, 4, 1, 8),
        "k": _f32(2, 2, 7, 8),
        "v": _f32(2, 2, 7, 8),
        "mask": None,
        "past_key": None,
        "past_value": None,
        "nonpad": np.array([7, 3], np.int64),
    }
    check_op("Attention", inputs, {"is_causal": 1}, opset=24)


def test_qk_matmul_output_softmax_with_softcap_and_scale() -> None:
    inputs = {"q": _f32(1, 2, 3, 8), "k": _f32(1, 2, 4, 8), "v": _f32(1, 2, 4, 8), "mask": _f32(3, 4)}
    attrs = {"qk_matmul_output_mode": 3, "softcap": 2.0, "scale": 0.5}
    check_op("Attention", inputs, attrs, opset=23, num_outputs=4, omit_outputs=(1, 2))


def test_one_plan_serves_prefill_and_decode() -> None:
    """Symbolic sequence and past lengths: a prompt (rows kernel) and a one-token step (decode kernel)."""

    def feeds(seq: int, past: int) -> dict[str, np.ndarray]:
        return {
            "q": _f32(1, seq, 32),
            "k": _f32(1, seq, 16),
            "v": _f32(1, seq, 16),
            "past_key": _f32(1, 2, past, 8),
            "past_value": _f32(1, 2, past, 8),
        }

    model = make_model(
        "Attention",
        {**feeds(3, 2), "mask": None},
        {"q_num_heads": 4, "kv_num_heads": 2, "is_causal": 1},
        opset=23,
        num_outputs=3,
        dim_params={n: ["b", "s", w] for n, w in (("q", 32), ("k", 16), ("v", 16))}
        | {n: ["b", 2, "p", 8] for n in ("past_key", "past_value")},
    )
    # the mask input is omitted: reorder so past_key/past_value keep their positions 4 and 5
    node = model.graph.node[0]
    node.input[:] = ["q", "k", "v", "", "past_key", "past_value"]
    check_rebinding(model, [feeds(4, 3), feeds(1, 7)])


# ----- PyTorch's exporter layout -----------------------------------------------------------------
def _dynamo_layer(heads: int = 4, kv_heads: int = 2, size: int = 16, hidden: int = 32) -> object:
    """One attention block as torch.onnx.export(dynamo=True, opset 23) writes it: projections reshaped to
    [B, S, N, H], q_norm/k_norm (RMSNormalization), Transpose, RotaryEmbedding(x, Cos(f), Sin(f)), Attention
    with past_key/past_value, Transpose and Reshape back, o_proj."""
    init = {
        n: (RNG.standard_normal(s) * 0.2).astype(np.float32)
        for n, s in (
            ("wq", (hidden, heads * size)),
            ("wk", (hidden, kv_heads * size)),
            ("wv", (hidden, kv_heads * size)),
            ("wo", (heads * size, hidden)),
        )
    }
    init |= {
        "qn": (1 + 0.1 * RNG.standard_normal(size)).astype(np.float32),
        "kn": (1 + 0.1 * RNG.standard_normal(size)).astype(np.float32),
        "sq": np.array([1, -1, heads, size], np.int64),
        "skv": np.array([1, -1, kv_heads, size], np.int64),
        "so": np.array([1, -1, heads * size], np.int64),
    }
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "wq"], ["q"]),
        n("MatMul", ["x", "wk"], ["k"]),
        n("MatMul", ["x", "wv"], ["v"]),
        n("Reshape", ["q", "sq"], ["q4"]),
        n("Reshape", ["k", "skv"], ["k4"]),
        n("Reshape", ["v", "skv"], ["v4"]),
        n("RMSNormalization", ["q4", "qn"], ["qr"], axis=-1, epsilon=1e-6),
        n("RMSNormalization", ["k4", "kn"], ["kr"], axis=-1, epsilon=1e-6),
        *(n("Transpose", [a], [b], perm=[0, 2, 1, 3]) for a, b in (("qr", "qt"), ("kr", "kt"), ("v4", "vt"))),
        n("Cos", ["freqs"], ["cos"]),
        n("Sin", ["freqs"], ["sin"]),
        n("RotaryEmbedding", ["qt", "cos", "sin"], ["qe"], num_heads=heads),
        n("RotaryEmbedding", ["kt", "cos", "sin"], ["ke"], num_heads=kv_heads),
        n(
            "Attention",
            ["qe", "ke", "vt", "", "past_key", "past_value"],
            ["a", "present_key", "present_value"],
            is_causal=1,
        ),
        n("Transpose", ["a"], ["at"], perm=[0, 2, 1, 3]),
        n("Reshape", ["at", "so"], ["am"]),
        n("MatMul", ["am", "wo"], ["y"]),
    ]
    cache = [
        helper.make_tensor_value_info(c, TensorProto.FLOAT, [1, kv_heads, "past", size])
        for c in ("past_key", "past_value")
    ]
    graph = helper.make_graph(
        nodes,
        "dynamo_attention",
        [
            helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", hidden]),
            helper.make_tensor_value_info("freqs", TensorProto.FLOAT, [1, "seq", size // 2]),
            *cache,
        ],
        [helper.make_empty_tensor_value_info(o) for o in ("y", "present_key", "present_value")],
        [numpy_helper.from_array(v, k) for k, v in init.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def _layer_feeds(seq: int, past: int) -> dict[str, np.ndarray]:
    angles = np.arange(past, past + seq)[None, :, None] * 1e4 ** (-np.arange(8) / 8)[None, None, :]
    return {
        "x": _f32(1, seq, 32),
        "freqs": angles.astype(np.float32),
        "past_key": _f32(1, 2, past, 16),
        "past_value": _f32(1, 2, past, 16),
    }


def test_dynamo_layout_compiles_to_the_fused_kernels() -> None:
    """q/k norms and rotary as one RmsNormRotaryPair, the cache as one KvAppend, the attention reading the
    rotated q and writing o_proj's layout: no Transpose, RMSNormalization or RotaryEmbedding dispatch left."""
    model = _dynamo_layer()
    compiled = compile_model(model)
    ops = ops_of(compiled)
    assert [o for o in ops if o in ("RmsNormRotaryPair", "KvAppend", "ScaledDotProductAttention")] == [
        "RmsNormRotaryPair",
        "KvAppend",
        "ScaledDotProductAttention",
    ], ops
    assert not {"Transpose", "RMSNormalization", "RotaryEmbedding", "Attention"} & set(ops), ops
    executor = runtime().load_model(compiled)
    for seq, past in ((5, 3), (1, 8)):  # prefill, then a decode step
        feeds = _layer_feeds(seq, past)
        got = executor.run(dict(feeds))
        for output, expected in zip(model.graph.output, reference_outputs(model, feeds, "ort")):
            assert_close(got[output.name], expected, f"{output.name} (seq {seq}, past {past})")


@pytest.mark.parametrize("bad", ["int_mask", "mixed_dtypes"])
def test_invalid_inputs_name_the_node(bad: str) -> None:
    from onyxia.core import ShapeInferenceError

    inputs = {"q": _f32(1, 2, 3, 8), "k": _f32(1, 2, 4, 8), "v": _f32(1, 2, 4, 8), "mask": _f32(3, 4)}
    if bad == "int_mask":
        inputs["mask"] = np.ones((3, 4), np.int32)
    else:
        inputs["v"] = inputs["v"].astype(np.float16)
    with pytest.raises(ShapeInferenceError, match=r"Attention.*input (2 \(V\)|3 \(attn_mask\))"):
        compile_model(make_model("Attention", inputs, opset=23))
