"""A job's events as OpenAI bodies: one JSON object, or server-sent events ending with `data: [DONE]`.

The worker thread hands events to the request's event loop (`EventStream`). A stream's response
cancels its job however it ends, so a client that disconnects stops the generation after the
decode step in progress (Starlette cancels the body iterator when the client goes away).
"""

from __future__ import annotations

import asyncio
import time
import uuid
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field

from pydantic import BaseModel
from starlette.responses import StreamingResponse
from starlette.types import Receive, Scope, Send

from onyxia.cli.llm.logprobs import TokenLogprob
from onyxia.cli.serve.engine import Engine, EngineClosed, QueueFull
from onyxia.cli.serve.errors import ApiError
from onyxia.cli.serve.jobs import Event, Failed, Finished, GenerationRequest, Job, TextDelta
from onyxia.cli.serve.schemas import PromptTokensDetails, Usage
from onyxia.core import InputError

__all__ = ["DONE", "Choice", "EventStream", "SseResponse", "new_id", "sse", "usage_of"]

DONE = "data: [DONE]\n\n"


def new_id(prefix: str) -> str:
    return f"{prefix}-{uuid.uuid4().hex[:24]}"


def sse(body: BaseModel) -> str:
    return f"data: {body.model_dump_json(exclude_none=False)}\n\n"


def usage_of(*finished: Finished) -> Usage:
    """Usage of a job's choices: the prompt once (as the first choice prefilled it), completions summed."""
    first, completion = finished[0], sum(f.completion_tokens for f in finished)
    return Usage(
        prompt_tokens=first.prompt_tokens,
        completion_tokens=completion,
        total_tokens=first.prompt_tokens + completion,
        prompt_tokens_details=PromptTokensDetails(cached_tokens=first.cached_tokens),
    )


class EventStream:
    """Submit a job and read its events on this event loop."""

    def __init__(self, engine: Engine, request: GenerationRequest) -> None:
        loop = asyncio.get_running_loop()
        self._events: asyncio.Queue[Event] = asyncio.Queue()

        def sink(event: Event) -> None:  # called on the worker thread
            loop.call_soon_threadsafe(self._events.put_nowait, event)

        self.job = Job(request, sink)
        self.created = int(time.time())
        try:
            engine.submit(self.job)
        except QueueFull as e:
            raise ApiError(429, str(e), code="queue_full", headers={"Retry-After": str(e.retry_after)}) from None
        except EngineClosed as e:
            raise ApiError(503, str(e)) from None

    async def __aiter__(self) -> AsyncIterator[TextDelta | Finished]:
        """Text deltas, then the `Finished` event (one per choice: n of them, by `index`); a failure raises the
        `ApiError` it answers with."""
        finished = 0
        while True:
            event = await self._events.get()
            if isinstance(event, Failed):
                raise _api_error(event.error)
            if isinstance(event, Finished) and event.reason == "cancelled":  # only a shutdown cancels a listener
                raise ApiError(503, "the server shut down during this request")
            yield event
            finished += isinstance(event, Finished)
            if finished == self.job.request.n:
                return

    async def collect(self) -> tuple[str, Finished]:
        """The whole answer. If the waiting task is cancelled (a shutdown), so is the job."""
        parts: list[str] = []
        try:
            async for event in self:
                if isinstance(event, Finished):
                    return "".join(parts), event
                parts.append(event.text)
        finally:
            self.job.cancel()  # a no-op once finished
        raise AssertionError("a job's events end with Finished or Failed")

    async def collect_choices(self) -> list[Choice]:
        """Every choice of the job (n of them, by index), whole. A cancelled wait cancels the job."""
        choices = [Choice() for _ in range(self.job.request.n)]
        try:
            async for event in self:
                choice = choices[event.index]
                if isinstance(event, Finished):
                    choice.finished = event
                else:
                    choice.offsets += [len(choice.text)] * len(event.logprobs)
                    choice.parts.append(event.text)
                    choice.logprobs.extend(event.logprobs)
        finally:
            self.job.cancel()
        return choices


@dataclass
class Choice:
    """One sample's whole answer: its text pieces, its tokens' log-probabilities (if asked), how it ended."""

    parts: list[str] = field(default_factory=list)
    logprobs: list[TokenLogprob] = field(default_factory=list)
    offsets: list[int] = field(default_factory=list)  # each logprob's token: the text's length before it
    finished: Finished | None = None

    @property
    def text(self) -> str:
        return "".join(self.parts)

    @property
    def ended(self) -> Finished:
        assert self.finished is not None, "every choice ends with a Finished event"
        return self.finished


def _api_error(error: BaseException) -> ApiError:
    if isinstance(error, ApiError):
        return error
    if isinstance(error, EngineClosed):
        return ApiError(503, str(error))
    if isinstance(error, InputError):
        return ApiError(400, str(error))
    return ApiError(500, f"generation failed: {type(error).__name__}: {error}")


class SseResponse(StreamingResponse):
    """Server-sent events that cancel `stream`'s job when the response ends, finished or not."""

    def __init__(self, stream: EventStream, chunks: Callable[[EventStream], AsyncIterator[str]]) -> None:
        super().__init__(
            _guarded(chunks(stream)), media_type="text/event-stream", headers={"Cache-Control": "no-cache"}
        )
        self._job = stream.job

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        try:
            await super().__call__(scope, receive, send)
        finally:
            self._job.cancel()


async def _guarded(chunks: AsyncIterator[str]) -> AsyncIterator[str]:
    """A failure after the stream started cannot change the status: it becomes an error event."""
    try:
        async for chunk in chunks:
            yield chunk
    except ApiError as e:
        yield e.sse()
        return
    yield DONE
