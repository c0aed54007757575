"""The shape of a synthetic Gemma 3 decoder: everything the graph, the weights and config.json depend on.

Gemma 3 alternates five sliding-window layers with one full-attention layer (`sliding_window_pattern` 6),
so `layer_types` is derived for the 270m shape; the tiny shape spells it out because the test fixture
(2 layers: sliding, full) does not follow the pattern.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["FULL", "SLIDING", "GemmaConfig", "pattern_layer_types"]

SLIDING = "sliding_attention"
FULL = "full_attention"


@dataclass(frozen=True)
class GemmaConfig:
    """Hyper-parameters with Hugging Face's names, plus `rope_cache_positions` (rows of the cos/sin caches).

    The caches bound the positions the ONNX graph accepts (RotaryEmbedding rejects larger position ids),
    independently of `max_position_embeddings`, which only goes into config.json.
    """

    name: str
    hidden_size: int
    num_hidden_layers: int
    num_attention_heads: int
    num_key_value_heads: int
    head_dim: int
    intermediate_size: int
    vocab_size: int
    sliding_window: int
    query_pre_attn_scalar: float
    layer_types: tuple[str, ...]
    max_position_embeddings: int
    rope_cache_positions: int
    sliding_window_pattern: int = 6
    rope_theta: float = 1_000_000.0
    rope_local_base_freq: float = 10_000.0
    rms_norm_eps: float = 1e-6

    def __post_init__(self) -> None:
        if len(self.layer_types) != self.num_hidden_layers:
            raise ValueError(
                f"GemmaConfig {self.name!r}: {len(self.layer_types)} layer_types for {self.num_hidden_layers} layers"
            )
        unknown = set(self.layer_types) - {SLIDING, FULL}
        if unknown:
            raise ValueError(f"GemmaConfig {self.name!r}: unknown layer types {sorted(unknown)}")
        if self.num_attention_heads % self.num_key_value_heads:
            raise ValueError(f"GemmaConfig {self.name!r}: num_attention_heads must be a multiple of kv heads")

    @classmethod
    def gemma3_270m(cls, rope_cache_positions: int = 4096) -> GemmaConfig:
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
    def tiny(cls) -> GemmaConfig:
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
        return 1.0 / math.sqrt(self.query_pre_attn_scalar)

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
