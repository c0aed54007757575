"""A decoder graph as `torch.onnx.export(dynamo=True, opset_version=23)` writes a transformers model with a cache.

The structure follows the `<family>-tiny-dynamo` fixtures (torch 2.13, transformers 5.23, onnxscript 0.7.2;
`tools/llm_fixtures/`): the batch dim is dynamic (`batch_size`, as a continuous-batching session feeds it);
inputs input_ids, attention_mask, position_ids and past_key_values.N.key/value (interleaved per layer),
outputs logits and present.N.key/value. The prologue computes the lengths from Shape of input_ids and of the
last layer's past (its key's length, its value's batch), the embedding Gather (Gemma 3: times sqrt(hidden)),
the 4-D bool mask (causal LessOrEqual of the key and query positions, And the padding mask GatherND-ed from
attention_mask at (row, key) indices, Expanded to [B, 1, S, T]; Gemma 3's sliding layers also And key > query - window) and the rotary angles position_ids * inv_freq (Gemma 3:
local and global frequencies); then the layers (`dynamo_layer.py`, whose Reshape shapes are Concats of the
batch, lengths and constants), the final RMSNormalization and the head (tied: MatMul by
Transpose(lm_head.weight)). With `q4` every projection whose weight is an initializer becomes MatMulNBits,
as onnxruntime's MatMulNBitsQuantizer leaves the fp32 export (the tied head reads a Transpose, so it stays a
MatMul).
"""

from __future__ import annotations

from dataclasses import dataclass

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
_BATCH = "batch_size"  # the dynamic dim torch names after the exporter's dynamic_shapes


@dataclass(frozen=True)
class _Lengths:
    """The sizes torch reads off the inputs: 1-D ([n], for shape Concats) and scalar (for Range and Add)."""

    batch_1d: str  # Shape of the last layer's past value, dim 0
    batch: str
    seq_1d: str  # Shape of input_ids, dim 1
    seq: str
    past: str  # the last layer's past key, dim 2
    total: str  # past + seq


def build_dynamo_graph(config: DecoderConfig, q4: bool = False) -> DecoderGraph:
    family = family_of(config)
    if family.name not in STYLES:
        raise ValueError(f"DecoderConfig {config.name!r}: no torch.onnx layout for family {family.name!r}")
    style, b = STYLES[family.name], TorchStyleBuilder()
    lengths = _lengths(b, config)
    x = _embedding(b, config, style)
    masks, total_1d = _masks(b, config, lengths)
    shared = LayerInputs(masks, _angles(b, config), lengths.batch_1d, lengths.seq_1d, total_1d)
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


def _lengths(b: TorchStyleBuilder, config: DecoderConfig) -> _Lengths:
    """torch's symbolic sizes, in its order: sequence, past length, batch, then their sum."""
    seq_1d = b.op("Shape", ["input_ids"], "", start=1, end=2)
    seq = b.op("Squeeze", [seq_1d], "")
    last_past = f"past_key_values.{config.num_hidden_layers - 1}"
    past = b.op("Squeeze", [b.op("Shape", [f"{last_past}.key"], "", start=2, end=3)], "")
    batch_1d = b.op("Shape", [f"{last_past}.value"], "", start=0, end=1)
    batch = b.op("Squeeze", [batch_1d], "")
    return _Lengths(batch_1d, batch, seq_1d, seq, past, b.op("Add", [past, seq], ""))


def _embedding(b: TorchStyleBuilder, config: DecoderConfig, style: DynamoStyle) -> str:
    table = "model.lm_head.weight" if config.tie_word_embeddings else f"{_MODEL}.embed_tokens.weight"
    b.weight(table, (config.vocab_size, config.hidden_size), "embedding")
    x = b.op("Gather", [table, "input_ids"], f"{_MODEL}.embed_tokens", axis=0)
    if style.embed_scale:
        x = b.op("Mul", [x, b.const(float(config.hidden_size) ** 0.5)], f"{_MODEL}.embed_tokens")
    return x


def _masks(b: TorchStyleBuilder, config: DecoderConfig, n: _Lengths) -> tuple[dict[bool, str], str]:
    """[B, 1, S, T] bool per layer kind (sliding or not), and the total length as a 1-D value."""
    padding = b.op("Cast", ["attention_mask"], _MODEL, to=TensorProto.BOOL)
    zero, one, axes = b.const(0), b.const(1), b.const([0, 1])
    rows = b.op("Range", [zero, n.batch, one], _MODEL)
    query = b.op("Add", [b.op("Range", [zero, n.seq, one], _MODEL), n.past], _MODEL)
    key = b.op("Range", [zero, n.total, one], _MODEL)
    rows = b.op("Unsqueeze", [b.op("Unsqueeze", [rows, b.const([1, 2])], _MODEL), b.const([3])], _MODEL)  # [B,1,1,1]
    query = b.op("Unsqueeze", [b.op("Unsqueeze", [query, axes], _MODEL), b.const([3])], _MODEL)  # [1, 1, S, 1]
    key = b.op("Unsqueeze", [b.op("Unsqueeze", [key, axes], _MODEL), b.const([2])], _MODEL)  # [1, 1, 1, T]
    causal = b.op("LessOrEqual", [key, query], _MODEL)
    true = b.const(True)
    full = b.op("And", [true, causal], _MODEL)
    index_shape = b.op("Shape", [b.op("Max", [rows, key], _MODEL)], _MODEL, start=0)  # [B, 1, 1, T]
    last = b.const([-1])
    row_index = b.op("Unsqueeze", [b.op("Expand", [rows, index_shape], _MODEL), last], _MODEL)
    key_index = b.op("Unsqueeze", [b.op("Expand", [key, index_shape], _MODEL), last], _MODEL)
    index = b.op("Concat", [row_index, key_index], _MODEL, axis=-1)
    kept = b.op("GatherND", [padding, index], _MODEL, batch_dims=0)  # attention_mask[row, key]
    full = b.op("And", [full, kept], _MODEL)
    total_1d = b.op("Reshape", [n.total, last], _MODEL, allowzero=0)
    shape = b.op("Concat", [n.batch_1d, b.const([1]), n.seq_1d, total_1d], _MODEL, axis=0)
    masks = {False: b.op("Expand", [full, shape], _MODEL)}
    if any(config.is_sliding(layer) for layer in range(config.num_hidden_layers)):
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
        helper.make_tensor_value_info("input_ids", i64, [_BATCH, "sequence_length"]),
        helper.make_tensor_value_info("attention_mask", i64, [_BATCH, "total_sequence_length"]),
        helper.make_tensor_value_info("position_ids", i64, [_BATCH, "sequence_length"]),
    ]
    outputs = [helper.make_tensor_value_info("logits", f32, [_BATCH, "sequence_length", config.vocab_size])]
    for layer in range(config.num_hidden_layers):
        for part in ("key", "value"):
            past: list[str | int] = [_BATCH, kv, "past_sequence_length", dim]
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{layer}.{part}", f32, past))
            present: list[str | int] = [_BATCH, kv, "past_sequence_length + sequence_length", dim]
            outputs.append(helper.make_tensor_value_info(f"present.{layer}.{part}", f32, present))
    return inputs, outputs
