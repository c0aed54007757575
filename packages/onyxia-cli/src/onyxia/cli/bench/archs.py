"""The families `onyxia bench --arch` synthesizes: how each one's graph differs, and its real and tiny shapes.

One graph builder (`decoder_graph.py`) reads a `Family` row instead of branching on names: Gemma 3 is laid
out as onnx-community publishes it (separate q/k/v, RotaryEmbedding nodes, sandwich norms), every other
family as the onnxruntime-genai model builder writes it (SkipSimplifiedLayerNormalization chain, one
fused qkv projection into packed-QKV GroupQueryAttention with `do_rotary`, SiLU MLP, GatherBlockQuantized
for a tied 4-bit embedding). The full shapes are the public models' (`SHAPES`), the tiny ones equal the
shared `<family>-tiny-genai` fixtures' so tests can compare structure with them.

Phi-3 is Phi-4-mini's width (hidden 3072, 24/8 heads, FFN 8192, vocab 200064, untied, partial rotary 0.75,
LongRoPE) at 4 of its 32 layers: the full 3.8B model is 15 GB in fp32, which three engines cannot each hold
on a 24 GB host with lavapipe keeping its device memory in host RAM, and would take hours per run.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from onyxia.cli.bench.config import FULL, DecoderConfig

__all__ = ["ARCHS", "DYNAMO", "FAMILIES", "LAYOUT_NAMES", "Family", "arch_config", "family_of", "layout_of"]

DYNAMO = "dynamo"  # torch.onnx.export(dynamo=True, opset_version=23): `dynamo_graph.py`
LAYOUT_NAMES = ("onnx-community", "genai", DYNAMO)


@dataclass(frozen=True)
class Family:
    """What the graph of a family looks like, as fields the builder reads."""

    name: str
    model_type: str  # genai_config.json `model.type` / config.json `model_type`
    architecture: str  # Hugging Face class
    layout: str  # "onnx-community" | "genai"
    activation: str  # "gelu_tanh" | "silu"
    qkv_bias: bool = False  # one Add after the fused qkv projection (Qwen2)
    qk_norm: bool = False  # per-head RMS norm of q and k before rotary (Gemma 3, Qwen3)
    dynamo: bool = True  # also synthesized as torch.onnx's export (Phi-3's partial rotary and LongRoPE: not yet)

    @property
    def layouts(self) -> tuple[str, ...]:
        """The layouts `--layout` accepts for the family: its published one first (the default)."""
        return (self.layout, DYNAMO) if self.dynamo else (self.layout,)


FAMILIES = {
    "gemma3": Family("gemma3", "gemma3_text", "Gemma3ForCausalLM", "onnx-community", "gelu_tanh", qk_norm=True),
    "llama": Family("llama", "llama", "LlamaForCausalLM", "genai", "silu"),
    "qwen2": Family("qwen2", "qwen2", "Qwen2ForCausalLM", "genai", "silu", qkv_bias=True),
    "qwen3": Family("qwen3", "qwen3", "Qwen3ForCausalLM", "genai", "silu", qk_norm=True),
    "phi3": Family("phi3", "phi3", "Phi3ForCausalLM", "genai", "silu", dynamo=False),
}
ARCHS = tuple(FAMILIES)


def _genai(family: str, name: str, shape: tuple[int, int, int, int, int, int, int], **more: object) -> DecoderConfig:
    """(hidden, layers, heads, kv_heads, head_dim, ffn, vocab) plus keyword fields; all layers full attention."""
    hidden, layers, heads, kv_heads, head_dim, ffn, vocab = shape
    fields: dict[str, object] = {"max_position_embeddings": 4096, "rope_cache_positions": 4096, **more}
    return DecoderConfig(
        name=name,
        family=family,
        hidden_size=hidden,
        num_hidden_layers=layers,
        num_attention_heads=heads,
        num_key_value_heads=kv_heads,
        head_dim=head_dim,
        intermediate_size=ffn,
        vocab_size=vocab,
        layer_types=(FULL,) * layers,
        **fields,  # type: ignore[arg-type]
    )


_TINY_CACHE = {"max_position_embeddings": 512, "rope_cache_positions": 512}

# arch -> (real shape, tiny shape); the caches hold 4096 positions (2 MiB at most) like Gemma 3's
SHAPES: dict[str, tuple[DecoderConfig, DecoderConfig]] = {
    "gemma3": (DecoderConfig.gemma3_270m(), DecoderConfig.tiny()),
    "llama": (  # SmolLM2-360M
        _genai(
            "llama", "llama-smollm2-360m", (960, 32, 15, 5, 64, 2560, 49152), rope_theta=100_000.0, rms_norm_eps=1e-5
        ),
        _genai(
            "llama", "llama-tiny", (64, 2, 4, 2, 16, 128, 1024), rope_theta=10_000.0, rms_norm_eps=1e-5, **_TINY_CACHE
        ),
    ),
    "qwen2": (  # Qwen2.5-0.5B
        _genai("qwen2", "qwen2-0.5b", (896, 24, 14, 2, 64, 4864, 151936)),
        _genai("qwen2", "qwen2-tiny", (64, 2, 4, 1, 16, 192, 1024), **_TINY_CACHE),
    ),
    "qwen3": (  # Qwen3-0.6B
        _genai("qwen3", "qwen3-0.6b", (1024, 28, 16, 8, 128, 3072, 151936)),
        _genai("qwen3", "qwen3-tiny", (64, 2, 4, 2, 32, 192, 1024), **_TINY_CACHE),
    ),
    "phi3": (  # Phi-4-mini's width at 4 of 32 layers (module docstring)
        _genai(
            "phi3",
            "phi3-phi4mini-4layers",
            (3072, 4, 24, 8, 128, 8192, 200064),
            rope_theta=10_000.0,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            partial_rotary_factor=0.75,
            original_max_position_embeddings=4096,
            max_position_embeddings=131_072,
            rope_cache_positions=8192,
        ),
        _genai(
            "phi3",
            "phi3-tiny",
            (128, 2, 2, 1, 64, 192, 1024),
            rope_theta=10_000.0,
            rms_norm_eps=1e-5,
            tie_word_embeddings=False,
            partial_rotary_factor=0.75,
            original_max_position_embeddings=64,
            **_TINY_CACHE,
        ),
    ),
}


def arch_config(arch: str, size: str, layout: str | None = None) -> DecoderConfig:
    """The shape for `--arch` and `--size` ("tiny", or "full"; "270m" is Gemma 3's full size), laid out as
    `layout` (None: the family's published layout); another layout gets its own name, so its own cache."""
    if arch not in SHAPES:
        raise ValueError(f"--arch {arch!r} is unknown; choose from {', '.join(ARCHS)}")
    if size == "270m" and arch != "gemma3":
        raise ValueError(f"--size 270m is Gemma 3's shape; for --arch {arch} use --size full or tiny")
    full, tiny = SHAPES[arch]
    config = tiny if size == "tiny" else full
    family = FAMILIES[arch]
    if layout is None or layout == family.layout:
        return config
    if layout not in family.layouts:
        raise ValueError(f"--layout {layout!r}: --arch {arch} is synthesized as {' or '.join(family.layouts)}")
    return replace(config, name=f"{config.name}-{layout}", layout=layout)


def layout_of(config: DecoderConfig) -> str:
    """The layout the graph of `config` is written in: its own `layout`, else its family's."""
    return config.layout or family_of(config).layout


def family_of(config: DecoderConfig) -> Family:
    try:
        return FAMILIES[config.family]
    except KeyError:
        raise ValueError(f"DecoderConfig {config.name!r}: family {config.family!r} is not one of {ARCHS}") from None
