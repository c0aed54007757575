"""vLLM's `POST /tokenize` and `POST /detokenize`.

Clients count a prompt's tokens before they send it (to fit `max_length`, to trim a conversation): `/tokenize`
returns the ids the server itself would feed, a `prompt` tokenized as `/v1/completions` does and `messages`
(with `tools`) through the model's chat template as `/v1/chat/completions` does, with the count and the
per-sequence limit. `/detokenize` turns ids back into text. Bodies and answers follow vLLM's (llama.cpp's server
names the fields `content` instead). Like `/health` they sit outside `/v1`, so `--api-key` does not cover them,
as in vLLM.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from pydantic import BaseModel, ConfigDict

from onyxia.cli.serve.errors import ApiError
from onyxia.cli.serve.requests import chat_prompt, check_ids, completion_prompt
from onyxia.cli.serve.schemas import (
    ChatCompletionRequest,
    ChatMessage,
    CompletionRequest,
    ToolDefinition,
)

__all__ = ["tokenize_router"]

tokenize_router = APIRouter()


class TokenizeRequest(BaseModel):
    """A `prompt` (text or ids, as `/v1/completions` takes it) or `messages` (with `tools`, as chat takes them)."""

    model_config = ConfigDict(strict=True, extra="forbid")  # an unknown field is a 400 naming it

    model: str | None = None
    prompt: str | list[int] | None = None
    messages: list[ChatMessage] | None = None
    tools: list[ToolDefinition] | None = None


class TokenizeResponse(BaseModel):
    count: int
    max_model_len: int
    tokens: list[int]


class DetokenizeRequest(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")
    model: str | None = None
    tokens: list[int]


class DetokenizeResponse(BaseModel):
    prompt: str


@tokenize_router.post("/tokenize")
async def tokenize(request: Request, body: TokenizeRequest) -> TokenizeResponse:
    session = request.app.state.onyxia.session
    if (body.prompt is None) == (body.messages is None):
        raise ApiError(400, "give either prompt or messages to tokenize", param="prompt")
    if body.messages is not None:
        ids = chat_prompt(session, ChatCompletionRequest(messages=body.messages, tools=body.tools))
    else:
        if body.tools is not None:
            raise ApiError(400, "tools go with messages (a chat), not with a prompt", param="tools")
        ids = completion_prompt(session, CompletionRequest(prompt=body.prompt))  # type: ignore[arg-type]
    return TokenizeResponse(count=len(ids), max_model_len=session.max_length, tokens=ids)


@tokenize_router.post("/detokenize")
async def detokenize(request: Request, body: DetokenizeRequest) -> DetokenizeResponse:
    session = request.app.state.onyxia.session
    check_ids(session, body.tokens, "tokens")
    return DetokenizeResponse(prompt=session.tokenizer.decode(body.tokens))
