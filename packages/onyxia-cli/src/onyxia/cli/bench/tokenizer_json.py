"""A small but valid Gemma-style `tokenizer.json` (plus its tokenizer_config) over the model's full vocabulary.

Gemma's real tokenizer cannot be shipped or downloaded here, and benchmarks only need text to round-trip:
a `tokenizers` BPE model with byte fallback, SentencePiece-style `▁` spaces and Gemma's special tokens at
ids 0-6 (as in the test fixtures: <start_of_turn> 5, <end_of_turn> 6), printable ASCII, two-character
merges of lowercase letters, and `<unusedN>` fillers up to `vocab_size` so every logit has a token.
"""

from __future__ import annotations

import string
from typing import Any

__all__ = ["GEMMA_CHAT_TEMPLATE", "SPECIAL_TOKENS", "tokenizer_config", "tokenizer_json"]

SPECIAL_TOKENS = ("<pad>", "<eos>", "<bos>", "<unk>", "<mask>", "<start_of_turn>", "<end_of_turn>")

# Gemma 3's template for text content: a system message is folded into the first user turn, roles must
# alternate, and "assistant" is spelled "model".
GEMMA_CHAT_TEMPLATE = (
    "{{ bos_token }}"
    "{%- if messages[0]['role'] == 'system' -%}"
    "{%- set first_user_prefix = messages[0]['content'] + '\n\n' -%}"
    "{%- set loop_messages = messages[1:] -%}"
    "{%- else -%}{%- set first_user_prefix = '' -%}{%- set loop_messages = messages -%}{%- endif -%}"
    "{%- for message in loop_messages -%}"
    "{%- if (message['role'] == 'user') != (loop.index0 % 2 == 0) -%}"
    "{{ raise_exception('Conversation roles must alternate user/assistant/user/assistant/...') }}"
    "{%- endif -%}"
    "{%- set role = 'model' if message['role'] == 'assistant' else message['role'] -%}"
    "{{ '<start_of_turn>' + role + '\n' + (first_user_prefix if loop.first else '') }}"
    "{{ message['content'] | trim }}{{ '<end_of_turn>\n' }}"
    "{%- endfor -%}"
    "{%- if add_generation_prompt -%}{{ '<start_of_turn>model\n' }}{%- endif -%}"
)

_SPACE = "\u2581"
_LETTERS = string.ascii_lowercase


def tokenizer_json(vocab_size: int) -> dict[str, Any]:
    """The tokenizer.json document (pass it to `json.dump`, or `json.dumps` then `Tokenizer.from_str`)."""
    vocab, merges = _vocabulary(vocab_size)
    bos = {"SpecialToken": {"id": "<bos>", "type_id": 0}}
    return {
        "version": "1.0",
        "truncation": None,
        "padding": None,
        "added_tokens": [_added(i, token) for i, token in enumerate(SPECIAL_TOKENS)],
        "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": _SPACE},
        "pre_tokenizer": None,
        "post_processor": {
            "type": "TemplateProcessing",
            "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
            "pair": [bos, {"Sequence": {"id": "A", "type_id": 0}}, bos, {"Sequence": {"id": "B", "type_id": 0}}],
            "special_tokens": {"<bos>": {"id": "<bos>", "ids": [2], "tokens": ["<bos>"]}},
        },
        "decoder": {
            "type": "Sequence",
            "decoders": [
                {"type": "Replace", "pattern": {"String": _SPACE}, "content": " "},
                {"type": "ByteFallback"},
                {"type": "Fuse"},
            ],
        },
        "model": {
            "type": "BPE",
            "dropout": None,
            "unk_token": "<unk>",
            "continuing_subword_prefix": None,
            "end_of_word_suffix": None,
            "fuse_unk": True,
            "byte_fallback": True,
            "ignore_merges": False,
            "vocab": vocab,
            "merges": merges,
        },
    }


def tokenizer_config(model_max_length: int) -> dict[str, Any]:
    return {
        "tokenizer_class": "GemmaTokenizer",
        "bos_token": "<bos>",
        "eos_token": "<eos>",
        "pad_token": "<pad>",
        "unk_token": "<unk>",
        "add_bos_token": True,
        "add_eos_token": False,
        "model_max_length": model_max_length,
        "padding_side": "left",
        "clean_up_tokenization_spaces": False,
        "chat_template": GEMMA_CHAT_TEMPLATE,
    }


def _vocabulary(vocab_size: int) -> tuple[dict[str, int], list[list[str]]]:
    """Specials, the 256 byte tokens, `▁`, newline and printable ASCII, merges while room is left, then fillers."""
    base = [*SPECIAL_TOKENS, *(f"<0x{b:02X}>" for b in range(256)), _SPACE, "\n", *string.printable[:94]]
    if vocab_size < len(base):
        raise ValueError(f"vocab_size {vocab_size} is below the {len(base)} specials, bytes and ASCII tokens")
    pairs = [[a, b] for a in _SPACE + _LETTERS for b in _LETTERS][: vocab_size - len(base)]
    tokens = base + [a + b for a, b in pairs]
    tokens += [f"<unused{i}>" for i in range(vocab_size - len(tokens))]
    return {token: i for i, token in enumerate(tokens)}, pairs


def _added(index: int, token: str) -> dict[str, Any]:
    return {
        "id": index,
        "content": token,
        "single_word": False,
        "lstrip": False,
        "rstrip": False,
        "normalized": False,
        "special": True,
    }
