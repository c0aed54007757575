"""Request and response bodies in OpenAI's shapes, as pydantic models.

Requests are strict about types (a string where a number belongs is refused with 422, never coerced)
and about names: no field is ignored silently. A body holds fields this server honours, and fields it
accepts with a documented meaning (`user`: an opaque id of the end user, not used; `metadata`: tags for
stored completions, and `store` may only be false: nothing is stored). Any other name is refused with
400 naming it (`errors.py` turns pydantic's `extra_forbidden` into that). Value checks (ranges, n,
roles, tools) are not here but in `requests.py` and `tool_calls.py`, which answer them with 400, so the
status says which kind of mistake it was.
Extensions beyond OpenAI's fields carry vLLM's names: `top_k`, `repetition_penalty`, `stop_token_ids`,
`ignore_eos`; `stop` also takes token ids (integers) next to strings.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from onyxia.cli.serve.logprob_bodies import ChatLogprobs, CompletionLogprobs
from onyxia.cli.serve.tool_schemas import ToolCall, ToolCallDelta, ToolChoice, ToolDefinition

__all__ = [
    "AssistantMessage",
    "ChatChoice",
    "ChatChunkChoice",
    "ChatCompletion",
    "ChatCompletionChunk",
    "ChatCompletionRequest",
    "ChatMessage",
    "Completion",
    "CompletionChoice",
    "CompletionRequest",
    "ContentPart",
    "Delta",
    "ErrorBody",
    "ErrorDetail",
    "FinishReason",
    "ModelCard",
    "JsonSchemaFormat",
    "ModelList",
    "PromptTokensDetails",
    "ResponseFormat",
    "StreamOptions",
    "Usage",
]

FinishReason = Literal["stop", "length", "tool_calls"]


class _Request(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class StreamOptions(_Request):
    include_usage: bool = False


class ContentPart(_Request):
    """One part of a message's content list; only text parts can reach a text-only model. Other kinds
    carry fields of their own (`image_url`, `input_audio`): allowed here, refused by their `type`."""

    model_config = ConfigDict(strict=True, extra="allow")

    type: str
    text: str | None = None


class ChatMessage(_Request):
    role: str
    content: str | list[ContentPart] | None = None
    name: str | None = None
    tool_calls: list[ToolCall] | None = None  # an assistant turn's calls, sent back
    tool_call_id: str | None = None  # a tool turn: the call it answers


class JsonSchemaFormat(_Request):
    name: str | None = None
    description: str | None = None
    schema_: dict[str, object] | None = Field(default=None, alias="schema")
    strict: bool | None = None


class ResponseFormat(_Request):
    """OpenAI's `response_format` (`serve/response_format.py` turns it into a grammar)."""

    type: str
    json_schema: JsonSchemaFormat | None = None


class _Sampling(_Request):
    """Fields both endpoints share. None means "the server's default" (`onyxia serve` flags)."""

    model: str | None = None
    max_tokens: int | None = None
    temperature: float | None = None
    top_p: float | None = None
    top_k: int | None = None  # extension (vLLM's name): 0 = off
    min_p: float | None = None  # extension (vLLM's and llama.cpp's name): 0 = off
    repetition_penalty: float | None = None  # extension (vLLM's name): 1 = off
    seed: int | None = None
    stop: str | list[str | int] | None = None  # integers are token ids (extension)
    stop_token_ids: list[int] | None = None  # extension (vLLM's name)
    ignore_eos: bool = False  # extension (vLLM's name): run to max_tokens, for benchmarks
    n: int | None = None
    stream: bool = False
    stream_options: StreamOptions | None = None
    presence_penalty: float | None = None  # OpenAI's: -2 .. 2 over the generated tokens
    frequency_penalty: float | None = None
    logit_bias: dict[str, float] | None = None  # OpenAI's: token id (a string, as JSON keys are) -> -100 .. 100
    logprobs: bool | int | None = None  # chat: true/false; completions: 0..5 top entries (`logprobs.py`)
    user: str | None = None  # accepted: an opaque id of the end user (OpenAI's abuse monitoring); not used
    metadata: dict[str, str] | None = None  # accepted: tags of a stored completion; nothing is stored
    store: bool | None = None  # accepted when false: this server stores no completions (true is a 400)
    response_format: ResponseFormat | None = None
    guided_json: dict[str, object] | str | None = None  # extension (vLLM's names): one constraint at most
    guided_regex: str | None = None
    guided_choice: list[str] | None = None
    guided_grammar: str | None = None


class ChatCompletionRequest(_Sampling):
    messages: list[ChatMessage]
    max_completion_tokens: int | None = None  # OpenAI's newer name for max_tokens
    tools: list[ToolDefinition] | None = None
    tool_choice: ToolChoice | None = None
    parallel_tool_calls: bool | None = None
    top_logprobs: int | None = None


class CompletionRequest(_Sampling):
    prompt: str | list[int] | list[str] | list[list[int]]
    echo: bool = False


# ----- responses -----------------------------------------------------------------------------------
class PromptTokensDetails(BaseModel):
    cached_tokens: int  # prompt tokens the KV cache already held: not prefilled again


class Usage(BaseModel):
    prompt_tokens: int
    completion_tokens: int
    total_tokens: int
    prompt_tokens_details: PromptTokensDetails


class AssistantMessage(BaseModel):
    role: Literal["assistant"] = "assistant"
    content: str | None
    tool_calls: list[ToolCall] | None = None


class ChatChoice(BaseModel):
    index: int = 0
    message: AssistantMessage
    finish_reason: FinishReason
    logprobs: ChatLogprobs | None = None


class ChatCompletion(BaseModel):
    id: str
    object: Literal["chat.completion"] = "chat.completion"
    created: int
    model: str
    choices: list[ChatChoice]
    usage: Usage


class Delta(BaseModel):
    role: Literal["assistant"] | None = None
    content: str | None = None
    tool_calls: list[ToolCallDelta] | None = None


class ChatChunkChoice(BaseModel):
    index: int = 0
    delta: Delta
    finish_reason: FinishReason | None = None
    logprobs: ChatLogprobs | None = None


class ChatCompletionChunk(BaseModel):
    id: str
    object: Literal["chat.completion.chunk"] = "chat.completion.chunk"
    created: int
    model: str
    choices: list[ChatChunkChoice]
    usage: Usage | None = None


class CompletionChoice(BaseModel):
    index: int = 0
    text: str
    finish_reason: FinishReason | None = None
    logprobs: CompletionLogprobs | None = None


class Completion(BaseModel):
    """A whole completion, and (with one choice carrying a piece of text) each streamed chunk."""

    id: str
    object: Literal["text_completion"] = "text_completion"
    created: int
    model: str
    choices: list[CompletionChoice]
    usage: Usage | None = None


class ModelCard(BaseModel):
    id: str
    object: Literal["model"] = "model"
    created: int
    owned_by: str = "onyxia"


class ModelList(BaseModel):
    object: Literal["list"] = "list"
    data: list[ModelCard]


class ErrorDetail(BaseModel):
    message: str
    type: str
    param: str | None = None
    code: str | None = None


class ErrorBody(BaseModel):
    error: ErrorDetail
