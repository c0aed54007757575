"""A decoder graph laid out exactly as its family's exporter writes it, driven by the `archs.Family` row.

Gemma 3 (`layout` "onnx-community") follows the shared `gemma3-tiny` fixture node for node: attention-mask
subgraph -> seqlens_k / total length, position ids reshaped to [-1, S], scaled embedding, the layers
(`decoder_layer.py`), final norm and the tied LM head as MatMul(x, Transpose(embed_tokens)); with `q4`
every projection becomes MatMulNBits as onnxruntime's `MatMulNBitsQuantizer` (4 bits, block 32, symmetric,
accuracy_level 4) would write it, the LM head staying a MatMul on the Transpose output.

The other families ("genai") follow the onnxruntime-genai builder's graphs (`../shared/fixtures/README.md`,
"Graphs"): no position_ids input (GroupQueryAttention rotates from seqlens_k), one cos/sin cache pair fed
to every GQA (Phi-3: chosen by an `If` on the length against original_max_position_embeddings), a
SkipSimplifiedLayerNormalization chain, and `lm_head.MatMul.weight` [hidden, vocab] as the head. A tied
embedding Gathers from Transpose(lm_head) in fp32 and from the head's own 4-bit table through
GatherBlockQuantized in q4, where the head is MatMulNBits too; an untied one stays a float Gather.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import onnx
from onnx import TensorProto, helper, numpy_helper

from onyxia.cli.bench.archs import Family, family_of
from onyxia.cli.bench.config import DecoderConfig
from onyxia.cli.bench.decoder_layer import Shared, decoder_layer, linear, norm, skip_norm
from onyxia.cli.bench.graph_builder import GraphBuilder, QuantizedWeightSpec, WeightSpec
from onyxia.cli.bench.weights import weight_array

__all__ = ["DecoderGraph", "build_decoder_graph"]

_MASK = "/model/attn_mask_reformat/attn_mask_subgraph"
_POS = "/model/pos_ids_reformat"
_ROPE = "/model/rope_caches_subgraph"


@dataclass
class DecoderGraph:
    graph: onnx.GraphProto  # initializers not yet attached
    weights: list[WeightSpec | QuantizedWeightSpec]


def build_decoder_graph(config: DecoderConfig, q4: bool = False) -> DecoderGraph:
    family = family_of(config)
    genai = family.layout == "genai"
    b = GraphBuilder(inline_constants=genai)
    if not genai:
        for scope, theta in (("global", config.rope_theta), ("local", config.rope_local_base_freq)):
            for kind in ("cos", "sin"):
                b.weight(f"{kind}_cache_{scope}", (config.rope_cache_positions, config.head_dim // 2), kind, theta)
    cos_sin = _longrope_caches(b, config) if config.original_max_position_embeddings else None
    seqlens_k, total_length = _attention_mask(b, genai)
    shared = Shared(None if genai else _position_ids(b), seqlens_k, total_length, cos_sin)
    x = _embedding(b, config, family, q4)
    residual: str | None = None
    for layer in range(config.num_hidden_layers):
        x, residual = decoder_layer(b, config, family, layer, (x, residual), shared, q4)
    final = f"/model/layers.{config.num_hidden_layers}/final_norm_layernorm"
    if residual is None:
        x = norm(b, config, "/model/final_norm", x, "model.norm.weight", config.hidden_size)
        head = b.op("Transpose", "/lm_head/Transpose", [x_embed_weight(config, family)], perm=[1, 0])
        b.op("MatMul", "/lm_head/MatMul", [x, head], outputs=["logits"])
    else:
        weight = f"model.layers.{config.num_hidden_layers}.final_norm_layernorm.weight"
        x, _ = skip_norm(b, config, final, (residual, x), weight)
        shape = (config.hidden_size, config.vocab_size)
        linear(b, "/lm_head", x, "lm_head.MatMul.weight", shape, q4, output="logits")
    inputs, outputs = _graph_io(config, genai)
    graph = helper.make_graph(b.all_nodes(), "main_graph", inputs, outputs)
    return DecoderGraph(graph, b.all_weights())


def x_embed_weight(config: DecoderConfig, family: Family) -> str:
    """The float table the embedding Gather reads (Gemma's tied head transposes the same name)."""
    if family.layout == "genai" and config.tie_word_embeddings:
        return "lm_head.MatMul.weight"
    return "model.embed_tokens.weight"


def _embedding(b: GraphBuilder, config: DecoderConfig, family: Family, q4: bool) -> str:
    hidden, vocab = config.hidden_size, config.vocab_size
    if family.layout != "genai":  # Gemma: sqrt(hidden)-scaled lookup in the tied table
        embed = b.weight("model.embed_tokens.weight", (vocab, hidden), "embedding")
        x = b.op("Gather", "/model/embed_tokens/Gather", [embed, "input_ids"])
        return b.op("Mul", "/model/embed_tokens/Mul", [x, b.constant(float(hidden) ** 0.5)])
    if not config.tie_word_embeddings:
        return b.op(
            "Gather",
            "/model/embed_tokens/Gather",
            [b.weight("model.embed_tokens.weight", (vocab, hidden), "embedding"), "input_ids"],
        )
    if not q4:
        # the head registers lm_head.MatMul.weight, so it comes last among the initializers, as in the builder's file
        table = b.op("Transpose", "/model/embed_tokens/Transpose", ["lm_head.MatMul.weight"], perm=[1, 0])
        return b.op("Gather", "/model/embed_tokens/Gather", [table, "input_ids"])
    head = QuantizedWeightSpec(WeightSpec("lm_head.MatMul.weight", (hidden, vocab), "linear"))  # registered by the head
    rows = b.op("Reshape", "/model/embed_tokens/Reshape", [head.packed_name, b.constant([vocab, hidden // 2])])
    return b.ms_op(
        "GatherBlockQuantized",
        "/model/embed_tokens/GatherBlockQuantized",
        [rows, "input_ids", head.scales_name],
        bits=head.bits,
        block_size=head.block_size,
        gather_axis=0,
        quantize_axis=1,
    )


def _attention_mask(b: GraphBuilder, genai: bool) -> tuple[str, str]:
    """seqlens_k = int32(sum(mask, axis 1) - 1) ([B, 1], genai [B]) and total_sequence_length = int32(mask.shape[1])."""
    axis = b.constant([1])
    if genai:
        summed = b.op("ReduceSum", f"{_MASK}/ReduceSum", ["attention_mask", axis], keepdims=0)
        minus_one = b.op("Sub", f"{_MASK}/Sub", [summed, axis])
    else:
        summed = b.op("ReduceSum", f"{_MASK}/ReduceSum", ["attention_mask", axis])
        minus_one = b.op("Sub", f"{_MASK}/Sub", [summed, b.constant(1)])
    seqlens_k = b.op("Cast", f"{_MASK}/Sub/Cast", [minus_one], to=TensorProto.INT32)
    return seqlens_k, b.op("Cast", f"{_MASK}/Gather/Cast", [_total_length(b)], to=TensorProto.INT32)


def _total_length(b: GraphBuilder) -> str:
    """int64 attention_mask.shape[1]; built once (the LongRoPE switch reads it before the mask subgraph)."""
    name = f"{_MASK}/Gather/output_0"
    if not any(name in node.output for node in b.nodes):
        shape = b.op("Shape", f"{_MASK}/Shape", ["attention_mask"])
        b.op("Gather", f"{_MASK}/Gather", [shape, b.constant(1)], axis=0)
    return name


def _position_ids(b: GraphBuilder) -> str:
    """RotaryEmbedding wants position_ids as [-1, sequence_length]."""
    shape = b.op("Shape", f"{_POS}/Shape", ["input_ids"])
    length = b.op("Gather", f"{_POS}/Gather", [shape, b.constant(1)], axis=0)
    length = b.op("Unsqueeze", f"{_POS}/Unsqueeze", [length, b.constant([0])])
    target = b.op("Concat", f"{_POS}/Concat", [b.constant([-1]), length], axis=0)
    return b.op("Reshape", f"{_POS}/Reshape", ["position_ids", target])


def _longrope_caches(b: GraphBuilder, config: DecoderConfig) -> tuple[str, str]:
    """`If(total length > original max)`: the long caches (frequencies stretched, cos/sin scaled by LongRoPE's
    sqrt(1 + ln(scale) / ln(original))) else the short ones; each branch two Constants, as the builder writes."""
    original, half = config.original_max_position_embeddings, config.rotary_dim // 2
    scale = config.max_position_embeddings / original
    magnitude = math.sqrt(1 + math.log(scale) / math.log(original))
    limit = b.constant(original)  # written before the length subgraph, as the builder orders it
    greater = b.op("Greater", f"{_ROPE}/Greater", [_total_length(b), limit])
    branches = {}
    for branch, rows, stretch, gain in (
        ("large", config.rope_cache_positions, 4.0, magnitude),
        ("small", original, 1.0, 1.0),
    ):
        nodes, outputs = [], []
        for kind in ("cos", "sin"):
            name = f"{kind}_cache_{branch}"
            spec = WeightSpec(name, (rows, half), kind, config.rope_theta, stretch, gain)
            tensor = numpy_helper.from_array(weight_array(spec, seed=0), name)
            nodes.append(
                helper.make_node("Constant", [], [name], name=f"/{branch}/{kind}_cache/Constant", value=tensor)
            )
            outputs.append(helper.make_tensor_value_info(name, TensorProto.FLOAT, [rows, half]))
        branches[branch] = helper.make_graph(nodes, f"{branch}_rope_caches_graph", [], outputs)
    b.op(
        "If",
        f"{_ROPE}/If",
        [greater],
        outputs=["cos_cache", "sin_cache"],
        then_branch=branches["large"],
        else_branch=branches["small"],
    )
    return "cos_cache", "sin_cache"


def _graph_io(config: DecoderConfig, genai: bool) -> tuple[list[onnx.ValueInfoProto], list[onnx.ValueInfoProto]]:
    """onnx-community interleaves key/value per layer; the genai builder lists every key, then every value."""
    kv, f32, i64 = config.num_key_value_heads, TensorProto.FLOAT, TensorProto.INT64
    dim: str | int = "kv_cache_dim" if genai else config.head_dim
    inputs = [
        helper.make_tensor_value_info("input_ids", i64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info("attention_mask", i64, ["batch_size", "total_sequence_length"]),
    ]
    if not genai:
        inputs.append(helper.make_tensor_value_info("position_ids", i64, ["batch_size", "sequence_length"]))
    logits: list[str | int] = ["batch_size", "sequence_length", config.vocab_size]
    outputs = [helper.make_tensor_value_info("logits", f32, logits)]
    layers = range(config.num_hidden_layers)
    order = (
        [(p, n) for p in ("key", "value") for n in layers]
        if genai
        else [(p, n) for n in layers for p in ("key", "value")]
    )
    for part, layer in order:
        past: list[str | int] = ["batch_size", kv, "past_sequence_length", dim]
        inputs.append(helper.make_tensor_value_info(f"past_key_values.{layer}.{part}", f32, past))
        present: list[str | int] = ["batch_size", kv, "total_sequence_length", dim]
        outputs.append(helper.make_tensor_value_info(f"present.{layer}.{part}", f32, present))
    return inputs, outputs
