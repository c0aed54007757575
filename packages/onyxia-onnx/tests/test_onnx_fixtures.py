"""The real Gemma 3 tiny exports (see /work/shared/fixtures/README.md) load and round-trip exactly."""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import numpy as np
import pytest
from onnx_test_models import run_ort

from onyxia.core import DataType, SymbolicExpr, TensorKind
from onyxia.onnx import load_and_parse_model, to_onnx

DATA = Path(__file__).parent / "data"
GEMMA = DATA / "gemma3-tiny"
GENAI_INT4 = DATA / "gemma3-tiny-genai-int4" / "model.onnx"

FP32_HISTOGRAM = {
    "MatMul": 15,
    "SimplifiedLayerNormalization": 13,
    "Reshape": 9,
    "Constant": 7,
    "Add": 4,
    "com.microsoft::RotaryEmbedding": 4,
    "Gather": 3,
    "Mul": 3,
    "Cast": 2,
    "Gelu": 2,
    "Shape": 2,
    "com.microsoft::GroupQueryAttention": 2,
    "Concat": 1,
    "ReduceSum": 1,
    "Sub": 1,
    "Transpose": 1,
    "Unsqueeze": 1,
}
Q4_HISTOGRAM = {**FP32_HISTOGRAM, "MatMul": 1, "com.microsoft::MatMulNBits": 14}
GENAI_INT4_HISTOGRAM = {
    "com.microsoft::MatMulNBits": 11,
    "Reshape": 9,
    "SimplifiedLayerNormalization": 9,
    "Constant": 7,
    "com.microsoft::SkipSimplifiedLayerNormalization": 4,
    "Mul": 3,
    "Cast": 2,
    "Gelu": 2,
    "Split": 2,
    "com.microsoft::GroupQueryAttention": 2,
    "Gather": 1,
    "ReduceSum": 1,
    "Shape": 1,
    "Sub": 1,
    "com.microsoft::GatherBlockQuantized": 1,
}
KV = [f"past_key_values.{layer}.{kind}" for layer in (0, 1) for kind in ("key", "value")]


def _dims(graph, name: str) -> list[str]:
    return [str(d) for d in graph.tensor_by_name(name).shape.dims]


@pytest.mark.parametrize(("file", "histogram"), [("model.onnx", FP32_HISTOGRAM), ("model_q4.onnx", Q4_HISTOGRAM)])
def test_gemma3_tiny_loads(file, histogram):
    graph = load_and_parse_model(GEMMA / file)
    assert len(graph) == 71
    assert Counter(n.qualified_op for n in graph) == histogram
    assert graph.opset_imports == {"": 21, "com.microsoft": 1}
    assert [graph.tensor(t).name for t in graph.inputs] == ["input_ids", "attention_mask", "position_ids", *KV]
    assert _dims(graph, "input_ids") == ["batch_size", "sequence_length"]
    assert _dims(graph, "attention_mask") == ["batch_size", "total_sequence_length"]
    assert graph.tensor_by_name("input_ids").dtype is DataType.INT64
    for name in KV:
        assert _dims(graph, name) == ["batch_size", "1", "past_sequence_length", "16"]
        assert graph.tensor_by_name(name).dtype is DataType.FLOAT
    assert [graph.tensor(t).name for t in graph.outputs] == ["logits"] + [
        n.replace("past_key_values", "present") for n in KV
    ]
    assert _dims(graph, "logits") == ["batch_size", "sequence_length", "1024"]
    embed = graph.tensor_by_name("model.embed_tokens.weight")
    assert embed.kind is TensorKind.INITIALIZER and embed.initializer.dims == (1024, 64)
    assert not embed.initializer.is_loaded  # external data stays on disk until read
    for node in graph.nodes_of("GroupQueryAttention", "com.microsoft"):
        assert node.opset == 1 and node.attributes["num_heads"] == 4 and node.attributes["kv_num_heads"] == 1
    graph.check()


def test_gemma3_tiny_q4_weights_are_packed_bytes():
    graph = load_and_parse_model(GEMMA / "model_q4.onnx")
    node = graph.nodes_of("MatMulNBits", "com.microsoft")[0]
    weight = graph.tensor(node.inputs[1]).initializer
    assert weight.dtype is DataType.UINT8 and weight.dims[1:] == (2, 16)
    assert (node.attributes["bits"], node.attributes["block_size"]) == (4, 32)


def test_gemma3_genai_int4_loads():
    graph = load_and_parse_model(GENAI_INT4)
    assert len(graph) == 56
    assert Counter(n.qualified_op for n in graph) == GENAI_INT4_HISTOGRAM
    assert graph.opset_imports == {"": 22, "com.microsoft": 1}
    assert graph.metadata["producer_name"] == "onnxruntime-genai"
    assert _dims(graph, "past_key_values.0.key") == ["batch_size", "1", "past_sliding_length", "kv_cache_dim"]
    assert graph.tensor_by_name("past_key_values.1.key").shape.dims[3] == SymbolicExpr.name("kv_cache_dim")


def _prefill_feeds(graph_inputs: list[str]) -> dict[str, np.ndarray]:
    feeds = {
        "input_ids": np.random.default_rng(7).integers(3, 1024, size=(1, 5), dtype=np.int64),
        "attention_mask": np.ones((1, 5), np.int64),
        "position_ids": np.arange(5, dtype=np.int64)[None],
        **{name: np.zeros((1, 1, 0, 16), np.float32) for name in KV},
    }
    return {name: feeds[name] for name in graph_inputs}


@pytest.mark.parametrize("file", ["model.onnx", "model_q4.onnx"])
def test_gemma3_tiny_round_trip_in_onnxruntime(file):
    """Onyxia's dump runs in onnxruntime with the original's exact outputs (checker skipped: the file
    uses ORT's SimplifiedLayerNormalization in the default domain, which onnx itself does not know)."""
    graph = load_and_parse_model(GEMMA / file)
    feeds = _prefill_feeds([graph.tensor(t).name for t in graph.inputs])
    want = run_ort(GEMMA / file, feeds)
    got = run_ort(to_onnx(graph), feeds)
    assert want[0].shape == (1, 5, 1024) and got[1].shape == (1, 1, 5, 16)
    for expected, actual in zip(want, got, strict=True):
        np.testing.assert_array_equal(actual, expected)
