"""Tool calling on /v1/chat/completions: the checks, the conversation as the template reads it, the answer.

What a request's tool fields become, and the choices made where OpenAI leaves room (as vLLM does):
- `tools` reach the model's own chat template as its `tools` variable; a template that never reads it,
  or a family without a row in `llm/tool_syntax.py`, cannot show tools to the model: 400 on `tools`.
- `tool_choice` defaults to "auto" with tools and "none" without; "none" still renders the tools (the
  conversation may hold earlier calls) but never parses the answer; any other choice without tools is a 400.
- "auto" generates freely and parses what the model wrote in its family's syntax; "required" and a named
  function are forced by a grammar (`llm/tool_grammar.py`), so the arguments validate against `parameters`.
- `parallel_tool_calls` false: the grammar allows one call; under "auto" the first call is returned.
- Assistant turns' `tool_calls` reach the template with their arguments decoded to objects, and `tool`
  turns with their `tool_call_id` and the called function's `name`, as transformers' templates expect.
Every refusal is a 400 naming the field (`tools.0.function.parameters`, `tool_choice.function.name`,
`messages.3.tool_call_id`) before anything is generated.
"""

from __future__ import annotations

import json
import re
import secrets
import string
from dataclasses import dataclass
from typing import Any

from onyxia.cli.llm.constraints import Constraint, grammar_tokenizer
from onyxia.cli.llm.families import FAMILIES, family_of
from onyxia.cli.llm.session import LlmSession
from onyxia.cli.llm.tool_grammar import check_parameters, tool_grammar
from onyxia.cli.llm.tool_syntax import ToolSyntax, parse_tool_calls, tool_syntax_of
from onyxia.cli.serve.errors import ApiError
from onyxia.cli.serve.schemas import ChatCompletionRequest, ChatMessage
from onyxia.cli.serve.tool_schemas import FunctionCall, ToolCall
from onyxia.core import InputError

__all__ = ["ToolPlan", "forced", "template_message", "tool_plan"]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")  # OpenAI's rule for function names
_NO_ARGUMENTS = {"type": "object", "properties": {}}


@dataclass(frozen=True)
class ToolPlan:
    """How one request's answer is generated and read back."""

    syntax: ToolSyntax
    tools: dict[str, dict[str, Any]]  # name -> parameters schema, for those the choice allows
    parallel: bool
    grammar: str | None  # "required" / named: the calls the answer must consist of
    markers: frozenset[int] = frozenset()  # marker tokens flagged special, which decoding would drop

    def new_id(self) -> str:
        if self.syntax.id_length is not None:  # the template checks the ids (Mistral: 9 letters and digits)
            alphabet = string.ascii_letters + string.digits
            return "".join(secrets.choice(alphabet) for _ in range(self.syntax.id_length))
        return f"call_{secrets.token_hex(12)}"

    def answer(self, text: str) -> tuple[str | None, list[ToolCall]]:
        """(content, calls) of a whole answer; no calls unless everything from the first call on parses
        as calls of the offered functions (then the content is the text before it, or None)."""
        parsed = parse_tool_calls(text, self.syntax)
        if not parsed.calls or any(call.name not in self.tools for call in parsed.calls):
            return text, []
        calls = parsed.calls if self.parallel else parsed.calls[:1]
        return parsed.content or None, [
            ToolCall(id=self.new_id(), function=FunctionCall(name=c.name, arguments=_dumps(c.arguments))) for c in calls
        ]


def _dumps(arguments: dict[str, Any]) -> str:
    return json.dumps(arguments, ensure_ascii=False)


def tool_plan(session: LlmSession, body: ChatCompletionRequest) -> ToolPlan | None:
    """None when the answer is plain text (no tools, or `tool_choice` "none"); a 400 for a bad request."""
    choice = body.tool_choice
    if not body.tools:
        if choice not in (None, "none"):
            raise ApiError(400, "tool_choice is set but tools is empty or absent", param="tool_choice")
        return None
    tools = _checked_tools(body)
    syntax = _syntax(session)
    if choice == "none":
        return None
    parallel = body.parallel_tool_calls is not False
    tokenizer = session.tokenizer
    ids = (tokenizer.token_id(marker) for marker in syntax.marker_texts())
    markers = frozenset(t for t in ids if t is not None and tokenizer.special_text(t) is not None)
    if choice is None or choice == "auto":
        return ToolPlan(syntax, tools, parallel, None, markers)
    if choice != "required":
        assert not isinstance(choice, str)
        if choice.type != "function":
            raise ApiError(400, f"tool_choice.type is {choice.type!r}; expected 'function'", param="tool_choice.type")
        name = choice.function.name
        if name not in tools:
            raise ApiError(
                400,
                f"tool_choice names function {name!r}, which is not in tools ({', '.join(tools)})",
                param="tool_choice.function.name",
            )
        tools = {name: tools[name]}
    grammar = tool_grammar(syntax, tools, parallel=parallel, token_id=tokenizer.token_id)
    return ToolPlan(syntax, tools, parallel, grammar, markers)


