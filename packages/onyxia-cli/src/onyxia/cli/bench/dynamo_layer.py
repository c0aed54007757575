"""One decoder layer of `dynamo_graph.py`, node for node as torch.onnx.export(dynamo=True, opset 23) writes it.

What torch 2.13 writes for transformers' sdpa attention (the `<family>-tiny-dynamo` fixtures): RMSNormalization
per norm; q/k/v as MatMul (+ bias Add, Qwen2), Reshape to [B, S, -1, head_dim] and Transpose to
[B, heads, S, head_dim]; Qwen3's q_norm/k_norm between that Reshape and Transpose, Gemma 3's after all three
Transposes; per rotated tensor a Cos and a Sin of the positions' angles and an ai.onnx RotaryEmbedding
(`num_heads` given, 4-D input); present = Concat(past, new) on axis -2 outside Attention; for grouped heads
repeat-kv as Unsqueeze -> Expand([B, kv, groups, T, head_dim]) -> Reshape([B, heads, T, head_dim]) of each
present; ai.onnx Attention with the 4-D bool mask (is_causal 0); Transpose, Reshape([B, S, -1]) and the o
projection; residual Adds (Gemma 3: sandwich norms around attention and MLP); SiLU as Sigmoid and Mul,
Gemma's tanh Gelu. With the batch dynamic every Reshape shape is a Concat of the batch, the lengths and
constants, which torch builds once, in the first layer, and every later layer reuses.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from onyxia.cli.bench.config import DecoderConfig
from onyxia.cli.bench.dynamo_builder import TorchStyleBuilder

__all__ = ["DynamoStyle", "LayerInputs", "dynamo_layer", "rms_norm"]

_HEADS_FIRST = [0, 2, 1, 3]


@dataclass(frozen=True)
class DynamoStyle:
    """How a family's transformers module differs in the export (one row per family, `dynamo_graph.STYLES`)."""

    qkv_bias: bool = False  # Qwen2's q/k/v biases
    qk_norm: str = ""  # "" | "heads" (Qwen3: [1, S, heads, D] before the Transpose) | "transposed" (Gemma 3)
    sandwich_norms: bool = False  # Gemma 3: norms after attention and MLP too, pre_feedforward_layernorm
    activation: str = "silu"  # "silu" | "gelu_tanh"
    embed_scale: bool = False  # Gemma 3: embedding * sqrt(hidden)


@dataclass(frozen=True)
class LayerInputs:
    """Values the prologue computes once: the mask and angles per layer kind, the batch and lengths as [n]."""

    masks: dict[bool, str]  # is_sliding -> [B, 1, S, T] bool
    angles: dict[bool, str]  # is_sliding -> positions * inv_freq [B, S, rotary_dim / 2]
    batch_1d: str  # [B] int64
    seq_1d: str  # [S] int64
    total_1d: str  # [past + S] int64
    built: dict[str, str] = field(default_factory=dict)  # values the first layer makes and later ones reuse


def dynamo_layer(
    b: TorchStyleBuilder, config: DecoderConfig, style: DynamoStyle, layer: int, x: str, shared: LayerInputs, q4: bool
) -> str:
    scope = f"model.model.layers.{layer}"
    hidden = config.hidden_size
    h = rms_norm(b, config, x, f"{scope}.input_layernorm", hidden)
    h = _attention(b, config, style, layer, h, shared, q4)
    if style.sandwich_norms:
        h = rms_norm(b, config, h, f"{scope}.post_attention_layernorm", hidden)
    x = b.op("Add", [x, h], scope)
    after = "pre_feedforward_layernorm" if style.sandwich_norms else "post_attention_layernorm"
    h = _mlp(b, config, style, scope, rms_norm(b, config, x, f"{scope}.{after}", hidden), q4)
    if style.sandwich_norms:
        h = rms_norm(b, config, h, f"{scope}.post_feedforward_layernorm", hidden)
    return b.op("Add", [x, h], scope)


def rms_norm(b: TorchStyleBuilder, config: DecoderConfig, x: str, module: str, dim: int) -> str:
    weight = b.weight(f"{module}.weight", (dim,), "norm")
    return b.op("RMSNormalization", [x, weight], module, axis=-1, epsilon=config.rms_norm_eps, stash_type=1)


