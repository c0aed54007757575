"""OpenAI's `logprobs` and `n` on the API: what a request may ask, and the bodies its answers carry.

Chat (`/v1/chat/completions`): `logprobs: true` gives `choices[i].logprobs.content`, one item per generated
token `{token, logprob, bytes, top_logprobs}`, with `top_logprobs: k` (0..20) best entries each.
Completions (`/v1/completions`): `logprobs: k` (0..5) gives `{tokens, token_logprobs, top_logprobs, text_offset}`,
each position's `top_logprobs` a {token: logprob} map of the k best plus the sampled token (OpenAI's rule).
Values are log_softmax of the model's raw logits (before temperature, top-k, top-p; vLLM's default), computed
on the GPU (`llm/logprobs.py`). A token's `token` is its text decoded alone and `bytes` that text's UTF-8
(vLLM's convention; a token holding part of a character decodes to U+FFFD). Stop tokens (EOS, end of turn)
are not listed: they are not part of the text. Streamed chunks carry the log-probabilities of the tokens
whose text they carry.

`n` (1..`max_n`: 8, and no more than the server's slots, `--parallel`) gives n choices, sampled in parallel
from one prefill of the prompt (`llm/parallel_samples.py`); with `seed` s, choice i is seeded s + i.
"""

from __future__ import annotations

from collections.abc import Sequence

from onyxia.cli.llm.logprobs import MAX_K, TokenLogprob
from onyxia.cli.llm.session import LlmSession
from onyxia.cli.llm.tokenizer import TextTokenizer
from onyxia.cli.serve.errors import ApiError
from onyxia.cli.serve.logprob_bodies import ChatLogprobs, ChatTokenLogprob, CompletionLogprobs, TopLogprob

__all__ = [
    "MAX_COMPLETION_LOGPROBS",
    "MAX_N",
    "ChatLogprobs",
    "ChatTokenLogprob",
    "CompletionLogprobs",
    "TopLogprob",
    "chat_logprobs",
    "completion_logprobs",
    "requested_logprobs",
    "requested_n",
]

MAX_N = 8
MAX_COMPLETION_LOGPROBS = 5  # OpenAI's limit for the legacy completions endpoint


def requested_n(session: LlmSession, n: int | None) -> int:
    """The request's `n`, checked: 1 when absent; more needs as many slots (400 naming `n` otherwise)."""
    if n is None:
        return 1
    limit = min(MAX_N, session.slots)
    if not 1 <= n <= limit:
        why = f"one slot a choice; --parallel is {session.slots}" if limit < MAX_N else f"at most {MAX_N}"
        raise ApiError(400, f"n is {n}; expected 1 to {limit} ({why})", param="n")
    return n


def requested_logprobs(chat: bool, logprobs: bool | int | None, top_logprobs: int | None) -> int | None:
    """The top entries a stream computes per token (None: no log-probabilities), or a 400 naming the field."""
    if chat:
        if logprobs is not None and not isinstance(logprobs, bool):
            raise ApiError(400, f"logprobs is {logprobs!r}; expected true or false (chat)", param="logprobs")
        if top_logprobs is not None and not 0 <= top_logprobs <= MAX_K:
            raise ApiError(400, f"top_logprobs is {top_logprobs}; expected 0 to {MAX_K}", param="top_logprobs")
        if top_logprobs is not None and not logprobs:
            raise ApiError(400, "top_logprobs needs logprobs set to true", param="top_logprobs")
        return (top_logprobs or 0) if logprobs else None
    if logprobs is None:
        return None
    if isinstance(logprobs, bool) or not 0 <= logprobs <= MAX_COMPLETION_LOGPROBS:
        raise ApiError(
            400, f"logprobs is {logprobs!r}; expected an integer 0 to {MAX_COMPLETION_LOGPROBS}", param="logprobs"
        )
    return logprobs


def _entry(tokenizer: TextTokenizer, token: int, logprob: float) -> TopLogprob:
    text = tokenizer.decode([token])
    return TopLogprob(token=text, logprob=logprob, bytes=list(text.encode("utf-8")))


def chat_logprobs(tokenizer: TextTokenizer, items: Sequence[TokenLogprob]) -> ChatLogprobs:
    content = []
    for item in items:
        head = _entry(tokenizer, item.token_id, item.logprob)
        top = [_entry(tokenizer, i, v) for i, v in item.top]
        content.append(ChatTokenLogprob(**head.model_dump(), top_logprobs=top))
    return ChatLogprobs(content=content)


def completion_logprobs(
    tokenizer: TextTokenizer, items: Sequence[TokenLogprob], offsets: Sequence[int]
) -> CompletionLogprobs:
    """`offsets`: where each token's text starts in the choice's text, as sent (the length of the text before
    the delta that carried it: a stop string or an incomplete character may hold text back)."""
    tokens = [tokenizer.decode([item.token_id]) for item in items]
    tops = []
    for item in items:
        top = {tokenizer.decode([i]): v for i, v in item.top}
        top.setdefault(tokenizer.decode([item.token_id]), item.logprob)  # the sampled token is always listed
        tops.append(top)
    return CompletionLogprobs(
        tokens=tokens, token_logprobs=[item.logprob for item in items], top_logprobs=tops, text_offset=list(offsets)
    )
