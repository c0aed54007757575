"""The endpoints: chat and text completions (whole or streamed), models, health, metrics, the page.

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
from onyxia.cli.serve.embeddings import embedding_cards
from onyxia.cli.serve.engine import Engine
from onyxia.cli.serve.errors import ApiError
from onyxia.cli.serve.jobs import TextDelta
from onyxia.cli.serve.metrics import Metrics
from onyxia.cli.serve.requests import Defaults, chat_prompt, completion_prompt, generation_request
from onyxia.cli.serve.responses import EventStream, SseResponse, new_id, sse, usage_of
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
    if body.stream:
        usage = bool(body.stream_options and body.stream_options.include_usage)
        return SseResponse(stream, lambda s: _chat_chunks(s, ident, state.model, usage, plan))
    text, finished = await stream.collect()
    content, calls = plan.answer(text) if plan else (text, [])
    reason = "tool_calls" if calls else _reason(finished.reason)
    choice = ChatChoice(message=AssistantMessage(content=content, tool_calls=calls or None), finish_reason=reason)
    return ChatCompletion(
        id=ident, created=stream.created, model=state.model, choices=[choice], usage=usage_of(finished)
    )


async def _chat_chunks(
    stream: EventStream, ident: str, model: str, include_usage: bool, plan: ToolPlan | None
) -> AsyncIterator[str]:
    def chunk(delta: Delta, reason: str | None = None) -> ChatCompletionChunk:
        choice = ChatChunkChoice(delta=delta, finish_reason=_reason(reason) if reason else None)
        return ChatCompletionChunk(id=ident, created=stream.created, model=model, choices=[choice])

    tools = ToolStream(plan) if plan else None
    yield sse(chunk(Delta(role="assistant", content="")))
    async for event in stream:
        if isinstance(event, TextDelta):
            text = tools.push(event.text) if tools else event.text
            if text:
                yield sse(chunk(Delta(content=text)))
            continue
        tail, calls = tools.finish() if tools else ("", [])
        if tail:
            yield sse(chunk(Delta(content=tail)))
        for delta in call_deltas(calls):
            yield sse(chunk(Delta(tool_calls=[delta])))
        yield sse(chunk(Delta(), "tool_calls" if calls else event.reason))
        if include_usage:
            usage = usage_of(event)
            yield sse(ChatCompletionChunk(id=ident, created=stream.created, model=model, choices=[], usage=usage))


@router.post("/v1/completions", response_model=None)
async def completions(body: CompletionRequest, request: Request) -> Completion | Response:
    state = _state(request)
    prompt = completion_prompt(state.session, body)
    job = generation_request(state.session, body, prompt, state.defaults, state.session.model_dir.eos_token_ids)
    stream, ident = EventStream(state.engine, job), new_id("cmpl")
    if body.stream:
        usage = bool(body.stream_options and body.stream_options.include_usage)
        return SseResponse(stream, lambda s: _completion_chunks(s, ident, state.model, usage))
    text, finished = await stream.collect()
    choice = CompletionChoice(text=text, finish_reason=_reason(finished.reason))
    return Completion(id=ident, created=stream.created, model=state.model, choices=[choice], usage=usage_of(finished))


async def _completion_chunks(stream: EventStream, ident: str, model: str, include_usage: bool) -> AsyncIterator[str]:
    def chunk(choices: list[CompletionChoice], usage: Usage | None = None) -> Completion:
        return Completion(id=ident, created=stream.created, model=model, choices=choices, usage=usage)

    async for event in stream:
        if isinstance(event, TextDelta):
            yield sse(chunk([CompletionChoice(text=event.text)]))
            continue
        yield sse(chunk([CompletionChoice(text="", finish_reason=_reason(event.reason))]))
        if include_usage:
            yield sse(chunk([], usage=usage_of(event)))


_REASONS: dict[str, FinishReason] = {"stop": "stop", "length": "length", "tool_calls": "tool_calls"}


def _reason(reason: str) -> FinishReason:
    """ "cancelled" never reaches here: `EventStream` answers a job cancelled under a listener with 503."""
    known = _REASONS.get(reason)
    if known is not None:
        return known
    raise ApiError(500, f"unexpected finish reason {reason!r}")


@router.get("/v1/models")
async def models(request: Request) -> ModelList:
    state = _state(request)
    return ModelList(data=[ModelCard(id=state.model, created=state.created), *embedding_cards(request)])


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
