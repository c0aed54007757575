"""The JSON and template files of a model directory, checked for the keys the session reads.

A value of the wrong type (``"eos_token_id": "x"``, ``"max_position_embeddings": "lots"``) or a
chat template that is not valid Jinja is a `ModelLoadError` naming the file and the key (or the
template line) at load time, never a ValueError or TemplateSyntaxError halfway through a chat.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from onyxia.core import ModelLoadError

__all__ = [
    "chat_template_of",
    "check_chat_template",
    "check_config",
    "check_genai_config",
    "check_tokenizer_config",
    "read_json_object",
]

_SPECIAL_TOKENS = ("bos_token", "eos_token", "pad_token", "unk_token")


def read_json_object(path: Path) -> dict[str, Any]:
    """The JSON object in `path`, or {} when the file is absent."""
    if not path.is_file():
        return {}
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError, RecursionError) as e:
        raise ModelLoadError(f"{path}: not valid JSON ({e})") from e
    except OSError as e:
        raise ModelLoadError(f"{path}: cannot be read ({e.strerror or e})") from e
    if not isinstance(data, dict):
        raise ModelLoadError(f"{path}: expected a JSON object, found {type(data).__name__}")
    return data


def check_config(data: dict[str, Any], path: Path) -> None:
    """`config.json` or `generation_config.json`: the keys `ModelDirectory` and the session read."""
    _token_ids(data, "eos_token_id", path)
    _token_ids(data, "bos_token_id", path)
    for key in ("max_position_embeddings", "context_length", "sliding_window"):
        _positive_int(data, key, path)


def check_genai_config(data: dict[str, Any], path: Path) -> None:
    model = _object(data, "model", path)
    decoder = _object(model, "decoder", path, "model.")
    filename = decoder.get("filename")
    if filename is not None and (not isinstance(filename, str) or not filename):
        raise ModelLoadError(f"{path}: model.decoder.filename is {filename!r}; expected a file name")
    _token_ids(model, "eos_token_id", path, "model.")
    _token_ids(model, "bos_token_id", path, "model.")
    _positive_int(model, "context_length", path, "model.")
    _positive_int(decoder, "head_size", path, "model.decoder.")
    window = decoder.get("sliding_window")
    if window is not None:
        if not isinstance(window, dict):
            raise ModelLoadError(f"{path}: model.decoder.sliding_window is {window!r}; expected an object")
        _positive_int(window, "window_size", path, "model.decoder.sliding_window.")


def check_tokenizer_config(data: dict[str, Any], path: Path) -> None:
    for key in _SPECIAL_TOKENS:
        value = data.get(key)
        content = value.get("content") if isinstance(value, dict) else value
        if content is not None and not isinstance(content, str):
            raise ModelLoadError(f'{path}: {key} is {value!r}; expected a string or {{"content": string}}')


def chat_template_of(data: dict[str, Any], path: Path) -> str | None:
    """`chat_template` of tokenizer_config.json: a string, or transformers' list of named templates."""
    value = data.get("chat_template")
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, list) and all(isinstance(t, dict) for t in value):
        named = {t.get("name"): t.get("template") for t in value}
        chosen = named.get("default", next(iter(named.values()), None))
        if isinstance(chosen, str):
            return chosen
    raise ModelLoadError(f"{path}: chat_template is a {type(value).__name__}; expected a Jinja template string")


def check_chat_template(template: str, where: str) -> None:
    """Parse (not render) the template, so a syntax error names its file and line at load."""
    from jinja2 import TemplateSyntaxError
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    try:
        ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).parse(template)
    except TemplateSyntaxError as e:
        raise ModelLoadError(f"{where}: chat template line {e.lineno}: {e.message}") from e
    except RecursionError as e:
        raise ModelLoadError(f"{where}: chat template is nested too deeply to parse") from e


def _object(data: dict[str, Any], key: str, path: Path, prefix: str = "") -> dict[str, Any]:
    value = data.get(key, {})
    if not isinstance(value, dict):
        raise ModelLoadError(f"{path}: {prefix}{key} is {value!r}; expected an object")
    return value


def _is_int(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _positive_int(data: dict[str, Any], key: str, path: Path, prefix: str = "") -> None:
    value = data.get(key)
    if value is not None and (not _is_int(value) or value <= 0 or value >= 2**31):
        raise ModelLoadError(f"{path}: {prefix}{key} is {value!r}; expected a positive integer below 2^31")


def _token_ids(data: dict[str, Any], key: str, path: Path, prefix: str = "") -> None:
    value = data.get(key)
    values: Iterable[object] = value if isinstance(value, list) else [] if value is None else [value]
    if not all(isinstance(v, int) and not isinstance(v, bool) and v >= 0 for v in values):
        raise ModelLoadError(f"{path}: {prefix}{key} is {value!r}; expected a token id or a list of token ids")