def _attention(
    b: TorchStyleBuilder, config: DecoderConfig, style: DynamoStyle, layer: int, h: str, shared: LayerInputs, q4: bool
) -> str:
    scope = f"model.model.layers.{layer}.self_attn"
    heads, kv_heads, dim = config.num_attention_heads, config.num_key_value_heads, config.head_dim
    q, k, v = (
        _project(b, config, style, scope, h, which, count, shared, q4)
        for which, count in (("q", heads), ("k", kv_heads), ("v", kv_heads))
    )
    if style.qk_norm == "transposed":
        q = rms_norm(b, config, q, f"{scope}.q_norm", dim)
        k = rms_norm(b, config, k, f"{scope}.k_norm", dim)
    sliding = config.is_sliding(layer)
    q, k = (_rotate(b, scope, x, shared.angles[sliding], count) for x, count in ((q, heads), (k, kv_heads)))
    past, present = f"past_key_values.{layer}", f"present.{layer}"
    key = b.op("Concat", [f"{past}.key", k], scope, outputs=[f"{present}.key"], axis=-2)
    value = b.op("Concat", [f"{past}.value", v], scope, outputs=[f"{present}.value"], axis=-2)
    groups = heads // kv_heads
    if groups > 1:  # transformers' repeat_kv (a no-op, so no nodes, when every head has its own kv)
        repeated = []
        for cache in (key, value):
            wide = b.op("Unsqueeze", [cache, b.const([2])], scope)
            wide = b.op("Expand", [wide, _shape(b, shared, scope, "repeat_kv", [kv_heads, groups, "T", dim])], scope)
            repeated.append(
                b.op("Reshape", [wide, _shape(b, shared, scope, "kv", [heads, "T", dim])], scope, allowzero=1)
            )
        key, value = repeated
    attended = b.op(
        "Attention",
        [q, key, value, shared.masks[sliding]],
        scope,
        qk_matmul_output_mode=0,
        softcap=0.0,
        scale=config.attention_scale,
        is_causal=0,
    )
    attended = b.op("Transpose", [attended], scope, perm=_HEADS_FIRST)
    attended = b.op("Reshape", [attended, _shape(b, shared, scope, "merge", ["S", -1])], scope, allowzero=1)
    shape_o = (heads * dim, config.hidden_size)
    return b.linear(attended, f"{scope}.o_proj.weight.T", shape_o, f"{scope}.o_proj", q4)


def _project(
    b: TorchStyleBuilder,
    config: DecoderConfig,
    style: DynamoStyle,
    scope: str,
    h: str,
    which: str,
    heads: int,
    shared: LayerInputs,
    q4: bool,
) -> str:
    """h @ W (+ bias) as [B, heads, S, head_dim] (Qwen3's q/k norm over each head on the way); q, k and v
    share one view shape, [B, S, -1, head_dim]."""
    module, dim = f"{scope}.{which}_proj", config.head_dim
    x = b.linear(h, f"{module}.weight.T", (config.hidden_size, heads * dim), module, q4)
    if style.qkv_bias:
        x = b.op("Add", [x, b.weight(f"{module}.bias", (heads * dim,), "linear")], module)
    x = b.op("Reshape", [x, _shape(b, shared, scope, "heads", ["S", -1, dim])], scope, allowzero=1)
    if style.qk_norm == "heads" and which != "v":
        x = rms_norm(b, config, x, f"{scope}.{which}_norm", dim)
    return b.op("Transpose", [x], scope, perm=_HEADS_FIRST)


def _shape(b: TorchStyleBuilder, shared: LayerInputs, scope: str, key: str, dims: list[int | str]) -> str:
    """The shape [B, *dims] as torch writes it for a Reshape or Expand: a Concat of the batch, the lengths
    ("S" the new tokens, "T" past + new) and [n] constants, made where first needed and shared by key."""
    if key not in shared.built:
        lengths = {"S": shared.seq_1d, "T": shared.total_1d}
        parts = [lengths[d] if isinstance(d, str) else b.const([d]) for d in dims]
        shared.built[key] = b.op("Concat", [shared.batch_1d, *parts], scope, axis=0)
    return shared.built[key]


def _rotate(b: TorchStyleBuilder, scope: str, x: str, angles: str, heads: int) -> str:
    """torch writes the Cos and Sin of the angles again for every tensor it rotates."""
    cos, sin = b.op("Cos", [angles], scope), b.op("Sin", [angles], scope)
    return b.op("RotaryEmbedding", [x, cos, sin], scope, interleaved=0, num_heads=heads)


def _mlp(b: TorchStyleBuilder, config: DecoderConfig, style: DynamoStyle, layer_scope: str, h: str, q4: bool) -> str:
    scope = f"{layer_scope}.mlp"
    up_shape = (config.hidden_size, config.intermediate_size)
    gate = b.linear(h, f"{scope}.gate_proj.weight.T", up_shape, f"{scope}.gate_proj", q4)
    if style.activation == "silu":
        act = b.op("Mul", [gate, b.op("Sigmoid", [gate], scope)], scope)
    else:
        act = b.op("Gelu", [gate], scope, approximate="tanh")
    up = b.linear(h, f"{scope}.up_proj.weight.T", up_shape, f"{scope}.up_proj", q4)
    h = b.op("Mul", [act, up], scope)
    down_shape = (config.intermediate_size, config.hidden_size)
    return b.linear(h, f"{scope}.down_proj.weight.T", down_shape, f"{scope}.down_proj", q4)