def _checked_tools(body: ChatCompletionRequest) -> dict[str, dict[str, Any]]:
    tools: dict[str, dict[str, Any]] = {}
    for i, tool in enumerate(body.tools or []):
        where = f"tools.{i}"
        if tool.type != "function":
            raise ApiError(400, f"{where}.type is {tool.type!r}; expected 'function'", param=f"{where}.type")
        name = tool.function.name
        if not _NAME.match(name):
            raise ApiError(
                400,
                f"{where}.function.name {name!r} is not a function name (letters, digits, _ and -, at most 64)",
                param=f"{where}.function.name",
            )
        if name in tools:
            raise ApiError(400, f"{where}.function.name {name!r} is defined twice", param=f"{where}.function.name")
        parameters = tool.function.parameters if tool.function.parameters is not None else _NO_ARGUMENTS
        problem = _schema_problem(parameters)
        if problem is not None:
            raise ApiError(400, f"{where}.function.parameters: {problem}", param=f"{where}.function.parameters")
        tools[name] = parameters
    return tools


def _schema_problem(parameters: dict[str, Any]) -> str | None:
    if parameters.get("type", "object") != "object":
        return f"the arguments are an object, so the schema's type must be 'object', not {parameters['type']!r}"
    return check_parameters(parameters)


def _syntax(session: LlmSession) -> ToolSyntax:
    family = family_of(session.model_dir.config)
    syntax = tool_syntax_of(family.name if family else None)
    if syntax is None:
        known = ", ".join(f.name for f in FAMILIES)
        raise ApiError(400, f"no tool-call syntax is known for this model's family (known: {known})", param="tools")
    if not session.tokenizer.template_reads("tools"):
        raise ApiError(
            400,
            "this model's chat template never reads `tools`, so the model could not see them; serve a model "
            "whose template renders tools (or a directory with such a chat_template.jinja)",
            param="tools",
        )
    return syntax


def template_message(message: ChatMessage, index: int, called: dict[str, str]) -> dict[str, Any]:
    """A message's tool parts as transformers' templates read them; `called` (call id -> function name,
    filled from earlier assistant turns) checks that a tool result answers a call."""
    where = f"messages.{index}"
    if message.tool_calls and message.role != "assistant":
        raise ApiError(400, f"{where} has tool_calls; only assistant messages do", param=f"{where}.tool_calls")
    if message.role == "assistant" and message.tool_calls:
        calls = []
        for j, call in enumerate(message.tool_calls):
            arguments = _arguments(call.function.arguments, f"{where}.tool_calls.{j}.function.arguments")
            called[call.id] = call.function.name
            function = {"name": call.function.name, "arguments": arguments}
            calls.append({"id": call.id, "type": "function", "function": function})
        return {"tool_calls": calls}
    if message.role == "tool":
        ident = message.tool_call_id
        if ident is None:
            raise ApiError(400, f"{where} is a tool result without tool_call_id", param=f"{where}.tool_call_id")
        if ident not in called:
            raise ApiError(
                400,
                f"{where}.tool_call_id {ident!r} answers no call of an earlier assistant message",
                param=f"{where}.tool_call_id",
            )
        return {"tool_call_id": ident, "name": message.name or called[ident]}
    if message.tool_call_id is not None:
        raise ApiError(400, f"{where} has tool_call_id; only tool messages do", param=f"{where}.tool_call_id")
    return {}


def _arguments(text: str, param: str) -> dict[str, Any]:
    try:
        value = json.loads(text)
    except (json.JSONDecodeError, RecursionError):
        value = None
    if not isinstance(value, dict):
        raise ApiError(400, f"{param} is not a JSON object ({text[:60]!r})", param=param)
    return value


def forced(plan: ToolPlan | None, session: LlmSession) -> Constraint | None:
    """The constraint that makes the answer the plan's calls ("required" or a named function), checked
    against the model's tokenizer before anything is queued; None for free text."""
    if plan is None or plan.grammar is None:
        return None
    constraint = Constraint.lark(plan.grammar)
    try:
        constraint.check(grammar_tokenizer(session))
    except InputError as e:
        raise ApiError(400, f"tool_choice: the call grammar is refused: {e}", param="tool_choice") from None
    return constraint
