"""Tool calling's parts of OpenAI's chat bodies: `tools`, `tool_choice`, the calls an assistant message
carries (sent back by the client) and the calls an answer carries (whole, and as streamed deltas).

Request parts refuse fields they do not know, like every request body of this server (`schemas.py`);
`strict` on a function is accepted because `required` and a named choice always follow the schema
(grammar-enforced), and `auto` states in the docs that it only parses.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict

__all__ = [
    "FunctionCall",
    "FunctionDefinition",
    "FunctionDelta",
    "FunctionName",
    "NamedToolChoice",
    "ToolCall",
    "ToolCallDelta",
    "ToolChoice",
    "ToolDefinition",
]


class _Strict(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")


class FunctionDefinition(_Strict):
    name: str
    description: str | None = None
    parameters: dict[str, Any] | None = None  # a JSON schema for the arguments object; None: no arguments
    strict: bool | None = None


class ToolDefinition(_Strict):
    type: str  # "function", the only kind a chat model calls
    function: FunctionDefinition


class FunctionName(_Strict):
    name: str


class NamedToolChoice(_Strict):
    type: str
    function: FunctionName


ToolChoice = Literal["none", "auto", "required"] | NamedToolChoice


class FunctionCall(BaseModel):
    """A call's function, in requests (an assistant turn sent back) and answers alike."""

    model_config = ConfigDict(strict=True, extra="forbid")

    name: str
    arguments: str  # a JSON object, as a string (OpenAI's convention)


class ToolCall(BaseModel):
    model_config = ConfigDict(strict=True, extra="forbid")

    id: str
    type: Literal["function"] = "function"
    function: FunctionCall


class FunctionDelta(BaseModel):
    name: str | None = None
    arguments: str | None = None


class ToolCallDelta(BaseModel):
    """The first delta of a call has index, id, type and the name; the next ones add argument text."""

    index: int
    id: str | None = None
    type: Literal["function"] | None = None
    function: FunctionDelta
