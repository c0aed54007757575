"""The decoder families Onyxia is tested on, one row each: what names a model of the family, and what
the graph itself does not say.

The session is convention-driven (inputs and outputs by name, dims from the graph), so a family needs
no code path of its own: its row names the `model_type`s (config.json, genai_config.json) and HF
architectures it covers, the exporters its fixtures come from, and the quirks a user should know.
Adding a family is a row here and a fixture in the tests. A model of another architecture still runs
when its graph follows the conventions (with a warning); when it does not, the error names the
architecture and the families below.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

__all__ = ["FAMILIES", "Family", "describe_architecture", "family_of"]

log = logging.getLogger(__name__)

# "torch.onnx dynamo": torch.onnx.export(dynamo=True, opset_version=23) with past/present as inputs/outputs
# (tools/llm_fixtures/dynamo_export.py): ai.onnx Attention, RotaryEmbedding and RMSNormalization, the cache
# grown by a Concat of past and new before Attention, as optimum's
_EXPORTERS = ("onnxruntime-genai builder fp32/int4", "optimum", "torch.onnx dynamo opset 23")


@dataclass(frozen=True)
class Family:
    name: str
    model_types: tuple[str, ...]  # config.json `model_type`, genai_config.json `model.type`
    architectures: tuple[str, ...]  # config.json `architectures`
    exporters: tuple[str, ...]
    notes: str


FAMILIES = (
    Family(
        "gemma3",
        ("gemma3_text", "gemma3"),
        ("Gemma3ForCausalLM",),
        ("onnx-community fp32/fp16/q4/q4f16", *_EXPORTERS),
        "q/k norms, alternating sliding window, tied head scaled embedding",
    ),
    Family(
        "gemma2",
        ("gemma2",),
        ("Gemma2ForCausalLM",),
        _EXPORTERS,
        "attention and final logit soft-capping (dynamo: transformers' default eager attention, so MatMul/"
        "Softmax rather than an Attention node: sdpa cannot soft-cap)",
    ),
    Family("llama", ("llama",), ("LlamaForCausalLM",), _EXPORTERS, "llama3 rope scaling; SmolLM2, Llama 3.2"),
    Family("qwen2", ("qwen2",), ("Qwen2ForCausalLM",), _EXPORTERS, "q/k/v biases; ChatML; Qwen2.5"),
    Family("qwen3", ("qwen3",), ("Qwen3ForCausalLM",), _EXPORTERS, "per-head q/k norms; head_dim != hidden/heads"),
    Family(
        "phi3",
        ("phi3",),
        ("Phi3ForCausalLM",),
        _EXPORTERS,
        "fused qkv/gate_up, partial rotary, LongRoPE (genai: an If on the length selects the caches; dynamo: "
        "a Where on the largest position, and the partial rotary stays Slice/Neg/Concat, no RotaryEmbedding)",
    ),
    Family(
        "mistral",
        ("mistral",),
        ("MistralForCausalLM",),
        _EXPORTERS,
        "sliding window (the genai builder drops it; onnxruntime's output is the reference)",
    ),
)


def _identity(config: dict[str, Any]) -> tuple[str | None, list[str]]:
    """(model_type, architectures) from config.json, or genai_config.json's model.type."""
    genai = config.get("genai")
    if isinstance(genai, dict):
        model = genai.get("model")
        model_type = model.get("type") if isinstance(model, dict) else None
        return (str(model_type) if model_type else None), []
    architectures = config.get("architectures")
    names = [str(a) for a in architectures] if isinstance(architectures, list) else []
    model_type = config.get("model_type")
    return (str(model_type) if model_type else None), names


def family_of(config: dict[str, Any]) -> Family | None:
    """The row matching the directory's config (None: an architecture Onyxia has not been tested on)."""
    model_type, architectures = _identity(config)
    for family in FAMILIES:
        if model_type in family.model_types or any(a in family.architectures for a in architectures):
            return family
    return None


def describe_architecture(config: dict[str, Any]) -> str:
    """ "architecture X (family Y)" or "architecture X, not a tested family (tested: ...)" for messages."""
    model_type, architectures = _identity(config)
    found = ", ".join(architectures) or model_type or "unknown (no config.json model_type)"
    family = family_of(config)
    if family is not None:
        return f"architecture {found} (family {family.name})"
    return f"architecture {found}, not a tested family (tested: {', '.join(f.name for f in FAMILIES)})"
