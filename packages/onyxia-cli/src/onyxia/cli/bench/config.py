"""The shape of a synthetic decoder: everything the graph, the weights and the JSON files depend on.

`family` names the row of `archs.FAMILIES` that says how the graph is laid out (Gemma 3 as onnx-community
publishes it, the other families as the onnxruntime-genai builder writes them), `layout` overrides that
with another exporter's (`layouts.LAYOUTS`: "dynamo", torch.onnx.export's); the rest are Hugging
Face's hyper-parameters. Gemma 3 alternates five sliding-window layers with one full-attention layer (`sliding_window_pattern` 6),
so `layer_types` is derived for the 270m shape; the tiny shape spells it out because the test fixture
(2 layers: sliding, full) does not follow the pattern.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["FULL", "SLIDING", "DecoderConfig", "pattern_layer_types"]

SLIDING = "sliding_attention"
FULL = "full_attention"


@dataclass(frozen=True)
class DecoderConfig:
    """Hyper-parameters with Hugging Face's names, plus `rope_cache_positions` (rows of the cos/sin caches).

    The caches bound the positions the ONNX graph accepts (RotaryEmbedding rejects larger position ids),
    independently of `max_position_embeddings`, which only goes into config.json. With
    `original_max_position_embeddings` set (Phi-3 LongRoPE), the genai graph switches from a cache of that
    many rows to the `rope_cache_positions`-row long cache once the sequence is longer.
    """

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    layer_types: tuple[str, ...]
    max_position_embeddings: int
    rope_cache_positions: int
    family: str = "gemma3"
    layout: str = ""  # "": the family's published layout (archs.Family.layout); "dynamo": torch.onnx's
    sliding_window: int = 0
    query_pre_attn_scalar: float = 0.0  # 0: head_dim (every family but Gemma)
    tie_word_embeddings: bool = True
    partial_rotary_factor: float = 1.0
    original_max_position_embeddings: int = 0  # 0: no LongRoPE cache switch
    sliding_window_pattern: int = 6
    rope_theta: float = 1_000_000.0
    rope_local_base_freq: float = 10_000.0
    rms_norm_eps: float = 1e-6

    def __post_init__(self) -> None:
        if len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(
                f"DecoderConfig {self.name!r}: {len(self.layer_types)} layer_types for {self.num_hidden_layers} layers"
            )
        unknown = set(self.layer_types) - {SLIDING, FULL}
        if unknown:
            raise ValueError(f"DecoderConfig {self.name!r}: unknown layer types {sorted(unknown)}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"DecoderConfig {self.name!r}: num_attention_heads must be a multiple of kv heads")

    @classmethod
    def gemma3_270m(cls, rope_cache_positions: int = 4096) -> DecoderConfig:
        """google/gemma-3-270m's text decoder; 4096 cache rows keep each cos/sin cache at 2 MiB (not 16)."""
        layers = 18
        return cls(
            name="gemma3-270m",
            hidden_size=640,
            num_hidden_layers=layers,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=256,
            intermediate_size=2048,
            vocab_size=262_144,
            sliding_window=512,
            query_pre_attn_scalar=256,
            layer_types=pattern_layer_types(layers, 6),
            max_position_embeddings=32_768,
            rope_cache_positions=rope_cache_positions,
        )

    @classmethod
    def tiny(cls) -> DecoderConfig:
        """The shared `gemma3-tiny` fixture's shape, so a synthesized tiny model can be compared with it."""
        return cls(
            name="gemma3-tiny",
            hidden_size=64,
            num_hidden_layers=2,
            num_attention_heads=4,
            num_key_value_heads=1,
            head_dim=16,
            intermediate_size=128,
            vocab_size=1024,
            sliding_window=16,
            query_pre_attn_scalar=32,
            layer_types=(SLIDING, FULL),
            max_position_embeddings=512,
            rope_cache_positions=512,
        )

    @property
    def attention_scale(self) -> float:
        """Gemma scales scores by query_pre_attn_scalar^-0.5, which is not head_dim^-0.5 in general."""
        return 1.0 / math.sqrt(self.query_pre_attn_scalar or self.head_dim)

    @property
    def rotary_dim(self) -> int:
        """Dims of each head that rotate (Phi-3's partial rotary: 0.75 of head_dim); the cache holds half."""
        return int(self.head_dim * self.partial_rotary_factor)

    def is_sliding(self, layer: int) -> bool:
        return self.layer_types[layer] == SLIDING

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready fields (the cache manifest keys on them)."""
        data = asdict(self)
        data["layer_types"] = list(self.layer_types)
        return data


def pattern_layer_types(layers: int, pattern: int) -> tuple[str, ...]:
    """Every `pattern`-th layer (1-based) is full attention, as Gemma 3's `sliding_window_pattern` says."""
    return tuple(FULL if (i + 1) % pattern == 0 else SLIDING for i in range(layers))
