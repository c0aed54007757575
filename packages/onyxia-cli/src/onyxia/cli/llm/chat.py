"""Multi-turn chat on one KV cache: each turn prefills only its own tokens.

The template renders the whole conversation; the tokens the cache already holds are a prefix of
it, so only the suffix is fed. If a template ever renders an earlier turn differently (so the
prefix no longer matches), the conversation is re-prefilled from scratch instead of diverging.

When the conversation outgrows the session's max_length, the oldest exchanges are dropped (a
system message stays) and the rest re-prefilled; a single turn too long to fit on its own is
refused with an `InputError` and forgotten, so the chat goes on either way.
"""

from __future__ import annotations

from collections.abc import Iterator

from onyxia.cli.llm.sampling import SamplingParams
from onyxia.cli.llm.session import LlmSession
from onyxia.core import InputError

__all__ = ["Conversation", "chat_stop_ids"]

END_OF_TURN = "<end_of_turn>"


def chat_stop_ids(session: LlmSession) -> list[int]:
    """The ids that end an answer: the model's EOS ids, and Gemma's end-of-turn marker where the
    tokenizer has one (its templates close each turn with it rather than with EOS)."""
    stops = list(session.model_dir.eos_token_ids)
    end = session.tokenizer.token_id(END_OF_TURN)
    return stops + ([end] if end is not None else [])


class Conversation:
    def __init__(self, session: LlmSession, params: SamplingParams, max_new_tokens: int) -> None:
        self.session = session
        self.params = params
        self.max_new_tokens = max_new_tokens
        self.messages: list[dict[str, str]] = []
        self.tokens: list[int] = []  # what the KV cache holds, in order
        self.prefilled: list[int] = []  # tokens prefilled per turn (tests check cache reuse)
        self.dropped = 0  # earlier messages dropped to fit max_length, over the whole chat
        self.reset()

    def reset(self) -> None:
        self.session.reset()
        self.messages, self.tokens = [], []

    def _stops(self) -> list[int]:
        return chat_stop_ids(self.session)

    def say(self, text: str) -> Iterator[str]:
        """Stream the model's answer to `text`; the exchange stays in the cache."""
        before, dropped = list(self.messages), self.dropped
        self.messages.append({"role": "user", "content": text})
        try:
            rendered = self._fit()
        except Exception:
            self.messages, self.dropped = before, dropped  # refused: the conversation stays as it was
            raise
        if rendered[: len(self.tokens)] != self.tokens:
            self.session.reset()
            self.tokens = []
        new = rendered[len(self.tokens) :]
        self.prefilled.append(len(new))
        answer: list[int] = []
        self._pending = (new, answer)
        budget = min(self.max_new_tokens, self.session.max_length - len(rendered))
        yield from self.session.stream_text(new, budget, self.params, self._stops(), answer)
        self._finish(new, answer)

    def _fit(self) -> list[int]:
        """The rendered conversation's ids, after dropping the oldest exchanges until the answer fits."""
        tokenizer, limit = self.session.tokenizer, self.session.max_length
        first = 1 if self.messages[0].get("role") == "system" else 0
        while True:
            rendered = tokenizer.encode_chat_turn(tokenizer.render_chat(self.messages))
            if len(rendered) + self.max_new_tokens <= limit or len(self.messages) <= first + 1:
                break
            drop = 2 if self.messages[first + 1].get("role") == "assistant" else 1
            del self.messages[first : first + drop]
            self.dropped += drop
        if len(rendered) >= limit:
            raise InputError(
                f"this message takes {len(rendered)} tokens with the chat template, more than max_length "
                f"{limit} leaves for an answer; send a shorter one or raise --max-length"
            )
        return rendered

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
