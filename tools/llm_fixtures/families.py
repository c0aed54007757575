"""The seven decoder families as one table: HF config, tokenizer style, ids and prompts.

Why a table: adding a family to the fixtures should be one row here plus its chat template in
``templates/<name>.jinja``, mirroring how Onyxia's own LLM session keeps family knowledge in one table.
The numbers follow the real models each row imitates (Llama 3.2, Qwen2.5, Qwen3, Phi-4-mini, Gemma 2,
Gemma 3 270m, Mistral 7B v0.1) shrunk to hidden ~64 and 2 layers, so that the exporters take their ordinary code paths.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

__all__ = ["FAMILIES", "Family", "SHORT_TEXT", "LONG_TEXT", "CHAT_MESSAGE"]

SHORT_TEXT = "The Python Software Foundation License is"
LONG_TEXT = (
    "The quick brown fox jumps over the lazy dog. A license grants permission to use, copy, modify and "
    "distribute the software, provided that the copyright notice appears in all copies. Errors should never "
    "pass silently."
)
CHAT_MESSAGE = "Write a short poem about the sea."

# Phi-4-mini-style LongRoPE factors for 24 rotary frequency pairs (48 of 64 dims rotate).
_PHI3_SHORT = [
    1.019506, 1.00621, 1.018429, 1.00527, 1.014866, 1.02612, 1.038256, 1.033905, 1.036928, 1.064489,
    1.058303, 1.08155, 1.084767, 1.101555, 1.122838, 1.135489, 1.158506, 1.172314, 1.19556, 1.207091,
    1.245362, 1.264909, 1.280925, 1.313703,
]  # fmt: skip
_PHI3_LONG = [
    1.054509, 1.189831, 1.497467, 1.928165, 2.463997, 2.935151, 3.581996, 4.278858, 4.929611, 5.699544,
    6.523134, 7.382571, 8.192777, 9.087459, 10.104535, 11.077756, 12.065225, 13.081633, 14.215914,
    15.312765, 16.503915, 17.607864, 18.784946, 20.095226,
]  # fmt: skip

_QWEN_EXTRA = [
    ("<|object_ref_start|>", True), ("<|object_ref_end|>", True), ("<|box_start|>", True),
    ("<|box_end|>", True), ("<|quad_start|>", True), ("<|quad_end|>", True), ("<|vision_start|>", True),
    ("<|vision_end|>", True), ("<|vision_pad|>", True), ("<|image_pad|>", True), ("<|video_pad|>", True),
    ("<tool_call>", False), ("</tool_call>", False), ("<|fim_prefix|>", False), ("<|fim_middle|>", False),
    ("<|fim_suffix|>", False), ("<|fim_pad|>", False), ("<|repo_name|>", False), ("<|file_sep|>", False),
]  # fmt: skip


@dataclass(frozen=True)
class Family:
    """One row: what the HF config, the tokenizer and the prompts of a family's fixtures are.

    ``head_tokens`` take the lowest ids (SentencePiece-style families put ``<unk>``/``<s>`` there, before
    the 256 byte-fallback pieces); ``tail_tokens`` the highest (byte-level families append their specials
    after the BPE vocabulary). Each token is ``(content, special)``. ``qk_std`` is the init std of the
    q/k projections: larger than the rest so attention is peaky and windows, rotary variants and
    soft-capping visibly change the output.
    """

    name: str
    hf_class: str
    config: dict[str, Any]
    style: str  # "bytelevel" (Llama 3 / Qwen) or "sentencepiece" (Phi, Gemma, Mistral: byte fallback, ▁)
    head_tokens: list[tuple[str, bool]]
    tail_tokens: list[tuple[str, bool]]
    bos: str | None  # added by the tokenizer's post-processor when not None
    eos: list[str]  # generation_config eos list; the first is the tokenizer's eos_token
    pad: str | None
    tokenizer_class: str
    edge: tuple[str, int]  # ("window" | "longrope" | "none", length the edge prompt straddles)
    digits_split: str = r"\p{N}"
    sp_prepend: bool = True  # SentencePiece style: prepend "▁" to the text (Gemma does not)
    qk_std: float = 0.25
    final_norm_scale: float = 4.0
    extra_tokenizer_config: dict[str, Any] = field(default_factory=dict)


_COMMON = {"max_position_embeddings": 512, "vocab_size": 1024, "num_hidden_layers": 2}

# fmt: off
FAMILIES: dict[str, Family] = {
    f.name: f
    for f in [
        Family(
            name="llama",
            hf_class="LlamaForCausalLM",
            config=dict(
                _COMMON, model_type="llama", hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                head_dim=16, intermediate_size=128, hidden_act="silu", rms_norm_eps=1e-5,
                tie_word_embeddings=True, rope_theta=500000.0,
                rope_scaling={"rope_type": "llama3", "factor": 32.0, "low_freq_factor": 1.0,
                              "high_freq_factor": 4.0, "original_max_position_embeddings": 64},
            ),
            style="bytelevel",
            head_tokens=[],
            tail_tokens=[
                ("<|begin_of_text|>", True), ("<|end_of_text|>", True), ("<|reserved_special_token_0|>", True),
                ("<|reserved_special_token_1|>", True), ("<|finetune_right_pad_id|>", True),
                ("<|reserved_special_token_2|>", True), ("<|start_header_id|>", True), ("<|end_header_id|>", True),
                ("<|eom_id|>", True), ("<|eot_id|>", True), ("<|python_tag|>", True),
            ] + [(f"<|reserved_special_token_{i}|>", True) for i in range(3, 8)],
            bos="<|begin_of_text|>",
            eos=["<|eot_id|>", "<|end_of_text|>", "<|eom_id|>"],
            pad=None,
            tokenizer_class="PreTrainedTokenizerFast",
            edge=("none", 64),
            digits_split=r"\p{N}{1,3}",
        ),
        Family(
            name="qwen2",
            hf_class="Qwen2ForCausalLM",
            config=dict(
                _COMMON, model_type="qwen2", hidden_size=64, num_attention_heads=4, num_key_value_heads=1,
                intermediate_size=192, hidden_act="silu", rms_norm_eps=1e-6, tie_word_embeddings=True,
                rope_theta=1000000.0, use_sliding_window=False, sliding_window=None,
            ),
            style="bytelevel",
            head_tokens=[],
            tail_tokens=[("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True)] + _QWEN_EXTRA,
            bos=None,
            eos=["<|im_end|>", "<|endoftext|>"],
            pad="<|endoftext|>",
            tokenizer_class="Qwen2Tokenizer",
            edge=("none", 64),
            extra_tokenizer_config={"errors": "replace", "split_special_tokens": False},
        ),
        Family(
            name="qwen3",
            hf_class="Qwen3ForCausalLM",
            config=dict(
                _COMMON, model_type="qwen3", hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                head_dim=32, intermediate_size=192, hidden_act="silu", rms_norm_eps=1e-6,
                tie_word_embeddings=True, rope_theta=1000000.0, attention_bias=False,
                use_sliding_window=False, sliding_window=None,
            ),
            style="bytelevel",
            head_tokens=[],
            tail_tokens=[("<|endoftext|>", True), ("<|im_start|>", True), ("<|im_end|>", True)]
            + _QWEN_EXTRA
            + [("<tool_response>", False), ("</tool_response>", False), ("<think>", False), ("</think>", False)],
            bos=None,
            eos=["<|im_end|>", "<|endoftext|>"],
            pad="<|endoftext|>",
            tokenizer_class="Qwen2Tokenizer",
            edge=("none", 64),
            extra_tokenizer_config={"errors": "replace", "split_special_tokens": False},
        ),
        Family(
            name="phi3",
            hf_class="Phi3ForCausalLM",
            config=dict(
                _COMMON, model_type="phi3", hidden_size=128, num_attention_heads=2, num_key_value_heads=1,
                intermediate_size=192, hidden_act="silu", rms_norm_eps=1e-5, tie_word_embeddings=False,
                rope_theta=10000.0, partial_rotary_factor=0.75, original_max_position_embeddings=64,
                rope_scaling={"type": "longrope", "short_factor": _PHI3_SHORT, "long_factor": _PHI3_LONG},
                sliding_window=None,
            ),
            style="sentencepiece",
            head_tokens=[("<unk>", True), ("<s>", True), ("</s>", True)],
            tail_tokens=[
                ("<|endoftext|>", True), ("<|assistant|>", True), ("<|placeholder1|>", True),
                ("<|placeholder2|>", True), ("<|placeholder3|>", True), ("<|placeholder4|>", True),
                ("<|system|>", True), ("<|end|>", True), ("<|placeholder5|>", True), ("<|placeholder6|>", True),
                ("<|user|>", True),
            ],
            bos=None,  # Phi-4-mini's tokenizer adds no bos
            eos=["<|endoftext|>", "<|end|>", "<|assistant|>"],
            pad="<|endoftext|>",
            tokenizer_class="LlamaTokenizerFast",
            edge=("longrope", 64),
            extra_tokenizer_config={"legacy": False},
        ),
        Family(
            name="gemma2",
            hf_class="Gemma2ForCausalLM",
            config=dict(
                _COMMON, model_type="gemma2", hidden_size=64, num_attention_heads=4, num_key_value_heads=2,
                head_dim=32, intermediate_size=128, hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6,
                rope_theta=10000.0, query_pre_attn_scalar=32, attn_logit_softcapping=50.0,
                final_logit_softcapping=30.0, sliding_window=16, tie_word_embeddings=True,
                layer_types=["sliding_attention", "full_attention"],
            ),
            style="sentencepiece",
            head_tokens=[
                ("<pad>", True), ("<eos>", True), ("<bos>", True), ("<unk>", True), ("<mask>", True),
                ("[@BOS@]", True), ("<unused0>", True), ("<unused1>", True), ("<start_of_turn>", True),
                ("<end_of_turn>", True),
            ],
            tail_tokens=[],
            bos="<bos>",
            eos=["<eos>", "<end_of_turn>"],
            pad="<pad>",
            tokenizer_class="GemmaTokenizerFast",
            edge=("window", 16),
            sp_prepend=False,
            qk_std=0.6,
            final_norm_scale=16.0,
            extra_tokenizer_config={"legacy": False},
        ),
        Family(
            name="gemma3",
            hf_class="Gemma3ForCausalLM",
            config=dict(
                _COMMON, model_type="gemma3_text", hidden_size=64, num_attention_heads=4, num_key_value_heads=1,
                head_dim=16, intermediate_size=128, hidden_activation="gelu_pytorch_tanh", rms_norm_eps=1e-6,
                query_pre_attn_scalar=32, sliding_window=16, tie_word_embeddings=True,
                layer_types=["sliding_attention", "full_attention"],
                rope_parameters={"full_attention": {"rope_type": "default", "rope_theta": 1000000.0},
                                 "sliding_attention": {"rope_type": "default", "rope_theta": 10000.0}},
            ),
            style="sentencepiece",
            head_tokens=[
                ("<pad>", True), ("<eos>", True), ("<bos>", True), ("<unk>", True), ("<mask>", True),
                ("<start_of_turn>", True), ("<end_of_turn>", True),
            ],
            tail_tokens=[],
            bos="<bos>",
            eos=["<eos>", "<end_of_turn>"],
            pad="<pad>",
            tokenizer_class="GemmaTokenizerFast",
            edge=("window", 16),
            sp_prepend=False,
            extra_tokenizer_config={"legacy": False},
        ),
        Family(
            name="mistral",
            hf_class="MistralForCausalLM",
            config=dict(
                _COMMON, model_type="mistral", hidden_size=64, num_attention_heads=4, num_key_value_heads=1,
                head_dim=16, intermediate_size=192, hidden_act="silu", rms_norm_eps=1e-5,
                tie_word_embeddings=False, rope_theta=10000.0, sliding_window=16,
            ),
            style="sentencepiece",
            head_tokens=[("<unk>", True), ("<s>", True), ("</s>", True)],
            tail_tokens=[],
            bos="<s>",
            eos=["</s>"],
            pad=None,
            tokenizer_class="LlamaTokenizerFast",
            edge=("window", 16),
            extra_tokenizer_config={"legacy": False},
        ),
    ]
}
# fmt: on
