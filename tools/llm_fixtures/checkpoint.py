"""Build a family's seeded random-weight Hugging Face checkpoint (config, weights, generation config).

Why not transformers' own init: its std 0.02 weights give near-uniform attention and flat logits, so a
wrong window, rotary variant or soft-cap would hardly change the greedy tokens. Here every matrix is
N(0, 0.1), q/k projections are wider (``Family.qk_std``) so attention is peaky, RMSNorm weights are
1 ± 0.2 (Gemma's ``1 + w`` convention: w ± 0.2) and the final norm is scaled up so logits spread over
several units and greedy margins are rarely near ties.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from .families import Family

__all__ = ["token_ids", "build_checkpoint"]


def token_ids(family: Family, tok: Tokenizer) -> dict[str, Any]:
    """bos / eos / pad ids for the HF config and generation config, looked up in the trained tokenizer."""

    def tid(token: str) -> int:
        found = tok.token_to_id(token)
        if found is None:
            raise KeyError(f"family {family.name}: token {token!r} not in the trained tokenizer")
        return found

    bos = family.bos or ("<s>" if tok.token_to_id("<s>") is not None else family.pad)
    return {
        "bos_token_id": tid(bos) if bos else None,
        "eos_token_id": [tid(t) for t in family.eos] if len(family.eos) > 1 else tid(family.eos[0]),
        "pad_token_id": tid(family.pad) if family.pad else None,
    }


def _std(name: str, family: Family) -> float:
    return family.qk_std if (".q_proj." in name or ".k_proj." in name) else 0.1


def _init(model: Any, family: Family, seed: int) -> None:
    import torch

    gen = torch.Generator().manual_seed(seed)
    gemma = family.config["model_type"].startswith("gemma")
    cfg = family.config
    with torch.no_grad():
        for name, p in sorted(model.named_parameters(), key=lambda kv: kv[0]):
            noise = torch.randn(p.shape, generator=gen, dtype=torch.float32)
            if p.ndim == 1 and "norm" in name:
                offset = 0.0 if gemma else 1.0
                if name == "model.norm.weight":
                    offset = family.final_norm_scale - (1.0 if gemma else 0.0)
                p.copy_(offset + 0.2 * noise)
            elif p.ndim == 1:  # biases (Qwen2 q/k/v)
                p.copy_(0.2 * noise)
            elif name.endswith("qkv_proj.weight"):  # Phi-3: rows are q | k | v
                head_dim = cfg["hidden_size"] // cfg["num_attention_heads"]
                qk_rows = (cfg["num_attention_heads"] + cfg["num_key_value_heads"]) * head_dim
                std = torch.full((p.shape[0], 1), 0.1)
                std[:qk_rows] = family.qk_std
                p.copy_(noise * std)
            else:
                p.copy_(noise * _std(name, family))


def build_checkpoint(family: Family, tok: Tokenizer, out: Path, seed: int) -> dict[str, Any]:
    """Write ``config.json``, ``generation_config.json`` and safetensors weights to ``out``; return the config."""
    import torch
    import transformers

    torch.manual_seed(seed)
    ids = token_ids(family, tok)
    kwargs = {k: v for k, v in family.config.items() if k != "model_type"}
    config = transformers.AutoConfig.for_model(family.config["model_type"], **kwargs, **ids)
    config.architectures = [family.hf_class]
    model = getattr(transformers, family.hf_class)(config).to(torch.float32).eval()
    _init(model, family, seed)
    if getattr(config, "tie_word_embeddings", False):
        model.tie_weights()
    model.save_pretrained(str(out))
    gen = transformers.GenerationConfig(**{k: v for k, v in ids.items() if v is not None})
    gen.save_pretrained(str(out))
    return _add_legacy_rope_keys(out / "config.json")


def _add_legacy_rope_keys(path: Path) -> dict[str, Any]:
    """Write ``rope_theta`` / ``rope_scaling`` beside transformers 5's ``rope_parameters``.

    Why: optimum-onnx 0.1.0 runs on transformers 4.57, which ignores ``rope_parameters`` and would
    silently export the default rope (theta 10000, no llama3/longrope scaling). 4.57's Phi-3 accepts
    exactly ``type``/``short_factor``/``long_factor`` in ``rope_scaling``.
    """
    config = json.loads(path.read_text())
    params = dict(config.get("rope_parameters") or {})
    if "rope_theta" in params:
        config["rope_theta"] = params.pop("rope_theta")
    rope_type = params.get("rope_type", "default")
    if rope_type == "longrope":
        config["rope_scaling"] = {k: params[k] for k in ("short_factor", "long_factor")} | {"type": rope_type}
    elif rope_type != "default":
        params.pop("partial_rotary_factor", None)
        config["rope_scaling"] = params | {"type": rope_type}
    path.write_text(json.dumps(config, indent=2) + "\n")
    return config
