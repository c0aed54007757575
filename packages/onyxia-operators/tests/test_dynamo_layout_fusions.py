"""The rules that bring torch.onnx.export(dynamo=True)'s decoder layer to the other layouts' dispatch count,
each checked on a small opset-23 layer against onnxruntime (prefill over a past, then a decode step):

- read_grouped_k / read_grouped_v: Attention over transformers' repeat_kv (Unsqueeze, Expand, Reshape of the
  Concat cache) reads the grouped cache itself: no Expand copy, and the two appends merge into one KvAppend;
- norm_before_transpose: Gemma 3's q_norm/k_norm over the heads-first Transpose fold into RmsNormRotaryPair;
- rotate_by_angles: the rotations read the angles, so no Cos or Sin dispatch is left;
- transpose_through_view: Phi-3's identity Reshape between Attention and its Transpose no longer keeps the
  Transpose.
"""

from __future__ import annotations

import numpy as np
import onnx
import pytest
from fusion_models import ops_of
from onnx import TensorProto, helper, numpy_helper
from oracle import assert_close, compile_model, reference_outputs, runtime

RNG = np.random.default_rng(25)
HIDDEN, SIZE, HEADS = 32, 16, 4


def _f32(*shape: int) -> np.ndarray:
    return RNG.standard_normal(shape).astype(np.float32)


