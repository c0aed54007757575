"""From an API body to a `GenerationRequest`: the prompt's ids, the budget, sampling and stops.

Everything the schema cannot say is checked here and answered with 400 (413 for a prompt that
leaves no room for an answer): no messages, an unknown role, n or logprobs out of range (`logprobs.py`),
`store` true, `echo` true, a tool message answering no call (`tool_calls.py` checks the tool parts), token ids
(prompt, stops, logit_bias keys) outside the vocabulary, sampling values out of range
(`SamplingParams.validate`). A request's max_tokens is clamped to what max_length leaves after its prompt
(finish_reason then says "length").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from onyxia.cli.llm.sampling import SamplingParams
from onyxia.cli.llm.session import LlmSession
from onyxia.cli.serve.errors import ApiError
from onyxia.cli.serve.jobs import GenerationRequest
from onyxia.cli.serve.logprobs import requested_logprobs, requested_n
from onyxia.cli.serve.response_format import request_constraint
from onyxia.cli.serve.schemas import ChatCompletionRequest, ChatMessage, CompletionRequest
from onyxia.cli.serve.tool_calls import template_message
from onyxia.core import ModelLoadError

__all__ = ["ROLES", "Defaults", "chat_prompt", "check_ids", "completion_prompt", "generation_request"]

# OpenAI's roles as chat templates know them: "developer" is o1's name for the system message
ROLES = {"system": "system", "developer": "system", "user": "user", "assistant": "assistant", "tool": "tool"}


@dataclass(frozen=True)
class Defaults:
    """What a request that leaves a field out gets (`onyxia serve`'s sampling flags)."""

    params: SamplingParams = field(default_factory=SamplingParams)
    max_tokens: int | None = None  # None: up to max_length


def chat_prompt(session: LlmSession, body: ChatCompletionRequest) -> list[int]:
    """The conversation through the model's own chat template, ending with the assistant's turn."""
    if not body.messages:
        raise ApiError(400, "messages is empty; expected at least one message", param="messages")
    called: dict[str, str] = {}  # tool call id -> function name, from the assistant turns so far
    messages = [{**_message(m, i), **template_message(m, i, called)} for i, m in enumerate(body.messages)]
    tools = [t.model_dump(exclude_none=True) for t in body.tools] if body.tools else None
    try:
        text = session.tokenizer.render_chat(messages, tools=tools)
    except ModelLoadError as e:
        raise ApiError(400, f"{e}; send raw text to /v1/completions instead", param="messages") from None
    return session.tokenizer.encode_chat_turn(text)


def _message(message: ChatMessage, index: int) -> dict[str, Any]:
    role = ROLES.get(message.role)
    if role is None:
        raise ApiError(
            400,
            f"messages[{index}].role is {message.role!r}; expected one of {', '.join(ROLES)}",
            param=f"messages.{index}.role",
        )
    content = message.content
    if isinstance(content, list):
        kinds = sorted({part.type for part in content if part.type != "text"})
        if kinds:
            raise ApiError(
                400,
                f"messages[{index}] has {', '.join(kinds)} parts; this model reads text only",
                param=f"messages.{index}.content",
            )
        content = "".join(part.text or "" for part in content)
    return {"role": role, "content": content or ""}


def completion_prompt(session: LlmSession, body: CompletionRequest) -> list[int]:
    """A string is tokenized as `onyxia generate` does (special tokens added); a list of ints is ids."""
    prompt = body.prompt
    if isinstance(prompt, list) and prompt and not isinstance(prompt[0], int):
        if len(prompt) != 1:
            raise ApiError(
                400, f"prompt holds {len(prompt)} prompts; this server answers one per request", param="prompt"
            )
        prompt = prompt[0]
    ids = session.tokenizer.encode(prompt) if isinstance(prompt, str) else [t for t in prompt if isinstance(t, int)]
    check_ids(session, ids, "prompt")
    return ids


def generation_request(
    session: LlmSession,
    body: ChatCompletionRequest | CompletionRequest,
    prompt: list[int],
    defaults: Defaults,
    eos: Sequence[int],
) -> GenerationRequest:
    """`eos`: the ids that end an answer unless `ignore_eos` (the chat stops include end-of-turn)."""
    _refuse_unsupported(body)
    where = "messages" if isinstance(body, ChatCompletionRequest) else "prompt"
    if not prompt:
        raise ApiError(400, "the prompt has no tokens", param=where)
    room = session.max_length - len(prompt)
    if room < 1:
        raise ApiError(
            413,
            f"the prompt takes {len(prompt)} tokens; max_length {session.max_length} leaves no room for an answer",
            param=where,
            code="context_length_exceeded",
        )
    asked = getattr(body, "max_completion_tokens", None)
    asked = body.max_tokens if asked is None else asked
    if asked is not None and asked < 1:
        raise ApiError(400, f"max_tokens is {asked}; expected at least 1", param="max_tokens")
    limit = asked if asked is not None else defaults.max_tokens
    strings = [body.stop] if isinstance(body.stop, str) else [s for s in body.stop or [] if isinstance(s, str)]
    ids = [s for s in body.stop or [] if isinstance(s, int)] + list(body.stop_token_ids or [])
    check_ids(session, ids, "stop")
    params = _sampling(body, defaults.params)
    check_ids(session, [token for token, _ in params.logit_bias], "logit_bias")
    params.validate()  # an InputError: 400
    constraint = request_constraint(session, body)  # a 400 naming the field, before anything is queued
    top = body.top_logprobs if isinstance(body, ChatCompletionRequest) else None
    logprobs = requested_logprobs(isinstance(body, ChatCompletionRequest), body.logprobs, top)
    return GenerationRequest(
        prompt=prompt,
        max_tokens=room if limit is None else min(limit, room),
        params=params,
        stop_ids=frozenset(ids) | frozenset(() if body.ignore_eos else eos),
        stop_strings=tuple(strings),
        constraint=constraint,
        n=requested_n(session, body.n),
        logprobs=logprobs,
    )


_SAMPLING_FIELDS = (
    "temperature",
    "top_k",
    "top_p",
    "min_p",
    "repetition_penalty",
    "seed",
    "presence_penalty",
    "frequency_penalty",
)


def _sampling(body: ChatCompletionRequest | CompletionRequest, base: SamplingParams) -> SamplingParams:
    given: dict[str, object] = {name: value for name in _SAMPLING_FIELDS if (value := getattr(body, name)) is not None}
    if body.logit_bias:
        given["logit_bias"] = tuple(sorted((_bias_token(key), bias) for key, bias in body.logit_bias.items()))
    return replace(base, **given)  # type: ignore[arg-type]


def _bias_token(key: str) -> int:
    """A logit_bias key as a token id (OpenAI's JSON keys are the ids as strings)."""
    if not (key.isascii() and key.isdigit()):
        raise ApiError(
            400, f'logit_bias: key {key!r} is not a token id (expected digits, as "1234")', param="logit_bias"
        )
    return int(key)


def _refuse_unsupported(body: ChatCompletionRequest | CompletionRequest) -> None:
    problems = [
        (name, message)
        for name, bad, message in (
            ("echo", bool(getattr(body, "echo", False)), "echo is not supported"),
            ("store", bool(body.store), "store is true; this server stores no completions"),
        )
        if bad
    ]
    if problems:
        raise ApiError(400, "; ".join(m for _, m in problems), param=problems[0][0])


def check_ids(session: LlmSession, ids: Sequence[int], param: str) -> None:
    """400 naming `param` when an id lies outside the vocabulary."""
    vocab = session.vocab_size
    bad = [t for t in ids if t < 0 or (vocab is not None and t >= vocab)]
    if bad:
        known = f"0 to {vocab - 1}" if vocab is not None else "non-negative"
        raise ApiError(400, f"{param}: token id {bad[0]} is outside the vocabulary (ids are {known})", param=param)
