"""A decoder graph as `torch.onnx.export(dynamo=True, opset_version=23)` writes a transformers model with a cache.

The structure follows the `<family>-tiny-dynamo` fixtures (torch 2.13, transformers 5.23, onnxscript 0.7.2;
`tools/llm_fixtures/`): batch fixed at 1; inputs input_ids, attention_mask, position_ids and
past_key_values.N.key/value (interleaved per layer), outputs logits and present.N.key/value. The prologue
computes the lengths from Shape of input_ids and of the last layer's past, the embedding Gather (Gemma 3:
times sqrt(hidden)), the 4-D bool mask (causal LessOrEqual of the key and query positions, And the padding
mask GatherND-ed from attention_mask, Expanded to [1, 1, S, T]; Gemma 3's sliding layers also And
key > query - window) and the rotary angles position_ids * inv_freq (Gemma 3: local and global
frequencies); then the layers (`dynamo_layer.py`), the final RMSNormalization and the head (tied:
MatMul by Transpose(lm_head.weight)). With `q4` every projection whose weight is an initializer becomes
MatMulNBits, as onnxruntime's MatMulNBitsQuantizer leaves the fp32 export (the tied head reads a Transpose,
so it stays a MatMul).
"""

from __future__ import annotations

import numpy as np
from onnx import TensorProto, helper

from onyxia.cli.bench.archs import family_of
from onyxia.cli.bench.config import DecoderConfig
from onyxia.cli.bench.decoder_graph import DecoderGraph
from onyxia.cli.bench.dynamo_builder import TorchStyleBuilder
from onyxia.cli.bench.dynamo_layer import DynamoStyle, LayerInputs, dynamo_layer, rms_norm

__all__ = ["STYLES", "build_dynamo_graph"]

STYLES: dict[str, DynamoStyle] = {  # family -> what its transformers module exports as
    "gemma3": DynamoStyle(qk_norm="transposed", sandwich_norms=True, activation="gelu_tanh", embed_scale=True),
    "llama": DynamoStyle(),
    "qwen2": DynamoStyle(qkv_bias=True),
    "qwen3": DynamoStyle(qk_norm="heads"),
}
_MODEL = "model.model"


def build_dynamo_graph(config: DecoderConfig, q4: bool = False) -> DecoderGraph:
    family = family_of(config)
    if family.name not in STYLES:
        raise ValueError(f"DecoderConfig {config.name!r}: no torch.onnx layout for family {family.name!r}")
    style, b = STYLES[family.name], TorchStyleBuilder()
    seq_1d = b.op("Shape", ["input_ids"], "", start=1, end=2)
    seq = b.op("Squeeze", [seq_1d], "")
    last_past = f"past_key_values.{config.num_hidden_layers - 1}.key"
    past = b.op("Squeeze", [b.op("Shape", [last_past], "", start=2, end=3)], "")
    total = b.op("Add", [past, seq], "")
    x = _embedding(b, config, style)
    masks, total_1d = _masks(b, config, (seq_1d, seq, past, total))
    shared = LayerInputs(masks, _angles(b, config), total_1d)
    for layer in range(config.num_hidden_layers):
        x = dynamo_layer(b, config, style, layer, x, shared, q4)
    x = rms_norm(b, config, x, f"{_MODEL}.norm", config.hidden_size)
    hidden, vocab = config.hidden_size, config.vocab_size
    if config.tie_word_embeddings:
        head = b.op("Transpose", ["model.lm_head.weight"], "model.lm_head", perm=[1, 0])
        b.op("MatMul", [x, head], "model.lm_head", outputs=["logits"])
    else:
        b.linear(x, "model.lm_head.weight.T", (hidden, vocab), "model.lm_head", q4, output="logits")
    inputs, outputs = _graph_io(config)
    graph = helper.make_graph(b.nodes, "main_graph", inputs, outputs, initializer=b.initializers())
    return DecoderGraph(graph, b.weights.all_weights())


def _embedding(b: TorchStyleBuilder, config: DecoderConfig, style: DynamoStyle) -> str:
    table = "model.lm_head.weight" if config.tie_word_embeddings else f"{_MODEL}.embed_tokens.weight"
    b.weight(table, (config.vocab_size, config.hidden_size), "embedding")
    x = b.op("Gather", [table, "input_ids"], f"{_MODEL}.embed_tokens", axis=0)
    if style.embed_scale:
        x = b.op("Mul", [x, b.const(float(config.hidden_size) ** 0.5)], f"{_MODEL}.embed_tokens")
    return x


