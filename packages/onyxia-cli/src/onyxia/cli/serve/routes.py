"""The endpoints: chat and text completions (whole or streamed), models (listed and retrieved), health, metrics,
the page.

Handlers only translate: the prompt and budget come from `requests.py`, the generation from the
engine, the bodies from `responses.py`. The `model` a request names is not checked: one model is
served, and clients often send a name of their own choosing.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from dataclasses import dataclass, replace
from pathlib import Path

from fastapi import APIRouter, Request
from starlette.responses import FileResponse, Response

from onyxia.cli.llm.session import LlmSession
from onyxia.cli.llm.tokenizer import TextTokenizer
from onyxia.cli.serve.embeddings import embedding_cards
from onyxia.cli.serve.engine import Engine
from onyxia.cli.serve.errors import ApiError
from onyxia.cli.serve.jobs import Finished, TextDelta
from onyxia.cli.serve.logprob_bodies import ChatLogprobs
from onyxia.cli.serve.logprobs import chat_logprobs, completion_logprobs
from onyxia.cli.serve.metrics import Metrics
from onyxia.cli.serve.requests import Defaults, chat_prompt, completion_prompt, generation_request
from onyxia.cli.serve.responses import Choice, EventStream, SseResponse, new_id, sse, usage_of
from onyxia.cli.serve.schemas import (
    AssistantMessage,
    ChatChoice,
    ChatChunkChoice,
    ChatCompletion,
    ChatCompletionChunk,
    ChatCompletionRequest,
    Completion,
    CompletionChoice,
    CompletionRequest,
    Delta,
    FinishReason,
    ModelCard,
    ModelList,
    Usage,
)
from onyxia.cli.serve.tool_calls import ToolPlan, forced, tool_plan
from onyxia.cli.serve.tool_stream import ToolStream, call_deltas

__all__ = ["ServerState", "router"]

router = APIRouter()


@dataclass
class ServerState:
    session: LlmSession
    engine: Engine
    metrics: Metrics
    defaults: Defaults
    model: str
    created: int
    chat_stops: list[int]  # EOS and end-of-turn ids
    static_dir: Path


def _state(request: Request) -> ServerState:
    state: ServerState = request.app.state.onyxia
    return state


@router.post("/v1/chat/completions", response_model=None)
async def chat_completions(body: ChatCompletionRequest, request: Request) -> ChatCompletion | Response:
    state = _state(request)
    plan = tool_plan(state.session, body)  # tools: checked (400s) before anything runs
    prompt = chat_prompt(state.session, body)
    job = generation_request(state.session, body, prompt, state.defaults, state.chat_stops)
    constraint = forced(plan, state.session)  # "required" / named: the calls' grammar
    if constraint is not None and job.constraint is not None:
        raise ApiError(
            400, "tool_choice forces a call; it cannot be combined with an output constraint", param="tool_choice"
        )
    if plan:
        job = replace(job, keep_special=plan.markers, constraint=constraint or job.constraint)
    stream, ident = EventStream(state.engine, job), new_id("chatcmpl")
    tokenizer = state.session.tokenizer
    if body.stream:
        usage = bool(body.stream_options and body.stream_options.include_usage)
        return SseResponse(stream, lambda s: _chat_chunks(s, ident, state.model, usage, tokenizer, plan))
    choices = await stream.collect_choices()
    asked = job.logprobs is not None
    answers = [_chat_choice(i, c, plan, tokenizer, asked) for i, c in enumerate(choices)]
    total = usage_of(*(c.ended for c in choices))
    return ChatCompletion(id=ident, created=stream.created, model=state.model, choices=answers, usage=total)


def _chat_choice(
    index: int, choice: Choice, plan: ToolPlan | None, tokenizer: TextTokenizer, asked: bool
) -> ChatChoice:
    """One whole choice: its text (tool calls parsed out when the request has tools) and its logprobs."""
    content, calls = plan.answer(choice.text) if plan else (choice.text, [])
    return ChatChoice(
        index=index,
        message=AssistantMessage(content=content, tool_calls=calls or None),
        finish_reason="tool_calls" if calls else _reason(choice.ended.reason),
        logprobs=chat_logprobs(tokenizer, choice.logprobs) if asked else None,
    )


async def _chat_chunks(
    stream: EventStream, ident: str, model: str, include_usage: bool, tokenizer: TextTokenizer, plan: ToolPlan | None
) -> AsyncIterator[str]:
    def chunk(index: int, delta: Delta, reason: str | None = None, logprobs: ChatLogprobs | None = None) -> str:
        choice = ChatChunkChoice(
            index=index, delta=delta, finish_reason=_reason(reason) if reason else None, logprobs=logprobs
        )
        return sse(ChatCompletionChunk(id=ident, created=stream.created, model=model, choices=[choice]))

    n = stream.job.request.n
    tools = [ToolStream(plan) for _ in range(n)] if plan else None  # each choice's calls, parsed as they come
    for index in range(n):
        yield chunk(index, Delta(role="assistant", content=""))
    ended: list[Finished] = []
    async for event in stream:
        if isinstance(event, TextDelta):
            text = tools[event.index].push(event.text) if tools else event.text
            logprobs = chat_logprobs(tokenizer, event.logprobs) if event.logprobs else None
            if text or logprobs:
                yield chunk(event.index, Delta(content=text), logprobs=logprobs)
            continue
        ended.append(event)
        tail, calls = tools[event.index].finish() if tools else ("", [])
        if tail:
            yield chunk(event.index, Delta(content=tail))
        for delta in call_deltas(calls):
            yield chunk(event.index, Delta(tool_calls=[delta]))
        yield chunk(event.index, Delta(), "tool_calls" if calls else event.reason)
    if include_usage:
        usage = usage_of(*ended)
        yield sse(ChatCompletionChunk(id=ident, created=stream.created, model=model, choices=[], usage=usage))


@router.post("/v1/completions", response_model=None)
async def completions(body: CompletionRequest, request: Request) -> Completion | Response:
    state = _state(request)
    prompt = completion_prompt(state.session, body)
    job = generation_request(state.session, body, prompt, state.defaults, state.session.model_dir.eos_token_ids)
    stream, ident = EventStream(state.engine, job), new_id("cmpl")
    tokenizer = state.session.tokenizer
    if body.stream:
        usage = bool(body.stream_options and body.stream_options.include_usage)
        return SseResponse(stream, lambda s: _completion_chunks(s, ident, state.model, usage, tokenizer))
    choices = await stream.collect_choices()
    answers = [
        CompletionChoice(
            index=i,
            text=c.text,
            finish_reason=_reason(c.ended.reason),
            logprobs=completion_logprobs(tokenizer, c.logprobs, c.offsets) if job.logprobs is not None else None,
        )
        for i, c in enumerate(choices)
    ]
    total = usage_of(*(c.ended for c in choices))
    return Completion(id=ident, created=stream.created, model=state.model, choices=answers, usage=total)


async def _completion_chunks(
    stream: EventStream, ident: str, model: str, include_usage: bool, tokenizer: TextTokenizer
) -> AsyncIterator[str]:
    def chunk(choices: list[CompletionChoice], usage: Usage | None = None) -> str:
        return sse(Completion(id=ident, created=stream.created, model=model, choices=choices, usage=usage))

    ended: list[Finished] = []
    offsets = [0] * stream.job.request.n  # each choice's text so far: where its next token's text starts
    async for event in stream:
        if isinstance(event, TextDelta):
            at = [offsets[event.index]] * len(event.logprobs)
            logprobs = completion_logprobs(tokenizer, event.logprobs, at) if event.logprobs else None
            offsets[event.index] += len(event.text)
            yield chunk([CompletionChoice(index=event.index, text=event.text, logprobs=logprobs)])
            continue
        ended.append(event)
        yield chunk([CompletionChoice(index=event.index, text="", finish_reason=_reason(event.reason))])
    if include_usage:
        yield chunk([], usage=usage_of(*ended))


_REASONS: dict[str, FinishReason] = {"stop": "stop", "length": "length", "tool_calls": "tool_calls"}


def _reason(reason: str) -> FinishReason:
    """ "cancelled" never reaches here: `EventStream` answers a job cancelled under a listener with 503."""
    known = _REASONS.get(reason)
    if known is not None:
        return known
    raise ApiError(500, f"unexpected finish reason {reason!r}")


def _cards(request: Request) -> list[ModelCard]:
    """The served model's card, then any embedding model's."""
    state = _state(request)
    return [ModelCard(id=state.model, created=state.created), *embedding_cards(request)]


@router.get("/v1/models")
async def models(request: Request) -> ModelList:
    return ModelList(data=_cards(request))


@router.get("/v1/models/{model}")
async def model(request: Request, model: str) -> ModelCard:
    """OpenAI's `models.retrieve`: a served model's card, else 404."""
    cards = _cards(request)
    found = next((card for card in cards if card.id == model), None)
    if found is None:
        served = ", ".join(card.id for card in cards)
        raise ApiError(404, f"the model {model!r} does not exist; this server serves {served}", code="model_not_found")
    return found


@router.get("/health")
async def health(request: Request) -> dict[str, object]:
    state = _state(request)
    return {"status": "ok", "model": state.model, "queue_depth": state.engine.queue_depth}


@router.get("/metrics")
async def metrics(request: Request) -> Response:
    state = _state(request)
    return Response(state.metrics.render(), media_type=state.metrics.content_type)


@router.get("/", response_model=None)
async def page(request: Request) -> Response:
    """The chat page, once `static/index.html` ships in the package."""
    index = _state(request).static_dir / "index.html"
    if not index.is_file():
        raise ApiError(404, "no chat page is installed (static/index.html); the API is under /v1")
    return FileResponse(index)
