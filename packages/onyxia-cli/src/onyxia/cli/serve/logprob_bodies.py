"""The bodies of OpenAI's `logprobs` in answers (chat's `content` items, completions' parallel lists); what they
hold and how they are filled is in `logprobs.py`. Apart so `schemas.py` can use them without the checks' imports."""

from __future__ import annotations

from pydantic import BaseModel

__all__ = ["ChatLogprobs", "ChatTokenLogprob", "CompletionLogprobs", "TopLogprob"]


class TopLogprob(BaseModel):
    token: str
    logprob: float
    bytes: list[int] | None


class ChatTokenLogprob(TopLogprob):
    top_logprobs: list[TopLogprob]


class ChatLogprobs(BaseModel):
    content: list[ChatTokenLogprob] | None
    refusal: None = None


class CompletionLogprobs(BaseModel):
    tokens: list[str]
    token_logprobs: list[float]
    top_logprobs: list[dict[str, float]]
    text_offset: list[int]
