"""How each family writes a tool call, one row per family beside `families.FAMILIES`, and the parser.

A model asks for a tool by writing text in the syntax its chat template teaches it (the template also
renders earlier calls that way when a conversation is fed back). The row says where a call block starts
and ends, whether the block holds one call object or a JSON list of them, and which key carries the
arguments; `parse_tool_calls` turns an answer into content plus calls, and `tool_grammar.py` builds the
Lark grammar that forces a call (`tool_choice` "required" or a named function) from the same row.

| family | a call as the model writes it |
|---|---|
| qwen2, qwen3 | `<tool_call>\\n{"name": N, "arguments": {...}}\\n</tool_call>`, one block per call |
| llama | the whole answer is `{"name": N, "parameters": {...}}` (Llama 3.x JSON, one call) |
| mistral | `[TOOL_CALLS] [{"name": N, "arguments": {...}}, ...]` to the end of the answer (v0.3) |
| phi3 | `<|tool_call|>[{"name": N, "arguments": {...}}, ...]<|/tool_call|>` (Phi-4-mini) |
| gemma2, gemma3 | a fenced block: `` ```tool_code\\n{"name": N, "arguments": {...}}\\n``` `` |

An answer that does not parse as calls of its family (no start marker, broken JSON, a call without a
name, prose after a call) is plain content: `auto` lets the model choose, and text it meant as prose
must not be lost.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

__all__ = ["TOOL_SYNTAXES", "ParsedAnswer", "ParsedCall", "ToolSyntax", "parse_tool_calls", "tool_syntax_of"]


@dataclass(frozen=True)
class ToolSyntax:
    families: tuple[str, ...]  # `Family.name`s (llm/families.py) that write calls this way
    start: str  # opens a call block; "" = the answer itself is the call (Llama 3.x JSON)
    end: str  # closes it; "" = the block runs to the end of the answer
    arguments_key: str  # the key of the call object holding the arguments
    listed: bool  # the block holds a JSON list of calls, not one call object
    single: bool = False  # the template renders one call per turn at most (Llama 3.x raises on more)
    id_length: int | None = None  # ids the template checks: this many letters and digits (Mistral: 9)
    padding: str = ""  # between a marker and the call, as the template renders it (Qwen's and Gemma's newline)

    def marker_texts(self) -> tuple[str, ...]:
        """The markers, which a tokenizer may hold as single (special) tokens that decoding would drop."""
        return tuple(m for m in (self.start, self.end) if m)


TOOL_SYNTAXES = (
    ToolSyntax(("qwen2", "qwen3"), "<tool_call>", "</tool_call>", "arguments", listed=False, padding="\n"),
    ToolSyntax(("llama",), "", "", "parameters", listed=False, single=True),
    ToolSyntax(("mistral",), "[TOOL_CALLS]", "", "arguments", listed=True, id_length=9, padding=" "),
    ToolSyntax(("phi3",), "<|tool_call|>", "<|/tool_call|>", "arguments", listed=True),
    ToolSyntax(("gemma2", "gemma3"), "```tool_code", "```", "arguments", listed=False, padding="\n"),
)


def tool_syntax_of(family: str | None) -> ToolSyntax | None:
    return next((row for row in TOOL_SYNTAXES if family in row.families), None)


@dataclass(frozen=True)
class ParsedCall:
    name: str
    arguments: dict[str, Any]


@dataclass(frozen=True)
class ParsedAnswer:
    content: str  # the text before the first call
    calls: tuple[ParsedCall, ...]


def parse_tool_calls(text: str, syntax: ToolSyntax) -> ParsedAnswer:
    """`text` as content and calls: the content is the text before the first call (trailing whitespace
    dropped), and everything from there must be call blocks and whitespace; otherwise no calls, and the
    whole text is content. (A streamed answer can send the text before a marker as it comes.)"""
    if not syntax.start:  # the answer is one JSON object, or it is prose
        call = _call(_json(text.strip()), syntax)
        return ParsedAnswer("", (call,)) if call is not None else ParsedAnswer(text, ())
    first = text.find(syntax.start)
    if first < 0:
        return ParsedAnswer(text, ())
    calls: list[ParsedCall] = []
    rest = text[first:]
    while rest.strip():
        rest = rest.lstrip()
        if not rest.startswith(syntax.start):
            return ParsedAnswer(text, ())
        body = rest[len(syntax.start) :]
        close = body.find(syntax.end) if syntax.end else len(body)
        block = _calls(_json(body[:close].strip()), syntax) if close >= 0 else None
        if block is None:
            return ParsedAnswer(text, ())
        calls.extend(block)
        rest = body[close + len(syntax.end) :]
    return ParsedAnswer(text[:first].rstrip(), tuple(calls))


_NOT_JSON = object()


def _json(text: str) -> Any:
    try:
        return json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        return _NOT_JSON


def _calls(value: Any, syntax: ToolSyntax) -> list[ParsedCall] | None:
    items = value if syntax.listed and isinstance(value, list) else [value]
    if syntax.listed and not isinstance(value, list) or not items:
        return None
    calls = [_call(item, syntax) for item in items]
    return None if any(c is None for c in calls) else [c for c in calls if c is not None]


def _call(value: Any, syntax: ToolSyntax) -> ParsedCall | None:
    """A call object: a string `name` and an object of arguments (absent: no arguments)."""
    if not isinstance(value, dict) or not isinstance(value.get("name"), str) or not value["name"]:
        return None
    arguments = value.get(syntax.arguments_key, {})
    if isinstance(arguments, str):  # some models write the arguments as a JSON string, as OpenAI sends them
        arguments = _json(arguments)
    if not isinstance(arguments, dict) or set(value) - {"name", syntax.arguments_key, "id"}:
        return None
    return ParsedCall(value["name"], arguments)
