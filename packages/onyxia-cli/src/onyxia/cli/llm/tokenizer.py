"""Text in and out: the model's `tokenizer.json`, its chat template, and streaming detokenization.

Streaming must not split a multi-byte character or lose the spaces SentencePiece-style decoders
strip at the start of a fragment, so text is decoded over a sliding window of tokens and only the
part that grew (and does not end in a replacement character) is emitted.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from onyxia.core import InputError, ModelLoadError

__all__ = ["StreamDecoder", "TextTokenizer"]


class TextTokenizer:
    def __init__(self, path: Path | None, config: dict[str, Any], chat_template: str | None, where: Path) -> None:
        if path is None:
            raise ModelLoadError(f"{where}: no tokenizer.json; the LLM session needs the model's tokenizer")
        from tokenizers import Tokenizer

        try:
            self._tok = Tokenizer.from_file(str(path))
        except Exception as e:  # the Rust error names the JSON problem
            raise ModelLoadError(f"{path}: cannot load the tokenizer ({e})") from e
        self.config = config
        self.chat_template = chat_template
        self._template: tuple[str, Any] | None = None  # (the text, its compiled jinja2 Template)

    def encode(self, text: str) -> list[int]:
        """Ids as the model expects them (special tokens such as <bos> added by the tokenizer)."""
        return list(self._tok.encode(_utf8(text, "the prompt")).ids)

    def encode_chat_turn(self, text: str) -> list[int]:
        """Ids of rendered template text, which already carries its special tokens."""
        return list(self._tok.encode(_utf8(text, "the chat text"), add_special_tokens=False).ids)

    def decode(self, ids: Sequence[int]) -> str:
        return str(self._tok.decode(list(ids), skip_special_tokens=True))

    def token_id(self, token: str) -> int | None:
        value = self._tok.token_to_id(token)
        return None if value is None else int(value)

    def special_text(self, token_id: int) -> str | None:
        """The text of a token the tokenizer flags special (decoding skips those), None for others."""
        added = self._tok.get_added_tokens_decoder().get(token_id)
        return str(added.content) if added is not None and added.special else None

    def template_reads(self, variable: str) -> bool:
        """Whether the chat template uses `variable` at all (`tools`: whether it can show tools)."""
        if not self.chat_template:
            return False
        from jinja2 import meta
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        ast = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True).parse(self.chat_template)
        return variable in meta.find_undeclared_variables(ast)

    def render_chat(
        self,
        messages: Sequence[Mapping[str, Any]],
        add_generation_prompt: bool = True,
        tools: Sequence[Mapping[str, Any]] | None = None,
    ) -> str:
        """The chat template (jinja2, sandboxed as transformers does) applied to `messages`; `tools` (OpenAI's
        tool definitions) reach it as transformers' `apply_chat_template(tools=...)` passes them (None: no tools)."""
        if not self.chat_template:
            raise ModelLoadError("the tokenizer has no chat_template; `onyxia chat` needs one")
        from jinja2.exceptions import TemplateError, TemplateSyntaxError

        specials = {k: self._special(k) for k in ("bos_token", "eos_token", "pad_token", "unk_token")}
        try:
            text: str = self._compiled_template(self.chat_template).render(
                messages=messages, add_generation_prompt=add_generation_prompt, tools=tools, **specials
            )
            return text
        except TemplateSyntaxError as e:
            raise ModelLoadError(f"chat template line {e.lineno}: {e.message}") from e
        except (TemplateError, TypeError, ValueError, KeyError, IndexError, AttributeError) as e:
            raise InputError(f"the chat template refused the conversation: {e}") from e

    def _compiled_template(self, text: str) -> Any:
        """`chat_template` compiled once per text (transformers caches it too): compiling took ~2.5 ms of every
        chat request, under the GIL the server's stepping thread needs, so eight requests arriving together
        held a batch step back by ~20 ms."""
        from jinja2.exceptions import TemplateError
        from jinja2.sandbox import ImmutableSandboxedEnvironment

        if self._template is not None and self._template[0] == text:
            return self._template[1]

        def raise_exception(message: str) -> None:
            raise TemplateError(message)

        env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True)
        env.globals["raise_exception"] = raise_exception
        env.globals["strftime_now"] = _strftime_now
        env.filters["tojson"] = _tojson
        compiled = env.from_string(text)
        self._template = (text, compiled)
        return compiled

    def _special(self, key: str) -> str:
        value = self.config.get(key, "")
        return value.get("content", "") if isinstance(value, dict) else str(value or "")

    def stream(self) -> StreamDecoder:
        return StreamDecoder(self)


def _tojson(
    value: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None, sort_keys: bool = False
) -> str:
    """transformers' `tojson`: keys in the given order and no HTML escaping (Jinja's own sorts the keys and
    writes `<` as `\\u003c`), so tool schemas and call arguments render as the model saw them in training."""
    return json.dumps(value, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)


def _strftime_now(pattern: str) -> str:
    return datetime.now().strftime(pattern)


def _utf8(text: str, what: str) -> str:
    """`text` if it encodes as UTF-8: argv and stdin carry undecodable bytes as lone surrogates,
    which the tokenizers library rejects with a bare TypeError."""
    if not isinstance(text, str):
        raise InputError(f"{what} must be a str, got {type(text).__name__}")
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        raise InputError(
            f"{what} is not valid UTF-8 text ({_describe(text[e.start])} at character {e.start})"
        ) from None
    return text


def _describe(char: str) -> str:
    try:
        return f"byte 0x{char.encode('utf-8', 'surrogateescape').hex()}"
    except UnicodeEncodeError:
        return f"code point U+{ord(char):04X}"


class StreamDecoder:
    """Feed token ids one at a time; get back the text each one completes (possibly empty)."""

    def __init__(self, tokenizer: TextTokenizer) -> None:
        self._tokenizer = tokenizer
        self._ids: list[int] = []
        self._prefix = 0  # window start: decoding from here keeps leading-space context
        self._read = 0  # tokens before this index have been emitted

    def push(self, token_id: int) -> str:
        self._ids.append(token_id)
        prefix_text = self._tokenizer.decode(self._ids[self._prefix : self._read])
        full_text = self._tokenizer.decode(self._ids[self._prefix :])
        if len(full_text) > len(prefix_text) and not full_text.endswith("\ufffd"):
            self._prefix, self._read = self._read, len(self._ids)
            return full_text[len(prefix_text) :]
        return ""

    def flush(self) -> str:
        """Whatever is still held back (an incomplete character at the end of generation)."""
        prefix_text = self._tokenizer.decode(self._ids[self._prefix : self._read])
        full_text = self._tokenizer.decode(self._ids[self._prefix :])
        self._prefix = self._read = len(self._ids)
        return full_text[len(prefix_text) :]
