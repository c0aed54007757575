"""`Constraint`: what a generation's text must match (a JSON schema, any JSON object, a regex, a choice, a Lark
grammar), and `GrammarMatcher`, which follows one stream's tokens through it with llguidance.

llguidance (the grammar engine of vLLM and onnxruntime-genai) computes, from the tokens so far, the bitmask of
ids that keep the text on the grammar; SampleToken applies it on the GPU before it draws (`onyxia.operators`
`reduction/sample_token`), so a 4M-parameter model still writes JSON that validates. It is a runtime dependency
of onyxia-cli (not an extra): `LlmSession.generate(constraint=...)` and `onyxia generate --json-schema` are
part of the LLM path, like the tokenizer, and the wheel is a few MB with no dependencies of its own.

JSON is compiled without free whitespace (``whitespace_flexible`` False, "," and ":" separators, as OpenAI's
structured outputs are written): with it a small model can emit spaces and newlines until max_tokens and
never close the object. ``strict=False`` compiles leniently (keywords llguidance does not implement are
ignored rather than refused). Every constraint is checked against the model's tokenizer before anything is
generated (`check`), so a schema llguidance rejects is an `InputError` naming the problem.

The llguidance tokenizer is built once per session from its ``tokenizer.json`` (cached), with the vocabulary
widened to the logits' width: ids past the tokenizer's (a padded lm head) are never allowed. The model's EOS
ids and Gemma's end-of-turn marker are the grammar's end: they are allowed only where the grammar accepts.
"""

from __future__ import annotations

import json
import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

import numpy as np

from onyxia.core import InputError

if TYPE_CHECKING:
    import llguidance

    from onyxia.cli.llm.session import LlmSession

__all__ = ["Constraint", "GrammarMatcher", "grammar_tokenizer", "lark_json", "mask_words"]

Kind = Literal["json_object", "json_schema", "regex", "choice", "lark"]
_JSON_OPTIONS = {"whitespace_flexible": False, "item_separator": ",", "key_separator": ":"}


@dataclass(frozen=True)
class Constraint:
    """A value: build one with a constructor below; `source` is the schema's JSON text, the pattern, the choices'
    JSON list or the Lark grammar."""

    kind: Kind
    source: str
    strict: bool = True

    @classmethod
    def json_object(cls) -> Constraint:
        """Any JSON object (OpenAI's ``{"type": "json_object"}``)."""
        return cls("json_object", '{"type": "object"}')

    @classmethod
    def json_schema(cls, schema: dict[str, Any], strict: bool = True) -> Constraint:
        if not isinstance(schema, dict):
            raise InputError(f"json_schema: the schema is a {type(schema).__name__}; expected a JSON object")
        return cls("json_schema", json.dumps(schema), strict)  # key order kept: llguidance writes properties in it

    @classmethod
    def regex(cls, pattern: str) -> Constraint:
        if not isinstance(pattern, str) or not pattern:
            raise InputError(f"regex: the pattern is {pattern!r}; expected a non-empty string")
        return cls("regex", pattern)

    @classmethod
    def choice(cls, options: list[str]) -> Constraint:
        if not isinstance(options, list) or not options or not all(isinstance(o, str) and o for o in options):
            raise InputError(f"choice: the options are {options!r}; expected a non-empty list of non-empty strings")
        return cls("choice", json.dumps(options))

    @classmethod
    def lark(cls, grammar: str) -> Constraint:
        """A Lark grammar in llguidance's dialect (``start:`` rule; ``%json{...}`` embeds a JSON schema: write it
        with `lark_json(schema)` to get the same compact JSON as `json_schema`)."""
        if not isinstance(grammar, str) or not grammar.strip():
            raise InputError(f"lark: the grammar is {grammar!r}; expected a non-empty string")
        return cls("lark", grammar)

    def grammar(self) -> str:
        """llguidance's grammar text for this constraint."""
        from llguidance import LLMatcher

        if self.kind in ("json_object", "json_schema"):
            options = {**_JSON_OPTIONS, "lenient": not self.strict}
            try:
                return LLMatcher.grammar_from_json_schema(self.source, overrides=options)  # type: ignore[arg-type]
            except ValueError as e:
                raise InputError(f"{self.kind}: {e}") from None
        if self.kind == "regex":
            return LLMatcher.grammar_from_regex(self.source)
        if self.kind == "choice":  # each option a literal: no regex or Lark syntax in them is interpreted
            return LLMatcher.grammar_from_lark(
                "start: " + " | ".join(json.dumps(o, ensure_ascii=False) for o in json.loads(self.source))
            )
        return LLMatcher.grammar_from_lark(self.source)

    def check(self, tokenizer: llguidance.LLTokenizer) -> str:
        """The grammar text, once llguidance accepts it for `tokenizer`; else `InputError` with its message."""
        from llguidance import LLMatcher

        grammar = self.grammar()
        failed, messages = LLMatcher.validate_grammar_with_warnings(grammar, tokenizer)
        if failed:
            raise InputError(f"{self.kind}: llguidance rejects it: {messages[0].strip()}")
        return grammar


