"""The Gemma 3 decoder graph exactly as onnx-community's `gemma-3-270m-it-ONNX` lays it out.

Node names, order, op types, attributes and IO follow the shared `gemma3-tiny` fixture node for node, so
the synthesized model exercises the same loader paths, rewrites and kernels as the published files:
attention-mask subgraph -> seqlens_k / total length, position ids reshaped to [-1, S], scaled embedding,
per layer (norm, q/k/v, q/k RMS norm over [0, -1, head_dim], RotaryEmbedding with the local or global
cache, GroupQueryAttention, o_proj, sandwich norms, gelu-tanh MLP), final norm and the tied LM head as
MatMul(x, Transpose(embed_tokens)). With `q4`, every projection becomes MatMulNBits as onnxruntime's
`MatMulNBitsQuantizer` (4 bits, block 32, symmetric, accuracy_level 4) would write it; the LM head stays a
MatMul because its weight is a Transpose output, not an initializer.
"""

from __future__ import annotations

from dataclasses import dataclass

import onnx
from onnx import TensorProto, helper

from onyxia.cli.bench.config import GemmaConfig
from onyxia.cli.bench.graph_builder import GraphBuilder, QuantizedWeightSpec, WeightSpec

__all__ = ["GemmaGraph", "build_gemma_graph"]

_MASK = "/model/attn_mask_reformat/attn_mask_subgraph"
_POS = "/model/pos_ids_reformat"
_Q4_ACCURACY_LEVEL = 4  # MatMulNBits may quantize activations to int8 (what the published q4 files ask)


@dataclass
class GemmaGraph:
    graph: onnx.GraphProto  # initializers not yet attached
    weights: list[WeightSpec | QuantizedWeightSpec]


@dataclass(frozen=True)
class _Shared:
    """Values every layer reads: reshaped position ids, GQA's seqlens_k and total sequence length."""

    position_ids: str
    seqlens_k: str
    total_length: str


def build_gemma_graph(config: GemmaConfig, q4: bool = False) -> GemmaGraph:
    b = GraphBuilder()
    half = config.head_dim // 2
    for scope, theta in (("global", config.rope_theta), ("local", config.rope_local_base_freq)):
        for kind in ("cos", "sin"):
            b.weight(f"{kind}_cache_{scope}", (config.rope_cache_positions, half), kind, theta)
    seqlens_k, total_length = _attention_mask(b)
    shared = _Shared(_position_ids(b), seqlens_k, total_length)
    scale = float(config.hidden_size) ** 0.5
    embed = b.weight("model.embed_tokens.weight", (config.vocab_size, config.hidden_size), "embedding")
    x = b.op("Gather", "/model/embed_tokens/Gather", [embed, "input_ids"])
    x = b.op("Mul", "/model/embed_tokens/Mul", [x, b.constant(scale)])
    for layer in range(config.num_hidden_layers):
        x = _decoder_layer(b, config, layer, x, shared, q4)
    x = _norm(b, config, "/model/final_norm", x, "model.norm.weight", config.hidden_size)
    head = b.op("Transpose", "/lm_head/Transpose", [embed], perm=[1, 0])
    b.op("MatMul", "/lm_head/MatMul", [x, head], outputs=["logits"])
    inputs, outputs = _graph_io(config)
    graph = helper.make_graph(b.all_nodes(), "main_graph", inputs, outputs)
    return GemmaGraph(graph, b.all_weights())


def _attention_mask(b: GraphBuilder) -> tuple[str, str]:
    """seqlens_k = int32(sum(mask, axis 1) - 1) [B, 1] and total_sequence_length = int32(mask.shape[1])."""
    summed = b.op("ReduceSum", f"{_MASK}/ReduceSum", ["attention_mask", b.constant([1])])
    minus_one = b.op("Sub", f"{_MASK}/Sub", [summed, b.constant(1)])
    seqlens_k = b.op("Cast", f"{_MASK}/Sub/Cast", [minus_one], to=TensorProto.INT32)
    shape = b.op("Shape", f"{_MASK}/Shape", ["attention_mask"])
    total = b.op("Gather", f"{_MASK}/Gather", [shape, b.constant(1)], axis=0)
    return seqlens_k, b.op("Cast", f"{_MASK}/Gather/Cast", [total], to=TensorProto.INT32)


