"""The JSON files beside the model: onnx-community's for a synthetic Gemma 3, the genai builder's otherwise.

`config.json` carries Hugging Face's Gemma 3 keys (what `onyxia.cli.llm` and other runtimes read) plus an
`onyxia_synthetic` block that says the weights are random and how many positions the RoPE caches hold.
The other families get `genai_config.json` as onnxruntime-genai's builder writes it (decoder file, IO
names, head size, eos list, context length); the cache manifest holds their full config. A torch.onnx
export sits beside its checkpoint's `config.json` (`checkpoint_config_json`). `layouts.py` says which. Every family
shares the synthetic Gemma-style tokenizer (`tokenizer_json.py`): the bench feeds token ids, so only the
vocabulary size has to be the family's. End of generation is <eos> (1) or <end_of_turn> (6).
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from onyxia.cli.bench.archs import family_of
from onyxia.cli.bench.config import DecoderConfig
from onyxia.cli.bench.tokenizer_json import SPECIAL_TOKENS, tokenizer_config, tokenizer_json

__all__ = [
    "EOS_TOKEN_IDS",
    "checkpoint_config_json",
    "config_json",
    "genai_config_json",
    "generation_config_json",
    "write_hf_files",
]

PAD, EOS, BOS = 0, 1, 2
EOS_TOKEN_IDS = [EOS, SPECIAL_TOKENS.index("<end_of_turn>")]


def config_json(config: DecoderConfig, seed: int) -> dict[str, Any]:
    return {
        "_sliding_window_pattern": config.sliding_window_pattern,
        "architectures": ["Gemma3ForCausalLM"],
        "attention_bias": False,
        "attention_dropout": 0.0,
        "attn_logit_softcapping": None,
        "bos_token_id": BOS,
        "eos_token_id": EOS,
        "final_logit_softcapping": None,
        "head_dim": config.head_dim,
        "hidden_activation": "gelu_pytorch_tanh",
        "hidden_size": config.hidden_size,
        "initializer_range": 0.02,
        "intermediate_size": config.intermediate_size,
        "layer_types": list(config.layer_types),
        "max_position_embeddings": config.max_position_embeddings,
        "model_type": "gemma3_text",
        "num_attention_heads": config.num_attention_heads,
        "num_hidden_layers": config.num_hidden_layers,
        "num_key_value_heads": config.num_key_value_heads,
        "pad_token_id": PAD,
        "query_pre_attn_scalar": config.query_pre_attn_scalar,
        "rms_norm_eps": config.rms_norm_eps,
        "rope_local_base_freq": config.rope_local_base_freq,
        "rope_scaling": None,
        "rope_theta": config.rope_theta,
        "sliding_window": config.sliding_window,
        "sliding_window_pattern": config.sliding_window_pattern,
        "tie_word_embeddings": True,
        "use_bidirectional_attention": False,
        "use_cache": True,
        "vocab_size": config.vocab_size,
        "onyxia_synthetic": {"name": config.name, "seed": seed, "rope_cache_positions": config.rope_cache_positions},
    }


def genai_config_json(config: DecoderConfig) -> dict[str, Any]:
    io = {"past_key_names": "past_key_values.%d.key", "past_value_names": "past_key_values.%d.value"}
    decoder = {
        "session_options": {"log_id": "onnxruntime-genai", "provider_options": []},
        "filename": "model.onnx",
        "head_size": config.head_dim,
        "hidden_size": config.hidden_size,
        "inputs": {"input_ids": "input_ids", "attention_mask": "attention_mask", **io},
        "outputs": {
            "logits": "logits",
            "present_key_names": "present.%d.key",
            "present_value_names": "present.%d.value",
        },
        "num_attention_heads": config.num_attention_heads,
        "num_hidden_layers": config.num_hidden_layers,
        "num_key_value_heads": config.num_key_value_heads,
    }
    model = {
        "bos_token_id": BOS,
        "context_length": config.rope_cache_positions,
        "decoder": decoder,
        "eos_token_id": EOS_TOKEN_IDS,
        "pad_token_id": PAD,
        "type": family_of(config).model_type,
        "vocab_size": config.vocab_size,
    }
    search = {
        "do_sample": False,
        "max_length": config.rope_cache_positions,
        "num_beams": 1,
        "past_present_share_buffer": True,
    }
    return {"model": model, "search": search}


def checkpoint_config_json(config: DecoderConfig, seed: int) -> dict[str, Any]:
    """config.json beside a torch.onnx export (the checkpoint's): Gemma 3's as above, else the family's keys
    (what the session reads: eos/bos, max_position_embeddings, sliding_window; the shape for the reader)."""
    family = family_of(config)
    if family.layout == "onnx-community":
        return config_json(config, seed)
    return {
        "architectures": [family.architecture],
        "bos_token_id": BOS,
        "eos_token_id": EOS_TOKEN_IDS,
        "head_dim": config.head_dim,
        "hidden_act": "silu",
        "hidden_size": config.hidden_size,
        "intermediate_size": config.intermediate_size,
        "layer_types": list(config.layer_types),
        "max_position_embeddings": config.max_position_embeddings,
        "model_type": family.model_type,
        "num_attention_heads": config.num_attention_heads,
        "num_hidden_layers": config.num_hidden_layers,
        "num_key_value_heads": config.num_key_value_heads,
        "pad_token_id": PAD,
        "rms_norm_eps": config.rms_norm_eps,
        "rope_theta": config.rope_theta,
        "sliding_window": config.sliding_window or None,
        "tie_word_embeddings": config.tie_word_embeddings,
        "use_cache": True,
        "vocab_size": config.vocab_size,
        "onyxia_synthetic": {"name": config.name, "seed": seed, "rope_cache_positions": config.rope_cache_positions},
    }


def generation_config_json() -> dict[str, Any]:
    return {"bos_token_id": BOS, "do_sample": False, "eos_token_id": EOS_TOKEN_IDS, "pad_token_id": PAD}


def write_hf_files(config: DecoderConfig, directory: Path, configs: dict[str, Any]) -> list[Path]:
    """The layout's `configs` (file name -> document: config.json and generation_config.json, or
    genai_config.json), tokenizer.json, tokenizer_config.json, special_tokens_map.json."""
    specials = {"bos_token": "<bos>", "eos_token": "<eos>", "pad_token": "<pad>", "unk_token": "<unk>"}
    directory.mkdir(parents=True, exist_ok=True)
    documents = {
        **configs,
        "tokenizer.json": tokenizer_json(config.vocab_size),
        "tokenizer_config.json": tokenizer_config(config.max_position_embeddings),
        "special_tokens_map.json": specials,
    }
    paths = []
    for name, document in documents.items():
        path = directory / name
        indent = None if name == "tokenizer.json" else 2  # 262144 vocab lines would add 2 MB of indentation
        path.write_text(json.dumps(document, indent=indent, ensure_ascii=False) + "\n", encoding="utf-8")
        paths.append(path)
    return paths