def _layer(kv_heads: int, *, norm_after_transpose: bool, view: bool) -> onnx.ModelProto:
    """Attention as the dynamo exporter writes it: Concat caches, then repeat_kv before ai.onnx Attention."""
    group = HEADS // kv_heads
    init = {
        "wq": _f32(HIDDEN, HEADS * SIZE) * 0.2,
        "wk": _f32(HIDDEN, kv_heads * SIZE) * 0.2,
        "wv": _f32(HIDDEN, kv_heads * SIZE) * 0.2,
        "wo": _f32(HEADS * SIZE, HIDDEN) * 0.2,
        "qn": (1 + 0.1 * _f32(SIZE)).astype(np.float32),
        "kn": (1 + 0.1 * _f32(SIZE)).astype(np.float32),
        "sq": np.array([1, -1, HEADS, SIZE], np.int64),
        "skv": np.array([1, -1, kv_heads, SIZE], np.int64),
        "so": np.array([1, -1, HEADS * SIZE], np.int64),
        "heads": np.array([1, HEADS, -1, SIZE], np.int64),
        "axis2": np.array([2], np.int64),
        "groups": np.array([1, kv_heads, group, 1, 1], np.int64),
    }
    n = helper.make_node
    nodes = [
        n("MatMul", ["x", "wq"], ["q"]),
        n("MatMul", ["x", "wk"], ["k"]),
        n("MatMul", ["x", "wv"], ["v"]),
        n("Reshape", ["q", "sq"], ["q4"]),
        n("Reshape", ["k", "skv"], ["k4"]),
        n("Reshape", ["v", "skv"], ["v4"]),
        *(n("Transpose", [a], [b], perm=[0, 2, 1, 3]) for a, b in (("q4", "qt"), ("k4", "kt"), ("v4", "vt"))),
        n("Cos", ["freqs"], ["cos"]),
        n("Sin", ["freqs"], ["sin"]),
    ]
    q, k = "qt", "kt"
    if norm_after_transpose:
        nodes += [
            n("RMSNormalization", ["qt", "qn"], ["qr"], axis=-1, epsilon=1e-6),
            n("RMSNormalization", ["kt", "kn"], ["kr"], axis=-1, epsilon=1e-6),
        ]
        q, k = "qr", "kr"
    nodes += [
        n("RotaryEmbedding", [q, "cos", "sin"], ["qe"], num_heads=HEADS),
        n("RotaryEmbedding", [k, "cos", "sin"], ["ke"], num_heads=kv_heads),
        n("Concat", ["past_key", "ke"], ["present_key"], axis=2),
        n("Concat", ["past_value", "vt"], ["present_value"], axis=2),
    ]
    for cache, rep in (("present_key", "k_rep"), ("present_value", "v_rep")):
        nodes += [
            n("Unsqueeze", [cache, "axis2"], [f"{rep}_5d"]),
            n("Expand", [f"{rep}_5d", "groups"], [f"{rep}_wide"]),
            n("Reshape", [f"{rep}_wide", "heads"], [rep]),
        ]
    nodes.append(n("Attention", ["qe", "k_rep", "v_rep", "mask"], ["a"], scale=SIZE**-0.5))
    if view:
        nodes.append(n("Reshape", ["a", "heads"], ["a_view"]))
    nodes += [
        n("Transpose", ["a_view" if view else "a"], ["at"], perm=[0, 2, 1, 3]),
        n("Reshape", ["at", "so"], ["am"]),
        n("MatMul", ["am", "wo"], ["y"]),
    ]
    inputs = [
        helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, "seq", HIDDEN]),
        helper.make_tensor_value_info("freqs", TensorProto.FLOAT, [1, "seq", SIZE // 2]),
        helper.make_tensor_value_info("mask", TensorProto.BOOL, [1, 1, "seq", "total"]),
        *(
            helper.make_tensor_value_info(c, TensorProto.FLOAT, [1, kv_heads, "past", SIZE])
            for c in ("past_key", "past_value")
        ),
    ]
    graph = helper.make_graph(
        nodes,
        "dynamo_layer",
        inputs,
        [helper.make_empty_tensor_value_info(o) for o in ("y", "present_key", "present_value")],
        [numpy_helper.from_array(np.asarray(v, v.dtype), k) for k, v in init.items()],
    )
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", 23)], ir_version=10)


def _feeds(kv_heads: int, seq: int, past: int) -> dict[str, np.ndarray]:
    positions = np.arange(past, past + seq)
    angles = positions[None, :, None] * 1e4 ** (-np.arange(SIZE // 2) / (SIZE // 2))[None, None, :]
    keys = np.arange(past + seq)
    return {
        "x": _f32(1, seq, HIDDEN),
        "freqs": angles.astype(np.float32),
        "mask": (keys[None, :] <= positions[:, None])[None, None],  # causal, bottom-right
        "past_key": _f32(1, kv_heads, past, SIZE),
        "past_value": _f32(1, kv_heads, past, SIZE),
    }


@pytest.mark.parametrize(
    ("kv_heads", "norm_after_transpose", "view"),
    [(2, True, False), (1, False, True)],
    ids=["gemma3-like-2kv", "phi3-view-1kv"],
)
def test_dynamo_layer_fuses_to_the_layer_kernels(kv_heads: int, norm_after_transpose: bool, view: bool) -> None:
    model = _layer(kv_heads, norm_after_transpose=norm_after_transpose, view=view)
    compiled = compile_model(model)
    ops = ops_of(compiled)
    rotary = ["RmsNormRotaryPair"] if norm_after_transpose else ["RotaryEmbedding", "RotaryEmbedding"]
    kernels = ("RmsNormRotaryPair", "RotaryEmbedding", "KvAppend", "ScaledDotProductAttention")
    assert [o for o in ops if o in kernels] == [*rotary, "KvAppend", "ScaledDotProductAttention"], ops
    assert not {"Expand", "Cos", "Sin", "Transpose", "RMSNormalization", "Concat", "Attention"} & set(ops), ops
    executor = runtime().load_model(compiled)
    for seq, past in ((5, 3), (1, 8)):  # prefill over a past, then a decode step
        feeds = _feeds(kv_heads, seq, past)
        got = executor.run(dict(feeds))
        for output, expected in zip(model.graph.output, reference_outputs(model, feeds, "ort"), strict=True):
            assert_close(got[output.name], expected, f"{output.name} (seq {seq}, past {past})")