def _position_ids(b: GraphBuilder) -> str:
    """RotaryEmbedding wants position_ids as [-1, sequence_length]."""
    shape = b.op("Shape", f"{_POS}/Shape", ["input_ids"])
    length = b.op("Gather", f"{_POS}/Gather", [shape, b.constant(1)], axis=0)
    length = b.op("Unsqueeze", f"{_POS}/Unsqueeze", [length, b.constant([0])])
    target = b.op("Concat", f"{_POS}/Concat", [b.constant([-1]), length], axis=0)
    return b.op("Reshape", f"{_POS}/Reshape", ["position_ids", target])


def _decoder_layer(b: GraphBuilder, config: GemmaConfig, layer: int, x: str, shared: _Shared, q4: bool) -> str:
    """Gemma's sandwich block: x + post_norm(attn(pre_norm(x))), then the same around the MLP."""
    scope, weights = f"/model/layers.{layer}", f"model.layers.{layer}"
    hidden = config.hidden_size
    h = _norm(b, config, f"{scope}/input_layernorm", x, f"{weights}.input_layernorm.weight", hidden)
    h = _attention(b, config, layer, h, shared, q4)
    h = _norm(b, config, f"{scope}/post_attention_layernorm", h, f"{weights}.post_attention_layernorm.weight", hidden)
    x = b.op("Add", f"{scope}/residual_add/Add", [x, h])
    h = _norm(b, config, f"{scope}/pre_feedforward_layernorm", x, f"{weights}.pre_feedforward_layernorm.weight", hidden)
    h = _mlp(b, config, layer, h, q4)
    h = _norm(
        b, config, f"{scope}/post_feedforward_layernorm", h, f"{weights}.post_feedforward_layernorm.weight", hidden
    )
    return b.op("Add", f"{scope}/residual_add_1/Add", [x, h])


def _attention(b: GraphBuilder, config: GemmaConfig, layer: int, h: str, shared: _Shared, q4: bool) -> str:
    scope, weights = f"/model/layers.{layer}/attn", f"model.layers.{layer}.attn"
    hidden, heads, kv_heads, dim = (
        config.hidden_size,
        config.num_attention_heads,
        config.num_key_value_heads,
        config.head_dim,
    )
    q = _linear(b, f"{scope}/q_proj", h, f"{weights}.q_proj.MatMul.weight", (hidden, heads * dim), q4)
    k = _linear(b, f"{scope}/k_proj", h, f"{weights}.k_proj.MatMul.weight", (hidden, kv_heads * dim), q4)
    v = _linear(b, f"{scope}/v_proj", h, f"{weights}.v_proj.MatMul.weight", (hidden, kv_heads * dim), q4)
    cache = "local" if config.is_sliding(layer) else "global"
    q = _head_norm_rotary(b, config, (scope, weights, "q"), q, heads, cache, shared.position_ids)
    k = _head_norm_rotary(b, config, (scope, weights, "k"), k, kv_heads, cache, shared.position_ids)
    past, present = f"past_key_values.{layer}", f"present.{layer}"
    attn = b.ms_op(
        "GroupQueryAttention",
        f"{scope}/GroupQueryAttention",
        [q, k, v, f"{past}.key", f"{past}.value", shared.seqlens_k, shared.total_length, "", "", "", ""],
        outputs=[f"{scope}/GroupQueryAttention/output_0", f"{present}.key", f"{present}.value"],
        do_rotary=0,
        kv_num_heads=kv_heads,
        local_window_size=config.sliding_window if config.is_sliding(layer) else -1,
        num_heads=heads,
        rotary_interleaved=0,
        scale=config.attention_scale,
        softcap=0.0,
    )
    return _linear(b, f"{scope}/o_proj", attn, f"{weights}.o_proj.MatMul.weight", (heads * dim, hidden), q4)


