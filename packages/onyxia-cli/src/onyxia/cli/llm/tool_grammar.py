"""The Lark grammar (llguidance's dialect) that forces a tool call in a family's syntax.

`tool_choice` "required" or a named function must yield a call whose arguments validate against the
function's `parameters` schema, whatever the model would have said: a tiny or distracted model writes
prose or broken JSON. The grammar spells the row's markers and the call object's fixed parts (`{"name":
"get_weather", "arguments": `) as literals and embeds each function's schema with llguidance's
`%json`, so the arguments are generated under the schema itself (its `$ref`s resolve against its own
root, which is why each tool gets its own `%json` rather than one `anyOf` wrapper).

A marker the tokenizer holds as one token is written `<[id]>`: llguidance sees every added token as a
special token, which a quoted string never matches. JSON is compact-but-spaced (`", "` and `": "`, as
Jinja's `tojson` renders the template's own examples) with no free whitespace, so a model cannot pad
an answer with blank lines until it runs out of tokens.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from onyxia.cli.llm.tool_syntax import ToolSyntax

__all__ = ["JSON_STYLE", "check_parameters", "tool_grammar"]

JSON_STYLE = {"whitespace_flexible": False, "item_separator": ", ", "key_separator": ": "}


def tool_grammar(
    syntax: ToolSyntax,
    tools: Mapping[str, Mapping[str, Any]],
    *,
    parallel: bool,
    token_id: Callable[[str], int | None],
) -> str:
    """Calls of `tools` ({name: parameters schema}) in `syntax`: one, or several where `parallel` and
    the row's template allow. `token_id` finds a marker held as one token (None: it is plain text)."""
    many = parallel and not syntax.single
    names = [f"call_{i}" for i in range(len(tools))]
    lines = [_calls_rule(syntax, many, token_id), f"call: {' | '.join(names)}"]
    for rule, (name, parameters) in zip(names, tools.items(), strict=True):
        opening = json.dumps(f'{{"name": {json.dumps(name)}, "{syntax.arguments_key}": ')
        lines.append(f'{rule}: {opening} {rule}_arguments{_id_field(syntax)} "}}"')
        lines.append(f"{rule}_arguments: %json {json.dumps(_styled(parameters))}")
    return "\n".join(lines) + "\n"


def _calls_rule(syntax: ToolSyntax, many: bool, token_id: Callable[[str], int | None]) -> str:
    start, end = (_marker(m, token_id) for m in (syntax.start, syntax.end))
    pad = json.dumps(syntax.padding) if syntax.padding else ""
    if syntax.listed:  # one block holding a JSON list
        body = '"[" call (", " call)* "]"' if many else '"[" call "]"'
        return "start: " + " ".join(part for part in (start, pad, body, end) if part)
    block = " ".join(part for part in (start, pad, "call", pad, end) if part)
    if not many:
        return f"start: {block}"
    return f'start: block ("\\n" block)*\nblock: {block}'


def _id_field(syntax: ToolSyntax) -> str:
    """Mistral's template writes each call's id into the call object: the model may write one too."""
    if syntax.id_length is None:
        return ""
    return f' (", \\"id\\": \\"" /[A-Za-z0-9]{{{syntax.id_length}}}/ "\\"")?'


def _marker(text: str, token_id: Callable[[str], int | None]) -> str:
    if not text:
        return ""
    token = token_id(text)
    return f"<[{token}]>" if token is not None else json.dumps(text)


def _styled(parameters: Mapping[str, Any]) -> dict[str, Any]:
    """The arguments are an object even where the schema leaves `type` out (JSON schema would then
    admit any value, and a forced call could carry a number)."""
    return {"type": "object", **parameters, "x-guidance": JSON_STYLE}


def check_parameters(parameters: Mapping[str, Any]) -> str | None:
    """llguidance's complaint about a `parameters` schema (None: it compiles), so a bad schema is a
    400 before any generation rather than a failure midway."""
    from llguidance import LLMatcher

    grammar = LLMatcher.grammar_from_lark(f"start: %json {json.dumps(_styled(parameters))}\n")
    failed, messages = LLMatcher.validate_grammar_with_warnings(grammar)
    if not failed:
        return None
    first = messages[0].split("\n")[0] if messages else "llguidance rejects it"
    return first.split("): ", 1)[-1] if first.startswith("at ") else first
