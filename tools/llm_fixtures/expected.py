"""Assemble ``expected.json`` (and ``expected_acc0.json`` for 4-bit) for one exported directory.

Why the prompts are what they are: ``short`` and ``chat`` (the family's own template, one user turn,
generation prompt) are what a user runs; ``window_edge`` (window − 4 tokens, so decoding crosses the
window) and ``longrope_edge`` (Phi-3: crosses original_max_position_embeddings, where the builder's
``If`` switches rotary caches) sit on the layouts' edges; ``long`` is longer than any window or edge.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from tokenizers import Tokenizer

from .families import CHAT_MESSAGE, LONG_TEXT, SHORT_TEXT, Family
from .oracle import Prompt, files_sha256, greedy, open_session, prompt_record, window_layers
from .references import HfReference, equal_before_eos, genai_greedy

__all__ = ["NEW_TOKENS", "make_prompts", "write_expected"]

NEW_TOKENS = 24


def _chat_text(family: Family, hf_dir: Path) -> str:
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(str(hf_dir))
    messages = [{"role": "user", "content": CHAT_MESSAGE}]
    text = tok.apply_chat_template(messages, tokenize=False, add_generation_prompt=True)
    if family.bos and text.startswith(family.bos):
        text = text[len(family.bos) :]  # the tokenizer adds it when encoding
    return str(text)


def make_prompts(family: Family, hf_dir: Path) -> list[Prompt]:
    """The family's prompts, encoded by its tokenizer.json (bos added by the tokenizer where the family has one)."""
    tok = Tokenizer.from_file(str(hf_dir / "tokenizer.json"))

    def make(name: str, text: str, truncate_to: int | None = None) -> Prompt:
        ids = tok.encode(text).ids
        return Prompt(name, text, truncate_to, ids[:truncate_to] if truncate_to else ids)

    prompts = [make("short", SHORT_TEXT), make("chat", _chat_text(family, hf_dir))]
    kind, length = family.edge
    if kind == "window":
        prompts.append(make("window_edge", LONG_TEXT, length - 4))
    elif kind == "longrope":
        prompts.append(make("longrope_edge", LONG_TEXT, length - 4))
    prompts.append(make("long", LONG_TEXT))
    if len(prompts[-1].ids) < length + 8:
        raise ValueError(
            f"family {family.name}: long prompt has {len(prompts[-1].ids)} tokens, expected >= {length + 8} "
            "(edge + 8); the tokenizer merges too much of LONG_TEXT"
        )
    return prompts


def _dims(config: dict[str, Any]) -> tuple[int, int]:
    head_dim = config.get("head_dim") or config["hidden_size"] // config["num_attention_heads"]
    return int(config["num_key_value_heads"]), int(head_dim)


def write_expected(
    family: Family,
    config: dict[str, Any],
    directory: Path,
    prompts: list[Prompt],
    hf: HfReference | None,
    *,
    genai: bool,
    accuracy_level: int | None = None,
    model_file: str = "model.onnx",
    name: str | None = None,
) -> Path:
    """Run the greedy loop on ``directory/model_file`` for every prompt and write the expected file
    (``name``, default ``expected.json`` or ``expected_acc<level>.json``)."""
    import onnxruntime as ort

    kv_heads, head_dim = _dims(config)
    windowed = window_layers(directory)
    session = open_session(directory / model_file, accuracy_level)
    eos = set(config["eos_token_id"] if isinstance(config["eos_token_id"], list) else [config["eos_token_id"]])
    records, genai_error = [], None
    for prompt in prompts:
        run = greedy(session, prompt.ids, NEW_TOKENS, kv_heads, head_dim, windowed)
        rec = prompt_record(prompt, run)
        if hf is not None:
            rec["hf"] = hf.compare(prompt.ids, run)
        if genai and accuracy_level is None and genai_error is None:
            try:
                theirs = genai_greedy(directory, prompt.ids, NEW_TOKENS)
                rec["genai_greedy_ids"] = theirs
                rec["genai_greedy_equal_before_eos"] = equal_before_eos(run.ids, theirs, eos)
            except Exception as exc:  # recorded, not fatal: the plain loop is the oracle
                genai_error = str(exc)
        records.append(rec)
    doc: dict[str, Any] = {
        "model_file": model_file,
        "files_sha256": files_sha256(directory, [model_file, "model.onnx.data", "model.onnx_data"]),
        "precision": None,
        "io_dtype": "float32",
        "onnxruntime_version": ort.__version__,
        "execution_provider": "CPUExecutionProvider",
        "matmulnbits_accuracy_level_override": accuracy_level,
        "sliding_window": config.get("sliding_window"),
        "new_tokens": NEW_TOKENS,
        "stop_at_eos": False,
        "prompts": records,
        "edge": {"kind": family.edge[0], "length": family.edge[1]},
    }
    if genai and accuracy_level is None:
        import onnxruntime_genai as og

        doc["genai_reference"] = {
            "onnxruntime_genai_version": og.__version__,
            "search": "greedy, min_length = max_length = prompt + new_tokens",
        }
        if genai_error is not None:
            doc["genai_reference"]["error"] = genai_error
    if hf is not None:
        doc["hf_reference"] = hf.meta
    path = directory / (name or ("expected.json" if accuracy_level is None else f"expected_acc{accuracy_level}.json"))
    path.write_text(json.dumps(doc, indent=1) + "\n")
    return path