def _head_norm_rotary(
    b: GraphBuilder, config: GemmaConfig, names: tuple[str, str, str], x: str, heads: int, cache: str, positions: str
) -> str:
    """Per-head RMS norm (q_norm / k_norm) over [0, -1, head_dim], then RoPE on [B, S, heads * head_dim]."""
    scope, weights, which = names
    dim, norm = config.head_dim, f"{scope}/{which}_norm"
    x = b.op("Reshape", f"{norm}/Reshape", [x, b.constant([0, -1, dim])])
    x = _norm(b, config, norm, x, f"{weights}.{which}_norm.weight", dim)
    x = b.op("Reshape", f"{norm}/Reshape_1", [x, b.constant([0, -1, heads * dim])])
    return b.ms_op(
        "RotaryEmbedding",
        f"{scope}/{which}_rotary/RotaryEmbedding",
        [x, positions, f"cos_cache_{cache}", f"sin_cache_{cache}"],
        interleaved=0,
        num_heads=0,
        rotary_embedding_dim=0,
    )


def _mlp(b: GraphBuilder, config: GemmaConfig, layer: int, h: str, q4: bool) -> str:
    scope, weights = f"/model/layers.{layer}/mlp", f"model.layers.{layer}.mlp"
    up_shape = (config.hidden_size, config.intermediate_size)
    gate = _linear(b, f"{scope}/gate_proj", h, f"{weights}.gate_proj.MatMul.weight", up_shape, q4)
    up = _linear(b, f"{scope}/up_proj", h, f"{weights}.up_proj.MatMul.weight", up_shape, q4)
    act = b.op("Gelu", f"{scope}/act_fn/Gelu", [gate], approximate="tanh")
    h = b.op("Mul", f"{scope}/Mul", [act, up])
    down_shape = (config.intermediate_size, config.hidden_size)
    return _linear(b, f"{scope}/down_proj", h, f"{weights}.down_proj.MatMul.weight", down_shape, q4)


def _linear(b: GraphBuilder, scope: str, x: str, weight: str, shape: tuple[int, int], q4: bool) -> str:
    if not q4:
        return b.op("MatMul", f"{scope}/MatMul", [x, b.weight(weight, shape, "linear")])
    spec = b.quantized_weight(weight, shape)
    k, n = shape
    return b.ms_op(
        "MatMulNBits",
        f"{scope}/MatMul_Q4",
        [x, spec.packed_name, spec.scales_name],
        outputs=[f"{scope}/MatMul/output_0"],
        K=k,
        N=n,
        accuracy_level=_Q4_ACCURACY_LEVEL,
        bits=spec.bits,
        block_size=spec.block_size,
    )


def _norm(b: GraphBuilder, config: GemmaConfig, scope: str, x: str, weight: str, dim: int) -> str:
    """Gemma's RMSNorm multiplies by (1 + w); the exports store 1 + w, so a plain SimplifiedLayerNormalization."""
    return b.op(
        "SimplifiedLayerNormalization",
        f"{scope}/SimplifiedLayerNormalization",
        [x, b.weight(weight, (dim,), "norm")],
        axis=-1,
        epsilon=config.rms_norm_eps,
        stash_type=1,
    )


def _graph_io(config: GemmaConfig) -> tuple[list[onnx.ValueInfoProto], list[onnx.ValueInfoProto]]:
    kv, dim, f32, i64 = config.num_key_value_heads, config.head_dim, TensorProto.FLOAT, TensorProto.INT64
    inputs = [
        helper.make_tensor_value_info("input_ids", i64, ["batch_size", "sequence_length"]),
        helper.make_tensor_value_info("attention_mask", i64, ["batch_size", "total_sequence_length"]),
        helper.make_tensor_value_info("position_ids", i64, ["batch_size", "sequence_length"]),
    ]
    logits: list[str | int] = ["batch_size", "sequence_length", config.vocab_size]
    outputs = [helper.make_tensor_value_info("logits", f32, logits)]
    for layer in range(config.num_hidden_layers):
        for part in ("key", "value"):
            past: list[str | int] = ["batch_size", kv, "past_sequence_length", dim]
            inputs.append(helper.make_tensor_value_info(f"past_key_values.{layer}.{part}", f32, past))
            present: list[str | int] = ["batch_size", kv, "total_sequence_length", dim]
            outputs.append(helper.make_tensor_value_info(f"present.{layer}.{part}", f32, present))
    return inputs, outputs