def _masks(b: TorchStyleBuilder, config: DecoderConfig, lengths: tuple[str, ...]) -> tuple[dict[bool, str], str]:
    """[1, 1, S, T] bool per layer kind (sliding or not), and the total length as a 1-D value."""
    seq_1d, seq, past, total = lengths
    padding = b.op("Cast", ["attention_mask"], _MODEL, to=TensorProto.BOOL)
    zero, one, axes = b.const(0), b.const(1), b.const([0, 1])
    query = b.op("Add", [b.op("Range", [zero, seq, one], _MODEL), past], _MODEL)
    key = b.op("Range", [zero, total, one], _MODEL)
    query = b.op("Unsqueeze", [b.op("Unsqueeze", [query, axes], _MODEL), b.const([3])], _MODEL)  # [1, 1, S, 1]
    key = b.op("Unsqueeze", [b.op("Unsqueeze", [key, axes], _MODEL), b.const([2])], _MODEL)  # [1, 1, 1, T]
    causal = b.op("LessOrEqual", [key, query], _MODEL)
    true = b.const(True)
    full = b.op("And", [true, causal], _MODEL)
    batch = b.const(np.zeros((1, 1, 1, 1), np.int64))  # attention_mask's batch index
    index_shape = b.op("Shape", [b.op("Max", [batch, key], _MODEL)], _MODEL, start=0)
    last = b.const([-1])
    batch_index = b.op("Unsqueeze", [b.op("Expand", [batch, index_shape], _MODEL), last], _MODEL)
    index = b.op("Concat", [batch_index, b.op("Unsqueeze", [key, last], _MODEL)], _MODEL, axis=-1)
    kept = b.op("GatherND", [padding, index], _MODEL, batch_dims=0)
    full = b.op("And", [full, kept], _MODEL)
    total_1d = b.op("Reshape", [total, last], _MODEL, allowzero=0)
    shape = b.op("Concat", [b.const([1]), b.const([1]), seq_1d, total_1d], _MODEL, axis=0)
    masks = {False: b.op("Expand", [full, shape], _MODEL)}
    if any(config.is_sliding(n) for n in range(config.num_hidden_layers)):
        earliest = b.op("Sub", [query, b.const(config.sliding_window)], _MODEL)
        window = b.op("And", [true, b.op("Greater", [key, earliest], _MODEL)], _MODEL)
        window = b.op("And", [true, b.op("And", [window, causal], _MODEL)], _MODEL)
        masks[True] = b.op("Expand", [b.op("And", [window, kept], _MODEL), shape], _MODEL)
    return masks, total_1d


def _angles(b: TorchStyleBuilder, config: DecoderConfig) -> dict[bool, str]:
    """position_ids [1, S, 1] * inv_freq: Gemma 3's sliding layers rotate with rope_local_base_freq."""
    scope = f"{_MODEL}.rotary_emb"
    positions = b.op("Unsqueeze", ["position_ids", b.const([2])], scope)
    positions = b.op("Cast", [positions], scope, to=TensorProto.FLOAT)
    half = config.rotary_dim // 2
    kinds = sorted({config.is_sliding(n) for n in range(config.num_hidden_layers)}, reverse=True)
    if len(kinds) == 1 and not kinds[0]:
        inv_freq = b.weight(f"{scope}.inv_freq", (half,), "inv_freq", config.rope_theta)
        return {False: b.op("Mul", [positions, inv_freq], scope)}
    angles = {}
    for sliding in kinds:  # sliding first, as torch writes them
        kind, theta = ("sliding", config.rope_local_base_freq) if sliding else ("full", config.rope_theta)
        inv_freq = b.weight(f"{scope}.{kind}_attention_inv_freq", (half,), "inv_freq", theta)
        angles[sliding] = b.op("Mul", [positions, inv_freq], scope)
    return angles


def _graph_io(config: DecoderConfig) -> tuple[list[helper.ValueInfoProto], list[helper.ValueInfoProto]]:
    kv, dim, f32, i64 = config.num_key_value_heads, config.head_dim, TensorProto.FLOAT, TensorProto.INT64
    inputs = [
        helper.make_tensor_value_info("input_ids", i64, [1, "sequence_length"]),
        helper.make_tensor_value_info("attention_mask", i64, [1, "total_sequence_length"]),
        helper.make_tensor_value_info("position_ids", i64, [1, "sequence_length"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", f32, [1, "sequence_length", config.vocab_size])]
    for layer in range(config.num_hidden_layers):
        for part in ("key", "value"):
            past: list[str | int] = [1, kv, "past_sequence_length", dim]
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{layer}.{part}", f32, past))
            present: list[str | int] = [1, kv, "past_sequence_length + sequence_length", dim]
            outputs.append(helper.make_tensor_value_info(f"present.{layer}.{part}", f32, present))
    return inputs, outputs
