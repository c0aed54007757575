"""What a sentence-transformers embedding directory says about its pipeline, read from its own files.

The layout is what `SentenceTransformer.save` writes and what optimum's `feature-extraction` export and the
onnx-community embedding repos ship: ``modules.json`` lists the modules in order (Transformer, Pooling,
optionally Normalize), each module's folder holds its config (``1_Pooling/config.json``), the ONNX graph is
``model.onnx`` (optimum) or ``onnx/model.onnx`` (hub repos), the tokenizer is ``tokenizer.json``. Pooling
is read in both of sentence-transformers' spellings: ``"pooling_mode": "mean"`` (5.x) and the
``pooling_mode_mean_tokens: true`` flags (older saves, most hub repos). A module Onyxia does not apply
(Dense, LayerNorm, ...) is an error naming ``modules.json``: leaving it out would give wrong vectors.

Matryoshka (``dimensions``): vLLM's keys in ``config.json``, ``matryoshka_dimensions`` (the sizes the model
was trained to be cut to) or ``is_matryoshka: true`` (any size); a model without them refuses ``dimensions``.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from onyxia.cli.embeddings.pooling import POOLINGS
from onyxia.cli.llm.config_files import read_json_object
from onyxia.core import ModelLoadError

__all__ = ["EmbeddingDirectory", "read_embedding_directory"]

# module class name (the last part of modules.json's "type") -> its role in the pipeline
_MODULE_ROLES = {"Transformer": "encoder", "Pooling": "pooling", "Normalize": "normalize"}
# sentence-transformers' pre-5.0 flags, in the order its Pooling concatenates modes
_LEGACY_FLAGS = {
    "pooling_mode_cls_token": "cls",
    "pooling_mode_max_tokens": "max",
    "pooling_mode_mean_tokens": "mean",
    "pooling_mode_mean_sqrt_len_tokens": "mean_sqrt_len_tokens",
    "pooling_mode_weightedmean_tokens": "weightedmean",
    "pooling_mode_lasttoken": "lasttoken",
}
_ONNX_FILES = ("model.onnx", "onnx/model.onnx")
_LIMIT_SOURCES = (  # (file, key) giving the longest input, first found wins
    ("sentence_bert_config.json", "max_seq_length"),
    ("tokenizer_config.json", "model_max_length"),
    ("config.json", "max_position_embeddings"),
)
_NO_LIMIT = 10**6  # tokenizer_config.json's "unset" is 1e30


@dataclass(frozen=True)
class EmbeddingDirectory:
    root: Path
    onnx: Path
    tokenizer: Path
    pooling: tuple[str, ...]  # sentence-transformers' mode names, concatenated in this order
    normalize: bool
    max_tokens: int
    max_tokens_source: str  # "file key", for error messages
    matryoshka: tuple[int, ...] | None  # None: `dimensions` refused; (): any size; else these sizes
    prompt: str  # config_sentence_transformers.json's default prompt, prepended to texts ("" when none)
    pad_token_id: int
    vocab_size: int | None


def read_embedding_directory(root: str | Path) -> EmbeddingDirectory:
    root = Path(root)
    if not root.is_dir():
        raise ModelLoadError(f"embedding model '{root}' is not a directory")
    roles = _modules(root)
    config = read_json_object(root / "config.json")
    onnx = next((root / name for name in _ONNX_FILES if (root / name).is_file()), None)
    if onnx is None:
        raise ModelLoadError(
            f"{root}: no ONNX graph ({' or '.join(_ONNX_FILES)}); export it with optimum's `feature-extraction` task"
        )
    if not (root / "tokenizer.json").is_file():
        raise ModelLoadError(f"{root / 'tokenizer.json'}: missing; Onyxia tokenizes with the tokenizers library")
    pooling_file = root / roles["pooling"] / "config.json"
    pooling, include_prompt = _pooling(pooling_file)
    prompt = _default_prompt(root / "config_sentence_transformers.json")
    if prompt and not include_prompt:
        raise ModelLoadError(
            f"{pooling_file}: include_prompt false (pooling without the prompt's tokens) is not supported"
        )
    max_tokens, source = _max_tokens(root)
    return EmbeddingDirectory(
        root=root,
        onnx=onnx,
        tokenizer=root / "tokenizer.json",
        pooling=pooling,
        normalize="normalize" in roles,
        max_tokens=max_tokens,
        max_tokens_source=source,
        matryoshka=_matryoshka(config, root / "config.json"),
        prompt=prompt,
        pad_token_id=_int(config.get("pad_token_id"), 0),
        vocab_size=_int(config.get("vocab_size"), None),
    )


def _modules(root: Path) -> dict[str, str]:
    """role -> module folder; checks the order Transformer, Pooling[, Normalize]."""
    path = root / "modules.json"
    if not path.is_file():
        raise ModelLoadError(
            f"{path}: missing; an embedding directory is a sentence-transformers save "
            "(modules.json, 1_Pooling/config.json) with its ONNX export"
        )
    try:
        modules = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as e:
        raise ModelLoadError(f"{path}: not readable JSON ({e})") from e
    if not isinstance(modules, list) or not all(isinstance(m, dict) for m in modules):
        raise ModelLoadError(f"{path}: expected a list of modules (objects with 'type' and 'path')")
    roles: dict[str, str] = {}
    for index, module in enumerate(modules):
        kind = str(module.get("type", "")).rsplit(".", 1)[-1]
        role = _MODULE_ROLES.get(kind)
        if role is None:
            raise ModelLoadError(
                f"{path}: module {index} ({module.get('type')!r}) is not supported; Onyxia "
                f"applies {', '.join(_MODULE_ROLES)} only"
            )
        roles[role] = str(module.get("path", ""))
    order = [r for r in _MODULE_ROLES.values() if r in roles]
    found = [_MODULE_ROLES[str(m.get("type", "")).rsplit(".", 1)[-1]] for m in modules]
    if found != order or "encoder" not in roles or "pooling" not in roles:
        raise ModelLoadError(
            f"{path}: modules {found}; expected Transformer, Pooling and optionally Normalize, in that order"
        )
    return roles


def _pooling(path: Path) -> tuple[tuple[str, ...], bool]:
    if not path.is_file():
        raise ModelLoadError(f"{path}: missing; it names the pooling (mean, cls, max, lasttoken, ...)")
    data = read_json_object(path)
    mode: Any = data.get("pooling_mode")
    if mode is None:
        modes = tuple(name for flag, name in _LEGACY_FLAGS.items() if data.get(flag) is True)
    else:
        modes = (mode,) if isinstance(mode, str) else tuple(mode) if isinstance(mode, list) else ()
    if not modes:
        raise ModelLoadError(f"{path}: no pooling mode ('pooling_mode' or a pooling_mode_*_tokens flag set to true)")
    unknown = [m for m in modes if m not in POOLINGS]
    if unknown:
        raise ModelLoadError(
            f"{path}: pooling mode {unknown[0]!r} is not supported; expected one of {', '.join(POOLINGS)}"
        )
    return modes, bool(data.get("include_prompt", True))


def _default_prompt(path: Path) -> str:
    data = read_json_object(path)
    name = data.get("default_prompt_name")
    if name is None:
        return ""
    prompts = data.get("prompts") or {}
    if not isinstance(prompts, dict) or not isinstance(prompts.get(name), str):
        raise ModelLoadError(f"{path}: default_prompt_name {name!r} is not one of its prompts")
    prompt: str = prompts[name]
    return prompt


def _max_tokens(root: Path) -> tuple[int, str]:
    for file, key in _LIMIT_SOURCES:
        value = read_json_object(root / file).get(key)
        if isinstance(value, (int, float)) and not isinstance(value, bool) and 0 < value < _NO_LIMIT:
            return int(value), f"{key} in {file}"
    raise ModelLoadError(f"{root}: no input length limit found ({', '.join(f'{k} in {f}' for f, k in _LIMIT_SOURCES)})")


def _matryoshka(config: dict[str, Any], path: Path) -> tuple[int, ...] | None:
    sizes = config.get("matryoshka_dimensions")
    if sizes is not None:
        if not isinstance(sizes, list) or not all(isinstance(s, int) and s > 0 for s in sizes):
            raise ModelLoadError(f"{path}: matryoshka_dimensions must be a list of positive integers, found {sizes!r}")
        return tuple(sizes)
    return () if config.get("is_matryoshka") is True else None


def _int(value: object, default: int | None) -> Any:
    return value if isinstance(value, int) and not isinstance(value, bool) else default
