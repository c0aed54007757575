"""Multi-turn chat on one KV cache: each turn prefills only its own tokens.

The template renders the whole conversation; the tokens the cache already holds are a prefix of
it, so only the suffix is fed. If a template ever renders an earlier turn differently (so the
prefix no longer matches), the conversation is re-prefilled from scratch instead of diverging.
"""

from __future__ import annotations

from collections.abc import Iterator

from onyxia.cli.llm.sampling import SamplingParams
from onyxia.cli.llm.session import LlmSession

__all__ = ["Conversation"]

END_OF_TURN = "<end_of_turn>"


class Conversation:
    def __init__(self, session: LlmSession, params: SamplingParams, max_new_tokens: int) -> None:
        self.session = session
        self.params = params
        self.max_new_tokens = max_new_tokens
        self.messages: list[dict[str, str]] = []
        self.tokens: list[int] = []  # what the KV cache holds, in order
        self.prefilled: list[int] = []  # tokens prefilled per turn (tests check cache reuse)
        self.reset()

    def reset(self) -> None:
        self.session.reset()
        self.messages, self.tokens = [], []

    def _stops(self) -> list[int]:
        stops = list(self.session.model_dir.eos_token_ids)
        end = self.session.tokenizer.token_id(END_OF_TURN)
        return stops + ([end] if end is not None else [])

    def say(self, text: str) -> Iterator[str]:
        """Stream the model's answer to `text`; the exchange stays in the cache."""
        self.messages.append({"role": "user", "content": text})
        rendered = self.session.tokenizer.encode_chat_turn(self.session.tokenizer.render_chat(self.messages))
        if rendered[: len(self.tokens)] != self.tokens:
            self.session.reset()
            self.tokens = []
        new = rendered[len(self.tokens) :]
        self.prefilled.append(len(new))
        answer: list[int] = []
        self._pending = (new, answer)
        yield from self.session.stream_text(new, self.max_new_tokens, self.params, self._stops(), answer)
        self._finish(new, answer)

    def interrupted(self) -> None:
        """Ctrl-C mid-answer: keep what was said so far as the answer."""
        new, answer = self._pending
        self._finish(new, answer)

    def _finish(self, new: list[int], answer: list[int]) -> None:
        text = self.session.tokenizer.decode([t for t in answer if t not in self._stops()])
        self.messages.append({"role": "assistant", "content": text})
        # the cache holds the prompt and every answer token but the last one sampled
        self.tokens += new + answer[:-1] if answer else new
        cached = self.session.position
        self.tokens = self.tokens[:cached]