def lark_json(schema: dict[str, Any]) -> str:
    """``%json{...}`` for a Lark grammar: `schema` compiled as `Constraint.json_schema` compiles it (no free
    whitespace; llguidance's %json default allows it, and a small model then never closes the object)."""
    return "%json" + json.dumps({**schema, "x-guidance": {**_JSON_OPTIONS, **schema.get("x-guidance", {})}})


def mask_words(vocab: int) -> int:
    """int32 words of one row's bitmask (llguidance's layout: bit j % 32 of word j / 32 allows id j)."""
    return (vocab + 31) // 32


_TOKENIZERS: weakref.WeakKeyDictionary[Any, llguidance.LLTokenizer] = weakref.WeakKeyDictionary()


def grammar_tokenizer(session: LlmSession) -> llguidance.LLTokenizer:
    """The session's llguidance tokenizer (built on first use, ~10 ms for 4k ids, ~1 s for 150k; then cached)."""
    cached = _TOKENIZERS.get(session)
    if cached is not None:
        return cached
    from llguidance import LLTokenizer

    from onyxia.cli.llm.chat import chat_stop_ids

    path, vocab = session.model_dir.tokenizer_path, session.vocab_size
    if path is None or vocab is None:
        raise InputError("constrained decoding needs the model's tokenizer.json and a static vocabulary width")
    try:
        tokenizer = LLTokenizer(path.read_text(encoding="utf-8"), n_vocab=vocab, eos_token=chat_stop_ids(session))
    except (ValueError, RuntimeError) as e:
        raise InputError(f"{path}: llguidance cannot read this tokenizer for constrained decoding ({e})") from None
    _TOKENIZERS[session] = tokenizer
    return tokenizer


class GrammarMatcher:
    """One stream's place in its grammar. `allowed_into(row)` writes the next step's mask; `advance(token)`
    consumes a drawn id and returns the ids the grammar forces next (fast-forward: fed in one run, never
    drawn); `complete` once nothing but the end may follow."""

    def __init__(self, tokenizer: llguidance.LLTokenizer, grammar: str) -> None:
        from llguidance import LLMatcher

        self._matcher = LLMatcher(tokenizer, grammar, log_level=0)
        self._check("the grammar")

    def allowed_into(self, row: np.ndarray) -> None:
        """Fill one int32 mask row (its width: `mask_words` of the logits' vocabulary)."""
        from llguidance.numpy import fill_next_token_bitmask

        fill_next_token_bitmask(self._matcher, row.reshape(1, -1))
        self._check("computing the mask")

    def advance(self, token: int, fast_forward: bool = True) -> list[int]:
        """Consume `token`; the forced ids after it (already consumed), none without `fast_forward` (then the
        mask of the next step allows just the forced id and it is drawn, scored like any other)."""
        if not self._matcher.consume_token(token):
            self._check(f"token {token}")
        forced = list(self._matcher.compute_ff_tokens()) if fast_forward else []
        if forced and not self._matcher.consume_tokens(forced):
            self._check(f"forced tokens {forced}")
        return forced

    @property
    def complete(self) -> bool:
        """The grammar accepts and allows nothing more (a closed JSON object, a whole regex match)."""
        return bool(self._matcher.is_stopped())

    @property
    def accepting(self) -> bool:
        return bool(self._matcher.is_accepting())

    def _check(self, what: str) -> None:
        if self._matcher.is_error():
            raise InputError(f"constrained decoding: {what}: {self._matcher.get_error()}")
