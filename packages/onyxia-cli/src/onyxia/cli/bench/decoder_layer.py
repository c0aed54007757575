"""One decoder layer of `decoder_graph.py`, node for node as the family's exporter writes it.

onnx-community Gemma 3: x + post_norm(attn(pre_norm(x))) and the same around the MLP (sandwich norms,
residual Adds), separate q/k/v projections, per-head q/k RMS norm over [0, -1, head_dim], RotaryEmbedding
with the layer's local or global cache, GroupQueryAttention with `do_rotary` 0, gelu-tanh MLP.

onnxruntime-genai (Llama, Qwen2, Qwen3, Phi-3): each norm is a SkipSimplifiedLayerNormalization that also
adds the residual (output 3 carries the sum on), one fused qkv projection (Qwen2: + one bias Add) read
whole by GroupQueryAttention as packed QKV with `do_rotary` 1 and the cos/sin caches, unless q/k norms sit
between (Qwen3: Split, then Reshape -> SimplifiedLayerNormalization -> Reshape per q and k), SiLU as
Sigmoid and Mul.
"""

from __future__ import annotations

from dataclasses import dataclass

from onyxia.cli.bench.archs import Family
from onyxia.cli.bench.config import DecoderConfig
from onyxia.cli.bench.graph_builder import GraphBuilder

__all__ = ["Shared", "decoder_layer", "linear", "norm", "skip_norm"]

_Q4_ACCURACY_LEVEL = 4  # MatMulNBits may quantize activations to int8 (what the published q4 files ask)


@dataclass(frozen=True)
class Shared:
    """Values every layer reads: Gemma's reshaped position ids, GQA's seqlens_k and total length, and the
    genai cos/sin caches (None: one initializer pair, registered at first use)."""

    position_ids: str | None
    seqlens_k: str
    total_length: str
    cos_sin: tuple[str, str] | None = None


def decoder_layer(
    b: GraphBuilder,
    config: DecoderConfig,
    family: Family,
    layer: int,
    state: tuple[str, str | None],
    shared: Shared,
    q4: bool,
) -> tuple[str, str | None]:
    """(x, residual) -> (x, residual); onnx-community keeps no separate residual (None)."""
    scope, weights = f"/model/layers.{layer}", f"model.layers.{layer}"
    x, residual = state
    hidden = config.hidden_size
    if family.layout != "genai":
        h = norm(b, config, f"{scope}/input_layernorm", x, f"{weights}.input_layernorm.weight", hidden)
        h = _attention(b, config, family, layer, h, shared, q4)
        h = norm(
            b, config, f"{scope}/post_attention_layernorm", h, f"{weights}.post_attention_layernorm.weight", hidden
        )
        x = b.op("Add", f"{scope}/residual_add/Add", [x, h])
        h = norm(
            b, config, f"{scope}/pre_feedforward_layernorm", x, f"{weights}.pre_feedforward_layernorm.weight", hidden
        )
        h = _mlp(b, config, family, layer, h, q4)
        h = norm(
            b, config, f"{scope}/post_feedforward_layernorm", h, f"{weights}.post_feedforward_layernorm.weight", hidden
        )
        return b.op("Add", f"{scope}/residual_add_1/Add", [x, h]), None
    if residual is None:  # layer 0: a plain norm of the embedding, which is the residual
        h = b.op(
            "SimplifiedLayerNormalization",
            f"{scope}/input_layernorm/LayerNorm",
            [x, b.weight(f"{weights}.input_layernorm.weight", (hidden,), "norm")],
            outputs=[f"{scope}/input_layernorm/output_0"],
            epsilon=config.rms_norm_eps,
            axis=-1,
            stash_type=1,
        )
        residual = x
    else:
        h, residual = skip_norm(
            b, config, f"{scope}/input_layernorm", (residual, x), f"{weights}.input_layernorm.weight"
        )
    attn = _attention(b, config, family, layer, h, shared, q4)
    post = f"{scope}/post_attention_layernorm"
    h, residual = skip_norm(b, config, post, (residual, attn), f"{weights}.post_attention_layernorm.weight")
    return _mlp(b, config, family, layer, h, q4), residual


def _attention(
    b: GraphBuilder, config: DecoderConfig, family: Family, layer: int, h: str, shared: Shared, q4: bool
) -> str:
    scope, weights = f"/model/layers.{layer}/attn", f"model.layers.{layer}.attn"
    hidden, heads, kv_heads, dim = (
        config.hidden_size,
        config.num_attention_heads,
        config.num_key_value_heads,
        config.head_dim,
    )
    past, present = f"past_key_values.{layer}", f"present.{layer}"
    outputs = [f"{scope}/GroupQueryAttention/output_0", f"{present}.key", f"{present}.value"]
    window = config.sliding_window if config.is_sliding(layer) else -1
    if family.layout == "genai":
        width = (heads + 2 * kv_heads) * dim
        qkv = linear(b, f"{scope}/qkv_proj", h, f"{weights}.qkv_proj.MatMul.weight", (hidden, width), q4)
        if family.qkv_bias:
            bias = b.weight(f"{weights}.qkv_proj.Add.bias", (width,), "linear")
            qkv = b.op("Add", f"{scope}/qkv_proj/Add", [qkv, bias])
        qkv_inputs = [qkv, "", ""]
        if family.qk_norm:
            split = [f"{scope}/qkv_proj/Split/output_{i}" for i in range(3)]
            sizes = b.constant([heads * dim, kv_heads * dim, kv_heads * dim])
            b.op("Split", f"{scope}/qkv_proj/Split", [qkv, sizes], outputs=split, axis=-1)
            qkv_inputs = [
                _genai_head_norm(b, config, scope, weights, which, x, n)
                for which, x, n in (("q", split[0], heads), ("k", split[1], kv_heads))
            ]
            qkv_inputs.append(split[2])
        cos, sin = shared.cos_sin or (_genai_cache(b, config, "cos"), _genai_cache(b, config, "sin"))
        attn = b.ms_op(
            "GroupQueryAttention",
            f"{scope}/GroupQueryAttention",
            [*qkv_inputs, f"{past}.key", f"{past}.value", shared.seqlens_k, shared.total_length, cos, sin, "", "", ""],
            outputs=outputs,
            num_heads=heads,
            kv_num_heads=kv_heads,
            scale=config.attention_scale,
            local_window_size=window,
            softcap=0.0,
            do_rotary=1,
            rotary_interleaved=0,
        )
    else:
        q = linear(b, f"{scope}/q_proj", h, f"{weights}.q_proj.MatMul.weight", (hidden, heads * dim), q4)
        k = linear(b, f"{scope}/k_proj", h, f"{weights}.k_proj.MatMul.weight", (hidden, kv_heads * dim), q4)
        v = linear(b, f"{scope}/v_proj", h, f"{weights}.v_proj.MatMul.weight", (hidden, kv_heads * dim), q4)
        cache = "local" if config.is_sliding(layer) else "global"
        q = _head_norm_rotary(b, config, (scope, weights, "q"), q, heads, cache, shared)
        k = _head_norm_rotary(b, config, (scope, weights, "k"), k, kv_heads, cache, shared)
        attn = b.ms_op(
            "GroupQueryAttention",
            f"{scope}/GroupQueryAttention",
            [q, k, v, f"{past}.key", f"{past}.value", shared.seqlens_k, shared.total_length, "", "", "", ""],
            outputs=outputs,
            do_rotary=0,
            kv_num_heads=kv_heads,
            local_window_size=window,
            num_heads=heads,
            rotary_interleaved=0,
            scale=config.attention_scale,
            softcap=0.0,
        )
    return linear(b, f"{scope}/o_proj", attn, f"{weights}.o_proj.MatMul.weight", (heads * dim, hidden), q4)


def _genai_cache(b: GraphBuilder, config: DecoderConfig, kind: str) -> str:
    return b.weight(f"{kind}_cache", (config.rope_cache_positions, config.rotary_dim // 2), kind, config.rope_theta)


def _genai_head_norm(
    b: GraphBuilder, config: DecoderConfig, scope: str, weights: str, which: str, x: str, heads: int
) -> str:
    """Qwen3's q_norm / k_norm: RMS norm over each head's head_dim, back to [B, S, heads * head_dim]."""
    name, dim = f"{scope}/{which}_norm", config.head_dim
    x = b.op("Reshape", f"{name}/Reshape_1", [x, b.constant([0, -1, dim])])
    x = norm(b, config, name, x, f"{weights}.{which}_norm.layernorm.weight", dim)
    return b.op("Reshape", f"{name}/Reshape_2", [x, b.constant([0, -1, heads * dim])])


def _head_norm_rotary(
    b: GraphBuilder, config: DecoderConfig, names: tuple[str, str, str], x: str, heads: int, cache: str, shared: Shared
) -> str:
    """Gemma's per-head RMS norm over [0, -1, head_dim], then RoPE on [B, S, heads * head_dim]."""
    scope, weights, which = names
    dim, name = config.head_dim, f"{scope}/{which}_norm"
    x = b.op("Reshape", f"{name}/Reshape", [x, b.constant([0, -1, dim])])
    x = norm(b, config, name, x, f"{weights}.{which}_norm.weight", dim)
    x = b.op("Reshape", f"{name}/Reshape_1", [x, b.constant([0, -1, heads * dim])])
    return b.ms_op(
        "RotaryEmbedding",
        f"{scope}/{which}_rotary/RotaryEmbedding",
        [x, shared.position_ids or "", f"cos_cache_{cache}", f"sin_cache_{cache}"],
        interleaved=0,
        num_heads=0,
        rotary_embedding_dim=0,
    )


def _mlp(b: GraphBuilder, config: DecoderConfig, family: Family, layer: int, h: str, q4: bool) -> str:
    scope, weights = f"/model/layers.{layer}/mlp", f"model.layers.{layer}.mlp"
    up_shape = (config.hidden_size, config.intermediate_size)
    gate = linear(b, f"{scope}/gate_proj", h, f"{weights}.gate_proj.MatMul.weight", up_shape, q4)
    up = linear(b, f"{scope}/up_proj", h, f"{weights}.up_proj.MatMul.weight", up_shape, q4)
    if family.activation == "silu":
        sigmoid = b.op("Sigmoid", f"{scope}/act_fn/Sigmoid", [gate])
        act = b.op("Mul", f"{scope}/act_fn/Mul", [gate, sigmoid])
    else:
        act = b.op("Gelu", f"{scope}/act_fn/Gelu", [gate], approximate="tanh")
    h = b.op("Mul", f"{scope}/Mul", [act, up])
    down_shape = (config.intermediate_size, config.hidden_size)
    return linear(b, f"{scope}/down_proj", h, f"{weights}.down_proj.MatMul.weight", down_shape, q4)


def linear(
    b: GraphBuilder, scope: str, x: str, weight: str, shape: tuple[int, int], q4: bool, output: str | None = None
) -> str:
    if not q4:
        return b.op(
            "MatMul", f"{scope}/MatMul", [x, b.weight(weight, shape, "linear")], outputs=[output] if output else None
        )
    spec = b.quantized_weight(weight, shape)
    k, n = shape
    return b.ms_op(
        "MatMulNBits",
        f"{scope}/MatMul_Q4",
        [x, spec.packed_name, spec.scales_name],
        outputs=[output or f"{scope}/MatMul/output_0"],
        K=k,
        N=n,
        accuracy_level=_Q4_ACCURACY_LEVEL,
        bits=spec.bits,
        block_size=spec.block_size,
    )


def norm(b: GraphBuilder, config: DecoderConfig, scope: str, x: str, weight: str, dim: int) -> str:
    """RMSNorm as SimplifiedLayerNormalization (Gemma's exports store its 1 + w, so the op is the same)."""
    return b.op(
        "SimplifiedLayerNormalization",
        f"{scope}/SimplifiedLayerNormalization",
        [x, b.weight(weight, (dim,), "norm")],
        axis=-1,
        epsilon=config.rms_norm_eps,
        stash_type=1,
    )


def skip_norm(
    b: GraphBuilder, config: DecoderConfig, scope: str, pair: tuple[str, str], weight: str
) -> tuple[str, str]:
    """norm(residual + x) and, as output 3, residual + x for the next skip (the last norm has no output 3)."""
    final = scope.endswith("final_norm_layernorm")
    outputs = [f"{scope}/output_0"] if final else [f"{scope}/output_0", "", "", f"{scope}/output_3"]
    b.ms_op(
        "SkipSimplifiedLayerNormalization",
        f"{scope}/SkipLayerNorm",
        [*pair, b.weight(weight, (config.hidden_size,), "norm")],
        outputs=outputs,
        epsilon=config.rms_norm_eps,
    )
    return outputs[0], outputs[-1]
